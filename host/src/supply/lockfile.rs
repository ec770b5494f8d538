//! `sandcrab.lock`, beside the installed plugins: for each, where it came
//! from, the digest it was resolved to, the digests of the files
//! installed, who signed it and what the operator granted it. Every load
//! of an installed plugin is checked against it; an install of a moved
//! tag keeps the locked digest.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plugin::manifest::Capabilities;

/// The lockfile's name in an install folder.
pub const LOCKFILE: &str = "sandcrab.lock";

/// One installed plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    /// The plugin's name (its folder's name).
    pub name: String,
    pub version: String,
    /// What it was installed from, as the operator typed it.
    pub source: String,
    /// The digest the source resolved to (an OCI manifest's, or the
    /// archive's SHA-256).
    pub digest: String,
    /// SHA-256 of the installed component.
    pub component_sha256: String,
    /// SHA-256 of the installed `plugin.toml`.
    pub manifest_sha256: String,
    /// Who signed it (`NAME (SHA256:…)`); absent: unsigned, installed
    /// with `--allow-unsigned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// When (RFC 3339).
    pub installed_at: String,
    /// What the operator granted at install or at the last update.
    pub granted: Capabilities,
    /// The tools it declares (no other installed plugin may take them).
    #[serde(default)]
    pub tools: Vec<String>,
}

/// The lockfile of one install folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    #[serde(default = "version_one")]
    pub version: u32,
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<Locked>,
}

fn version_one() -> u32 {
    1
}

impl Default for Lockfile {
    fn default() -> Self {
        Lockfile {
            version: version_one(),
            plugins: Vec::new(),
        }
    }
}

/// A lockfile that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path}: not a sandcrab lockfile: {reason} (it is written by `sandcrab plugins install`; restore it, or remove it and install again)"
    )]
    Malformed { path: PathBuf, reason: String },
}

impl Lockfile {
    /// The lockfile of `dir` (empty when there is none).
    pub fn read(dir: &Path) -> Result<Lockfile, LockError> {
        let path = dir.join(LOCKFILE);
        let bytes =
            match crate::safe_fs::read_regular(&path, 4 << 20, crate::safe_fs::Links::Refuse) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Lockfile::default());
                }
                Err(source) => return Err(LockError::Io { path, source }),
            };
        let malformed = |reason: String| LockError::Malformed {
            path: path.clone(),
            reason,
        };
        let text = String::from_utf8(bytes).map_err(|_| malformed("not UTF-8".into()))?;
        let lock: Lockfile = toml::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        if lock.version != 1 {
            return Err(malformed(format!(
                "version {} (this sandcrab reads 1)",
                lock.version
            )));
        }
        Ok(lock)
    }

    /// Write it to `dir` atomically (a reader sees the old or the new).
    pub fn write(&self, dir: &Path) -> Result<(), LockError> {
        let path = dir.join(LOCKFILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut text = String::from(
            "# Written by `sandcrab plugins install|update|remove`: what each installed\n# plugin was resolved to, who signed it and what it was granted. Every load\n# is checked against it.\n\n",
        );
        text.push_str(&toml::to_string(self).expect("TOML of a lockfile"));
        super::files::replace(dir, LOCKFILE, text.as_bytes()).map_err(io)
    }

    /// The entry of plugin `name`.
    pub fn get(&self, name: &str) -> Option<&Locked> {
        self.plugins.iter().find(|p| p.name == name)
    }

    /// Add or replace the entry of `locked.name`.
    pub fn put(&mut self, locked: Locked) {
        self.plugins.retain(|p| p.name != locked.name);
        self.plugins.push(locked);
        self.plugins.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Drop the entry of `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.plugins.len();
        self.plugins.retain(|p| p.name != name);
        before != self.plugins.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lockfile_round_trips_and_a_broken_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Lockfile::read(dir.path()).unwrap(), Lockfile::default());
        let mut lock = Lockfile::default();
        lock.put(Locked {
            name: "hello".into(),
            version: "0.1.0".into(),
            source: "oci://localhost/acme/hello:v1".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            component_sha256: "b".repeat(64),
            manifest_sha256: "c".repeat(64),
            signer: Some("acme (SHA256:x)".into()),
            installed_at: "2026-11-27T00:00:00Z".into(),
            granted: Capabilities::default(),
            tools: vec!["hello".into()],
        });
        lock.write(dir.path()).unwrap();
        assert_eq!(Lockfile::read(dir.path()).unwrap(), lock);
        std::fs::write(dir.path().join(LOCKFILE), "plugin = 3").unwrap();
        let err = Lockfile::read(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("sandcrab.lock") && err.contains("not a sandcrab lockfile"),
            "{err}"
        );
    }
}
