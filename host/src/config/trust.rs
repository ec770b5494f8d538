//! Trusting a project: the operator's explicit act, recorded in their own
//! configuration file with a fingerprint of everything the project could
//! use to act as the operator (`sandcrab.toml` and all of `.sandcrab/`). A
//! changed fingerprint makes the project untrusted again.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::layers::PROJECT_FILE;

/// The project's own directory (workspace plugins live under it).
pub const PROJECT_DIR: &str = ".sandcrab";

/// Most files fingerprinted under `.sandcrab/`.
const MAX_FILES: usize = 10_000;
/// Most bytes fingerprinted in all.
const MAX_BYTES: u64 = 2 << 30;

/// `[trust."<workspace>"]` in the operator's configuration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// Fingerprint of the project configuration when it was trusted.
    pub sha256: String,
    /// When (RFC 3339).
    #[serde(default)]
    pub trusted_at: Option<String>,
}

/// Whether the operator trusts a project as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustState {
    /// Never trusted.
    Untrusted,
    Trusted,
    /// Trusted once; the files changed since.
    Changed,
}

/// Why trust could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot fingerprint the project in {path}: {message}")]
    Fingerprint { path: PathBuf, message: String },
    #[error(transparent)]
    Config(#[from] super::edit::EditError),
    #[error("no user configuration directory (set HOME or XDG_CONFIG_HOME, or pass --config)")]
    NoUserConfig,
}

/// The record key for `workspace` (its canonical path).
pub fn key(workspace: &Path) -> String {
    workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf())
        .display()
        .to_string()
}

/// The trust state of `workspace` under `records`.
pub fn state(workspace: &Path, records: &BTreeMap<String, TrustRecord>) -> TrustState {
    let Some(record) = records.get(&key(workspace)) else {
        return TrustState::Untrusted;
    };
    match fingerprint(workspace) {
        Ok(now) if now == record.sha256 => TrustState::Trusted,
        _ => TrustState::Changed,
    }
}

/// SHA-256 over `sandcrab.toml` and every entry under `.sandcrab/` (paths,
/// kinds and contents; links are hashed as their target text, never
/// followed).
pub fn fingerprint(workspace: &Path) -> Result<String, String> {
    let mut hasher = Sha256::new();
    let mut budget = Budget { files: 0, bytes: 0 };
    entry(&mut hasher, workspace, Path::new(PROJECT_FILE), &mut budget)?;
    entry(&mut hasher, workspace, Path::new(PROJECT_DIR), &mut budget)?;
    Ok(hex(&hasher.finalize()))
}

struct Budget {
    files: usize,
    bytes: u64,
}

fn entry(h: &mut Sha256, root: &Path, rel: &Path, budget: &mut Budget) -> Result<(), String> {
    let path = root.join(rel);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    budget.files += 1;
    if budget.files > MAX_FILES {
        return Err(format!("more than {MAX_FILES} files under {PROJECT_DIR}/"));
    }
    let name = rel.as_os_str().as_bytes();
    let ty = meta.file_type();
    if ty.is_symlink() {
        let target = std::fs::read_link(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        record(h, b'l', name, target.as_os_str().as_bytes());
    } else if ty.is_dir() {
        record(h, b'd', name, b"");
        let mut children: Vec<_> = std::fs::read_dir(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        children.sort();
        for child in children {
            entry(h, root, &rel.join(child), budget)?;
        }
    } else if ty.is_file() {
        budget.bytes += meta.len();
        if budget.bytes > MAX_BYTES {
            return Err(format!("more than {MAX_BYTES} bytes under {PROJECT_DIR}/"));
        }
        let content = crate::safe_fs::read_regular(&path, MAX_BYTES, crate::safe_fs::Links::Refuse)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        record(h, b'f', name, &content);
    } else {
        // FIFOs, sockets, devices: their presence is what counts.
        record(h, b'o', name, b"");
    }
    Ok(())
}

fn record(h: &mut Sha256, kind: u8, name: &[u8], content: &[u8]) {
    h.update([kind]);
    h.update((name.len() as u64).to_le_bytes());
    h.update(name);
    h.update((content.len() as u64).to_le_bytes());
    h.update(content);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Record that the operator trusts `workspace` as it is now, in `file`
/// (created if missing, other content kept as written). Returns the
/// fingerprint.
pub fn trust(file: &Path, workspace: &Path) -> Result<String, TrustError> {
    let sha = fingerprint(workspace).map_err(|message| TrustError::Fingerprint {
        path: workspace.to_path_buf(),
        message,
    })?;
    super::edit::edit(file, |doc| {
        let trust = doc
            .entry("trust")
            .or_insert(toml_edit::table())
            .as_table_mut()
            .ok_or("`trust` is not a table")?;
        trust.set_implicit(true);
        let mut record = toml_edit::Table::new();
        record["sha256"] = toml_edit::value(sha.clone());
        record["trusted_at"] = toml_edit::value(crate::time::now_rfc3339());
        trust.insert(&key(workspace), toml_edit::Item::Table(record));
        Ok(())
    })?;
    Ok(sha)
}

/// Remove the trust record of `workspace` from `file`; whether there was one.
pub fn revoke(file: &Path, workspace: &Path) -> Result<bool, TrustError> {
    let mut found = false;
    if !file.exists() {
        return Ok(false);
    }
    super::edit::edit(file, |doc| {
        if let Some(trust) = doc.get_mut("trust").and_then(|t| t.as_table_mut()) {
            found = trust.remove(&key(workspace)).is_some();
        }
        Ok(())
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_under_the_project_changes_the_fingerprint() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        let empty = fingerprint(w).unwrap();
        std::fs::write(w.join(PROJECT_FILE), "model = \"a\"").unwrap();
        let one = fingerprint(w).unwrap();
        assert_ne!(empty, one);
        std::fs::create_dir_all(w.join(".sandcrab/plugins/p")).unwrap();
        let two = fingerprint(w).unwrap();
        assert_ne!(one, two);
        std::fs::write(w.join(".sandcrab/plugins/p/plugin.toml"), "x").unwrap();
        let three = fingerprint(w).unwrap();
        assert_ne!(two, three);
        std::os::unix::fs::symlink("/etc", w.join(".sandcrab/link")).unwrap();
        assert_ne!(three, fingerprint(w).unwrap());
        assert_eq!(fingerprint(w).unwrap(), fingerprint(w).unwrap());
    }

    #[test]
    fn trust_is_recorded_without_losing_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "# my settings\nprovider = \"openai\"\n").unwrap();
        let sha = trust(&file, &ws).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("# my settings\nprovider = \"openai\"\n"),
            "{text}"
        );
        let config = crate::config::Config::parse(&text, &file).unwrap();
        assert_eq!(config.trust[&key(&ws)].sha256, sha);
        assert_eq!(state(&ws, &config.trust), TrustState::Trusted);
        std::fs::write(ws.join(PROJECT_FILE), "model = \"b\"").unwrap();
        assert_eq!(state(&ws, &config.trust), TrustState::Changed);
        assert!(revoke(&file, &ws).unwrap());
        let config = crate::config::Config::read(&file).unwrap();
        assert!(config.trust.is_empty());
    }
}
