//! Changing the operator's configuration file from a command (`sandcrab
//! trust`, `sandcrab plugins pin`): the document is edited in place, so
//! comments and layout survive, and replaced atomically.

use std::path::{Path, PathBuf};

/// Why the configuration file could not be changed.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct EditError {
    pub path: PathBuf,
    pub message: String,
}

/// Edit the TOML document in `file`, keeping its formatting; written
/// atomically, a new file readable by the user only.
pub fn edit(
    file: &Path,
    change: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<(), &'static str>,
) -> Result<(), EditError> {
    let fail = |message: String| EditError {
        path: file.to_path_buf(),
        message,
    };
    // A link (a dotfiles checkout) keeps leading to the file: the file it
    // leads to is the one replaced.
    let real = std::fs::canonicalize(file).ok();
    let file = real.as_deref().unwrap_or(file);
    // The operator's configuration, and nothing else the host keeps.
    crate::kept::current()
        .host_write(file, Some(crate::kept::Item::OperatorConfig))
        .map_err(|refusal| fail(refusal.to_string()))?;
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(e.to_string())),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| fail(format!("{e}")))?;
    change(&mut doc).map_err(|m| fail(m.to_string()))?;
    let dir = file
        .parent()
        .ok_or_else(|| fail("no parent directory".into()))?;
    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(e.to_string()))?;
    if let Ok(meta) = std::fs::metadata(file) {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    std::io::Write::write_all(&mut tmp, doc.to_string().as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    tmp.persist(file).map_err(|e| fail(e.error.to_string()))?;
    Ok(())
}

/// Pin the component of plugin `plugin` to `sha256` in `file`:
/// `[policy.plugins.NAME] sha256 = "…"`, other grants kept.
pub fn pin_plugin(file: &Path, plugin: &str, sha256: &str) -> Result<(), EditError> {
    edit(file, |doc| {
        let policy = table(doc.as_table_mut(), "policy")?;
        let plugins = table(policy, "plugins")?;
        plugins.set_implicit(true);
        let grant = table(plugins, plugin)?;
        grant["sha256"] = toml_edit::value(sha256);
        Ok(())
    })
}

/// Grant plugin `plugin` what `request` asks for, for the component
/// `sha256`: `[policy.plugins.NAME]` gets `workspace`, `paths`, `programs`,
/// `env` and `network` as requested and `granted_sha256`; its other keys
/// (limits, overrides, a pin) are kept.
pub fn grant_plugin(
    file: &Path,
    plugin: &str,
    request: &crate::plugin::manifest::Capabilities,
    sha256: &str,
) -> Result<(), EditError> {
    edit(file, |doc| {
        let policy = table(doc.as_table_mut(), "policy")?;
        let plugins = table(policy, "plugins")?;
        plugins.set_implicit(true);
        let grant = table(plugins, plugin)?;
        grant["workspace"] = toml_edit::value(request.workspace.to_string());
        let strings = |items: &[String]| {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(item.as_str());
            }
            toml_edit::value(array)
        };
        grant["programs"] = strings(&request.programs);
        grant["env"] = strings(&request.env);
        // On request is not a grant: each call's network is decided then.
        grant["network"] =
            toml_edit::value(request.network == crate::plugin::manifest::NetworkUse::Always);
        let mut paths = toml_edit::Array::new();
        for p in &request.paths {
            let mut entry = toml_edit::InlineTable::new();
            entry.insert("path", p.path.display().to_string().into());
            entry.insert("access", p.access.to_string().into());
            paths.push(entry);
        }
        grant["paths"] = toml_edit::value(paths);
        if !request.http.is_empty() {
            // Origins already granted stay as written (with their methods);
            // the asked-for ones missing are added.
            let mut http = grant
                .get("http")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            let present: Vec<String> = http
                .iter()
                .filter_map(|v| {
                    v.as_str().map(str::to_string).or_else(|| {
                        v.as_inline_table()
                            .and_then(|t| t.get("origin"))
                            .and_then(|o| o.as_str())
                            .map(str::to_string)
                    })
                })
                .collect();
            for origin in &request.http {
                let origin = origin.to_string();
                if !present.contains(&origin) {
                    http.push(origin.as_str());
                }
            }
            grant["http"] = toml_edit::value(http);
        }
        grant["granted_sha256"] = toml_edit::value(sha256);
        Ok(())
    })
}

/// Drop `[policy.plugins.NAME]` from `file` (a removed plugin's grant
/// must not pass to a later plugin of the same name).
pub fn remove_plugin_grant(file: &Path, plugin: &str) -> Result<(), EditError> {
    edit(file, |doc| {
        if let Some(plugins) = doc
            .get_mut("policy")
            .and_then(|p| p.as_table_mut())
            .and_then(|p| p.get_mut("plugins"))
            .and_then(|p| p.as_table_mut())
        {
            plugins.remove(plugin);
        }
        Ok(())
    })
}

/// The table `key` of `parent`, created if missing.
fn table<'a>(
    parent: &'a mut toml_edit::Table,
    key: &str,
) -> Result<&'a mut toml_edit::Table, &'static str> {
    parent
        .entry(key)
        .or_insert(toml_edit::table())
        .as_table_mut()
        .ok_or("a key on the way to [policy.plugins.NAME] is not a table")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_adds_the_asked_origins_and_keeps_the_operators_own() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[policy.plugins.t]\nhttp = [{ origin = \"https://a.example.com\", methods = [\"GET\"] }]\n",
        )
        .unwrap();
        let request = crate::plugin::manifest::Capabilities {
            http: vec![
                "https://a.example.com".parse().unwrap(),
                "https://b.example.com".parse().unwrap(),
            ],
            ..Default::default()
        };
        grant_plugin(&file, "t", &request, "ab").unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("methods = [\"GET\"]"), "{text}");
        assert!(text.contains("\"https://b.example.com\""), "{text}");
        assert_eq!(text.matches("a.example.com").count(), 1, "{text}");
    }

    #[test]
    fn a_pin_joins_the_plugin_grant_and_keeps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "# mine\n[policy.plugins.lint]\nprograms = [\"eslint\"] # needed\n",
        )
        .unwrap();
        pin_plugin(&file, "lint", "ab12").unwrap();
        pin_plugin(&file, "other", "cd34").unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# mine\n"), "{text}");
        assert!(text.contains("programs = [\"eslint\"] # needed"), "{text}");
        let config = crate::config::Config::parse(&text, &file).unwrap();
        let lint = &config.policy.plugins["lint"];
        assert_eq!(lint.sha256.as_deref(), Some("ab12"));
        assert_eq!(lint.programs, ["eslint"]);
        assert_eq!(
            config.policy.plugins["other"].sha256.as_deref(),
            Some("cd34")
        );
    }
}
