//! The environment a child program gets: nothing inherited, only what the
//! plugin was granted, plus TMPDIR/HOME pointing at the private temp dir
//! where appropriate. Secret-looking names never pass unless the grant
//! named them (the policy already enforces that; this is the last check).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Git settings every program's git gets, as command-line configuration
/// (it wins over the repository's own files): nothing a workspace's
/// configuration says makes it run a program — no file-system monitor, no
/// hooks, no pager, no external diff, no transport helper, no credential
/// helper — whoever asked for the git.
pub const GIT_HARDENING: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "ssh"),
    ("diff.external", ""),
    ("protocol.ext.allow", "never"),
    ("credential.helper", ""),
];

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
        let mut env = ChildEnv { vars };
        env.harden_git();
        env
    }

    /// Set [`GIT_HARDENING`] (again, after a caller set variables of its
    /// own: a plugin's programs may not take it away).
    pub fn harden_git(&mut self) {
        self.vars
            .insert("GIT_CONFIG_COUNT".into(), GIT_HARDENING.len().to_string());
        for (i, (key, value)) in GIT_HARDENING.iter().enumerate() {
            self.vars
                .insert(format!("GIT_CONFIG_KEY_{i}"), key.to_string());
            self.vars
                .insert(format!("GIT_CONFIG_VALUE_{i}"), value.to_string());
        }
        self.vars.insert("GIT_TERMINAL_PROMPT".into(), "0".into());
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
