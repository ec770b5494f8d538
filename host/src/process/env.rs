//! The environment a child program gets: nothing inherited, only what the
//! plugin was granted, plus TMPDIR/HOME pointing at the private temp dir
//! where appropriate. Secret-looking names never pass unless the grant
//! named them (the policy already enforces that; this is the last check).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// PATH given to children when the plugin was not granted the host's.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Builder for a child's environment.
#[derive(Debug, Clone, Default)]
pub struct ChildEnv {
    vars: BTreeMap<String, String>,
}

impl ChildEnv {
    /// The base environment: PATH, TMPDIR and HOME. `home` is the host HOME
    /// when the plugin may see it, otherwise the temp dir is used.
    pub fn base(temp_dir: &Path, path: Option<&str>, home: Option<&str>) -> Self {
        let mut vars = BTreeMap::new();
        vars.insert("PATH".into(), path.unwrap_or(DEFAULT_PATH).to_string());
        let tmp = temp_dir.display().to_string();
        vars.insert("HOME".into(), home.unwrap_or(&tmp).to_string());
        vars.insert("TMPDIR".into(), tmp);
        ChildEnv { vars }
    }

    /// Set a variable.
    pub fn set(&mut self, name: &str, value: &str) {
        self.vars.insert(name.to_string(), value.to_string());
    }

    /// The variables, sorted by name.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }
}

/// The first executable named `program` on `path`. Relative entries (`.`,
/// `bin`) are skipped: they would resolve against wherever sandcrab runs.
pub fn find_on_path(program: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
