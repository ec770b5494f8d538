//! The trusted layer and the project layer, and how they combine: the
//! project file is laid over the trusted file key by key, keeping only
//! project settings unless the operator trusts the project.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checked::{Keep, check};
use super::read::{project_file, trusted_file};
use super::trust::{self, TrustState};
use super::{Config, ConfigError, resolve_dir};

use super::project::PROJECT_DIR;
pub use super::project::PROJECT_FILE;

/// Keys an untrusted project file may set (dotted paths; `*` matches any
/// one name). Everything else decides where keys go, what runs and how it
/// is confined, so only the operator may set it.
pub const PROJECT_KEYS: &[&str] = &[
    "model",
    // `[agent]` key by key: `agent.tools.include` would let a repository
    // offer tools the operator's list leaves out; `exclude` only narrows.
    "agent.max_turns",
    "agent.max_tool_rounds",
    "agent.loop_detection_window",
    "agent.max_subagent_depth",
    "agent.max_subagents",
    "agent.subagent_max_turns",
    "agent.subagent_models",
    "agent.instructions",
    "agent.max_tokens",
    "agent.temperature",
    "agent.reasoning_effort",
    "agent.tools.exclude",
    "truncation",
    "jobs",
    // Its own rules may only ask and deny (checked when they are read);
    // its mode is a floor (read, then kept out of the merge).
    "approvals.rules",
    "approvals.mode",
    "providers.*.model",
    "providers.*.max_tokens",
    "summarization.chunk_size",
    "summarization.keep_recent",
    "summarization.max_summary_tokens",
    "summarization.clip_first",
    "summarization.clip_last",
    "summarization.buffer",
    "summarization.context_budget",
    "summarization.prompt",
    "summarization.name",
];

/// Tables no project file sets, trusted or not (dropped, with a warning,
/// as the file is read): the trust records and consents, what a session
/// may spend, and where what it does is reported (with its content, if
/// captured).
pub const OPERATOR_ONLY: &[&str] = &[
    "trust",
    "consented",
    "budget",
    "telemetry",
    // Where installed plugins are, and where their downloads may be sent:
    // a lockfile there vouches for what loads.
    "plugin_install_dir",
    "plugin_redirect_hosts",
];

/// The configuration in force and where it came from.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    pub config: Config,
    /// The trusted file read (explicit or the user's), if any.
    pub trusted_path: Option<PathBuf>,
    /// The workspace's own configuration, if it has any.
    pub project: Option<ProjectLayer>,
    /// Settings that were ignored and why, one line each, naming the file.
    pub warnings: Vec<String>,
}

/// The workspace's `sandcrab.toml` and `.sandcrab/`.
#[derive(Debug, Clone)]
pub struct ProjectLayer {
    /// `<workspace>/sandcrab.toml` (it may not exist).
    pub path: PathBuf,
    /// The operator trusts the project as it is now.
    pub trusted: bool,
    /// Where the links of a trusted project lead (canonical): loaded as
    /// trusted, so kept read-only like the project itself.
    pub link_targets: Vec<PathBuf>,
}

impl LoadedConfig {
    /// Whether `<workspace>/.sandcrab/plugins` may be loaded.
    pub fn workspace_plugins_allowed(&self) -> bool {
        self.project.as_ref().is_some_and(|p| p.trusted)
    }
}

/// Deserialize a merged table, then [`settle`] it.
pub fn into_config(table: toml::Table, path: &Path) -> Result<Config, ConfigError> {
    let config: Config = table
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.message().trim_end().to_string(),
        })?;
    settle(config, path)
}

/// Check what no type says (the summarization's numbers) and resolve
/// `plugin_dirs` against the file's folder.
pub fn settle(mut config: Config, path: &Path) -> Result<Config, ConfigError> {
    config
        .summarization
        .validate()
        .map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let base = path.parent().unwrap_or(Path::new("."));
    config.plugin_dirs = config
        .plugin_dirs
        .iter()
        .map(|dir| resolve_dir(base, dir))
        .collect();
    config.plugin_install_dir = config
        .plugin_install_dir
        .as_deref()
        .map(|dir| resolve_dir(base, dir));
    Ok(config)
}

/// What the project file adds to the operator's: its keys to merge, its
/// rules (ask and deny only) and its approvals floor.
struct ProjectOver {
    table: toml::Table,
    rules: crate::approvals::Rules,
    floor: Option<crate::approvals::Mode>,
}

/// Read the project file `path` (its `text`), keeping what a project
/// trusted as `trusted` may set; the keys it may not set are warnings.
fn project_over(
    text: &str,
    path: &Path,
    trusted: bool,
    workspace: &Path,
    warnings: &mut Vec<String>,
) -> Result<ProjectOver, ConfigError> {
    let keep = if trusted {
        Keep::AllButHooks
    } else {
        Keep::ProjectKeys
    };
    let checked = check(text, path, keep)?;
    let config = settle(checked.config, path)?;
    let rules = approval_rules(&config, text, path, false)?;
    let mut table = checked.table;
    // A project, trusted or not, may make asking stricter, never looser:
    // its mode is a floor, and it names no rules file.
    if let Some(approvals) = table.get_mut("approvals").and_then(|v| v.as_table_mut()) {
        approvals.remove("mode");
        approvals.remove("rules_file");
    }
    // Its hooks were read apart (see `project_hooks`), never merged over
    // the operator's.
    for key in checked.dropped {
        warnings.push(ignored(path, &key, workspace));
    }
    Ok(ProjectOver {
        table: absolutize_plugin_dirs(table, path),
        rules,
        floor: config.approvals.mode,
    })
}

/// The hooks `[hooks]` of the project file `path` (its `text`). Those of
/// an untrusted project are read too: they never run, but a guard among
/// them refuses what it matches.
fn project_hooks(
    text: &str,
    path: &Path,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Option<crate::hooks::ProjectHooks> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let value = table.get("hooks")?.clone();
    match value.try_into::<crate::hooks::HooksToml>() {
        Ok(hooks) => Some(crate::hooks::ProjectHooks { hooks, trusted }),
        Err(e) => {
            warnings.push(format!(
                "{}: [hooks] cannot be read ({}); the project's hooks are left out",
                path.display(),
                e.to_string().trim()
            ));
            None
        }
    }
}

/// A project file that cannot be used: the run goes on without it.
fn project_unusable(err: &ConfigError) -> String {
    format!(
        "{err}
  {PROJECT_FILE} is ignored: sandcrab goes on without the project's settings (its rules and approvals floor included); fix the file to use them"
    )
}

/// Read the trusted file and the project file of `workspace`; combine them.
pub fn load(workspace: &Path, explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    let trusted_path = match explicit {
        // Wherever it is, the operator's file is kept from every program
        // (see `crate::kept`).
        Some(path) => Some(path.to_path_buf()),
        None => Config::user_file().filter(|p| p.exists()),
    };
    // Each file is deserialized once, to validate it (naming it in
    // errors) before it is merged; the merged table once more at the end.
    let mut rules = crate::approvals::Rules::default();
    let mut project_floor = None;
    let (mut table, trust_records) = match &trusted_path {
        Some(path) => {
            let text = trusted_file(path)?;
            let checked = check(&text, path, Keep::All)?;
            let (table, trusted) = (checked.table, settle(checked.config, path)?);
            // Rules written for another workspace stay out.
            rules = approval_rules(&trusted, &text, path, true)?.for_workspace(workspace);
            if let Some(file) = &trusted.approvals.rules_file {
                rules.extend(rules_file(path, file)?.for_workspace(workspace));
            }
            (absolutize_plugin_dirs(table, path), trusted.trust.projects)
        }
        None => (toml::Table::new(), BTreeMap::new()),
    };

    let mut grant_files = BTreeMap::new();
    if let Some(path) = &trusted_path {
        note_grant_files(&table, path, &mut grant_files);
    }
    let mut warnings = Vec::new();
    let project_path = workspace.join(PROJECT_FILE);
    // A project file that cannot be read is a warning: a repository
    // must not lock the operator out.
    let project_text = project_file(&project_path).unwrap_or_else(|err| {
        warnings.push(project_unusable(&err));
        None
    });
    let has_dot_dir = std::fs::symlink_metadata(workspace.join(PROJECT_DIR)).is_ok();
    let project = if project_text.is_some() || has_dot_dir {
        let (state, found) = trust::state_of(workspace, &trust_records);
        if let TrustState::Changed = state {
            warnings.push(format!(
                "{}: the project's configuration ({PROJECT_FILE}, {}/) changed since you trusted it; it is untrusted until you review it and run `sandcrab trust {}` again",
                workspace.display(),
                PROJECT_DIR,
                workspace.display()
            ));
        }
        Some(ProjectLayer {
            path: project_path.clone(),
            trusted: state == TrustState::Trusted,
            link_targets: found.map(|f| f.link_targets).unwrap_or_default(),
        })
    } else {
        None
    };

    if let (Some(text), Some(layer)) = (&project_text, &project) {
        match project_over(text, &project_path, layer.trusted, workspace, &mut warnings) {
            Ok(over) => {
                rules.extend(over.rules);
                project_floor = over.floor;
                note_grant_files(&over.table, &project_path, &mut grant_files);
                merge(&mut table, over.table);
            }
            Err(err) => warnings.push(project_unusable(&err)),
        }
    }
    let project_hooks = match (&project_text, &project) {
        (Some(text), Some(layer)) => {
            project_hooks(text, &project_path, layer.trusted, &mut warnings)
        }
        _ => None,
    };
    let mut config = into_config(table, trusted_path.as_deref().unwrap_or(&project_path))?;
    config.project_hooks = project_hooks;
    config.project_trusted = project.as_ref().is_some_and(|p| p.trusted);
    config.policy.sources = grant_files;
    config.approvals.parsed = rules;
    config.approvals.project_floor = project_floor;
    config.approvals.remember_in = explicit.map(Path::to_path_buf).or_else(Config::user_file);
    Ok(LoadedConfig {
        config,
        trusted_path,
        project,
        warnings,
    })
}

/// The rules of the rules file `file` that the operator's configuration
/// `config_path` names (relative to it). Like the configuration itself,
/// no tool or program may change or read it.
fn rules_file(config_path: &Path, file: &Path) -> Result<crate::approvals::Rules, ConfigError> {
    let path = match config_path.parent() {
        Some(dir) if file.is_relative() => dir.join(file),
        _ => file.to_path_buf(),
    };
    let text = trusted_file(&path)?;
    crate::approvals::Rules::parse(&text, &path, crate::approvals::RuleSource::Trusted).map_err(
        |e| ConfigError::Parse {
            path: path.clone(),
            message: e.to_string(),
        },
    )
}

/// The approval rules of a file (`config`, parsed from `text`): read
/// again from the text, for their lines, only when it has any.
/// `trusted`: the operator's; otherwise a project's, which may only ask and
/// deny.
pub fn approval_rules(
    config: &Config,
    text: &str,
    path: &Path,
    trusted: bool,
) -> Result<crate::approvals::Rules, ConfigError> {
    use crate::approvals::{RuleSource, Rules};
    if config.approvals.rules.is_empty() {
        return Ok(Rules::default());
    }
    let origin = if trusted {
        RuleSource::Trusted
    } else {
        RuleSource::Project
    };
    Rules::parse(text, path, origin).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: match e.at.rsplit_once(':') {
            Some((_, line)) if line.parse::<usize>().is_ok() => {
                format!("line {line}: {}", e.message)
            }
            _ => e.message,
        },
    })
}

/// Note `file` as where each `[policy.plugins.NAME]` and `[policy.mcp.NAME]`
/// of `table` came from (a later file's note replaces an earlier one's).
fn note_grant_files(table: &toml::Table, file: &Path, into: &mut BTreeMap<String, String>) {
    let Some(toml::Value::Table(policy)) = table.get("policy") else {
        return;
    };
    for section in ["plugins", "mcp"] {
        if let Some(toml::Value::Table(grants)) = policy.get(section) {
            for name in grants.keys() {
                into.insert(format!("{section}.{name}"), file.display().to_string());
            }
        }
    }
}

fn ignored(file: &Path, key: &str, workspace: &Path) -> String {
    format!(
        "{}: ignored `{key}`: only the operator may set it, and this project is not trusted (review the file, then run `sandcrab trust {}`, or set it in {})",
        file.display(),
        workspace.display(),
        crate::user_files::config_file_shown()
    )
}

pub(super) enum Allowance {
    /// The key and everything under it.
    Whole,
    /// Some keys below it.
    Inside,
    None,
}

pub(super) fn allowance(path: &str) -> Allowance {
    let parts: Vec<&str> = path.split('.').collect();
    let mut inside = false;
    for pattern in PROJECT_KEYS {
        let want: Vec<&str> = pattern.split('.').collect();
        let matches = |n: usize| {
            parts
                .iter()
                .zip(&want)
                .take(n)
                .all(|(p, w)| *w == "*" || p == w)
        };
        if parts.len() >= want.len() && matches(want.len()) {
            return Allowance::Whole;
        }
        if parts.len() < want.len() && matches(parts.len()) {
            inside = true;
        }
    }
    if inside {
        Allowance::Inside
    } else {
        Allowance::None
    }
}

/// `plugin_dirs` as absolute paths, so merging keeps each file's base.
fn absolutize_plugin_dirs(mut table: toml::Table, path: &Path) -> toml::Table {
    let base = path.parent().unwrap_or(Path::new("."));
    if let Some(toml::Value::Array(dirs)) = table.get_mut("plugin_dirs") {
        for dir in dirs.iter_mut() {
            if let toml::Value::String(s) = dir {
                *s = resolve_dir(base, Path::new(s.as_str()))
                    .display()
                    .to_string();
            }
        }
    }
    table
}

/// Lay `over` onto `base`: tables merge key by key, `plugin_dirs` lists
/// concatenate, anything else is replaced.
/// Lists a later layer adds to instead of replacing: a project may add
/// plugin folders and exclude more tools, never drop what the operator set.
const APPENDED_LISTS: &[&str] = &["plugin_dirs", "agent.tools.exclude"];

fn merge(base: &mut toml::Table, over: toml::Table) {
    merge_at(base, over, "");
}

fn merge_at(base: &mut toml::Table, over: toml::Table, prefix: &str) {
    for (key, value) in over {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge_at(b, o, &path),
            (Some(toml::Value::Array(b)), toml::Value::Array(o))
                if APPENDED_LISTS.contains(&path.as_str()) =>
            {
                b.extend(o)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key` (dotted) set to a value of the wrong type: the error says
    /// whether the typed configuration knows the key.
    fn knows(key: &str) -> bool {
        let (section, last) = key.rsplit_once('.').unwrap_or(("", key));
        let text = if section.is_empty() {
            format!("{last} = {{ probe = 1 }}\n")
        } else {
            format!("[{section}]\n{last} = {{ probe = 1 }}\n")
        };
        let err = Config::parse(&text, Path::new("/p/sandcrab.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        !err.contains(&format!("unknown field `{last}`"))
    }

    #[test]
    fn every_project_key_is_a_field_of_the_typed_configuration() {
        for pattern in PROJECT_KEYS {
            let key = pattern.replace('*', "some_id");
            assert!(
                knows(&key),
                "PROJECT_KEYS names {pattern}, which no typed field has"
            );
        }
        // The probe can tell: a key nothing has is unknown.
        assert!(!knows("agent.max_turnz") && !knows("summarization.chunk"));
    }

    #[test]
    fn a_mistyped_section_key_fails_at_load_naming_the_file() {
        for (text, key) in [
            ("[agent]\nmax_turnz = 3\n", "max_turnz"),
            ("[jobs]\nbackground_after = 3\n", "background_after"),
            ("[truncation]\nshell = { chars = 10 }\n", "mode"),
            ("[summarization]\nchunk_size = 0\n", "chunk_size"),
        ] {
            let err = Config::parse(text, Path::new("/p/sandcrab.toml"))
                .expect_err(text)
                .to_string();
            assert!(
                err.starts_with("/p/sandcrab.toml:") && err.contains(key),
                "{err}"
            );
        }
    }

    fn filtered(text: &str) -> (toml::Table, Vec<String>) {
        let checked = check(text, Path::new("/p/sandcrab.toml"), Keep::ProjectKeys).unwrap();
        (checked.table, checked.dropped)
    }

    #[test]
    fn a_projects_unreadable_hooks_cost_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(
            ws.join(PROJECT_FILE),
            "[[approvals.rules]]\nshell = [\"rm\"]\ndecision = \"deny\"\n\n[[hooks.PreToolUse]]\nmatcher = 5\nhooks = [{ type = \"command\", command = \"x\", bogus = 1 }]\n",
        )
        .unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(&user, "").unwrap();
        for trusted in [false, true] {
            if trusted {
                super::super::trust::trust(&user, &ws).unwrap();
            }
            let loaded = load(&ws, Some(&user)).unwrap();
            assert_eq!(
                loaded.config.project_trusted, trusted,
                "{:?}",
                loaded.warnings
            );
            // Its deny rule holds; its hooks are named as unreadable.
            assert_eq!(
                loaded.config.approvals.parsed.iter().count(),
                1,
                "trusted {trusted}: {:?}",
                loaded.warnings
            );
            assert!(loaded.config.project_hooks.is_none());
            assert!(
                loaded
                    .warnings
                    .iter()
                    .any(|w| w.contains("[hooks] cannot be read")),
                "{:?}",
                loaded.warnings
            );
        }
    }

    #[test]
    fn untrusted_projects_keep_only_project_settings() {
        let (kept, removed) = filtered(
            r#"
            provider = "openai"
            model = "m"
            base_url = "http://evil"
            [agent]
            instructions = "x"
            [providers.openai]
            base_url = "http://evil"
            model = "gpt"
            [summarization]
            chunk_size = 5
            api_key = "k"
            [policy]
            sandbox = "off"
            "#,
        );
        assert_eq!(kept["model"].as_str(), Some("m"));
        assert_eq!(kept["agent"]["instructions"].as_str(), Some("x"));
        assert_eq!(kept["providers"]["openai"]["model"].as_str(), Some("gpt"));
        assert!(kept["providers"]["openai"].get("base_url").is_none());
        assert_eq!(kept["summarization"]["chunk_size"].as_integer(), Some(5));
        let mut removed = removed;
        removed.sort();
        assert_eq!(
            removed,
            [
                "base_url",
                "policy",
                "provider",
                "providers.openai.base_url",
                "summarization.api_key"
            ]
        );
    }

    /// An untrusted project may exclude more tools, never choose which
    /// ones are offered, and never undo the operator's exclusions.
    #[test]
    fn a_project_only_narrows_the_tool_selection() {
        let (kept, removed) = filtered(
            "[agent]\nmax_turns = 4\n[agent.tools]\ninclude = [\"shell\"]\nexclude = []\n",
        );
        assert_eq!(removed, ["agent.tools.include"]);
        assert_eq!(kept["agent"]["max_turns"].as_integer(), Some(4));

        let mut operator: toml::Table =
            toml::from_str("[agent.tools]\nexclude = [\"sort_lines\"]\n").unwrap();
        merge(&mut operator, kept);
        let excluded = operator["agent"]["tools"]["exclude"].as_array().unwrap();
        assert_eq!(
            excluded.len(),
            1,
            "an empty project list undid the operator's"
        );
        let mut operator: toml::Table =
            toml::from_str("[agent.tools]\nexclude = [\"sort_lines\"]\n").unwrap();
        let (project, _) = filtered("[agent.tools]\nexclude = [\"json_keys\"]\n");
        merge(&mut operator, project);
        let excluded: Vec<&str> = operator["agent"]["tools"]["exclude"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(excluded, ["sort_lines", "json_keys"]);
    }

    #[test]
    fn a_privileged_key_spelled_as_a_value_is_removed_too() {
        // `providers = "x"` is not a table: nothing inside is a project key.
        let (kept, removed) = filtered("providers = \"x\"\nsummarization = 3\n");
        assert!(kept.is_empty());
        assert_eq!(removed.len(), 2);
    }

    #[test]
    fn merging_replaces_values_and_merges_tables() {
        let mut base: toml::Table =
            toml::from_str("model = \"a\"\nplugin_dirs = [\"/p\"]\n[agent]\nmax_turns = 3\n")
                .unwrap();
        let over: toml::Table = toml::from_str(
            "model = \"b\"\nplugin_dirs = [\"/q\"]\n[agent]\ninstructions = \"i\"\n",
        )
        .unwrap();
        merge(&mut base, over);
        assert_eq!(base["model"].as_str(), Some("b"));
        assert_eq!(base["plugin_dirs"].as_array().unwrap().len(), 2);
        assert_eq!(base["agent"]["max_turns"].as_integer(), Some(3));
        assert_eq!(base["agent"]["instructions"].as_str(), Some("i"));
    }
}
