//! Trusting a project: the operator's explicit act, recorded in their own
//! configuration file with a fingerprint of everything the project could
//! use to act as the operator (`sandcrab.toml` and all of `.sandcrab/`,
//! and whatever links there lead to). A changed fingerprint makes the
//! project untrusted again, and [`ProjectSeal`] lets a plugin loader check
//! that what it is about to load is exactly what was trusted.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::plugin::integrity::sha256_hex;

pub use super::project::PROJECT_DIR;
use super::project::PROJECT_FILE;

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

/// `[trust]`: the projects the operator trusts (by workspace path), the
/// signers whose plugin signatures count, and whether a third-party plugin
/// needs one.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct TrustSection {
    /// `[trust.signers.NAME]`: keys and what each may sign.
    #[serde(default)]
    pub signers: BTreeMap<String, crate::supply::SignerToml>,
    /// Every third-party plugin must carry a signature by a signer
    /// trusted for its name. Unset: required in locked mode when any
    /// signer is named, else not.
    #[serde(default)]
    pub require_signatures: Option<bool>,
    /// Trusted projects, by workspace path.
    #[serde(flatten)]
    pub projects: BTreeMap<String, TrustRecord>,
}

impl TrustSection {
    /// Whether signatures are required, `locked` saying whether the
    /// sandbox is locked (however it was set: `[policy] mode`, `sandbox`
    /// or `--sandbox`).
    pub fn signatures_required(&self, locked: bool) -> bool {
        self.require_signatures
            .unwrap_or(locked && !self.signers.is_empty())
    }
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
    state_of(workspace, records).0
}

/// The trust state of `workspace`, and what fingerprinting it found when
/// it is trusted.
pub fn state_of(
    workspace: &Path,
    records: &BTreeMap<String, TrustRecord>,
) -> (TrustState, Option<Fingerprint>) {
    let Some(record) = records.get(&key(workspace)) else {
        return (TrustState::Untrusted, None);
    };
    match examine(workspace) {
        Ok(now) if now.sha256 == record.sha256 => (TrustState::Trusted, Some(now)),
        _ => (TrustState::Changed, None),
    }
}

/// SHA-256 over `sandcrab.toml` and every entry under `.sandcrab/`
/// (paths, kinds and contents). A link is hashed as its target text *and*
/// as what it leads to, followed wherever it goes: what the loader would
/// read through it is what was trusted, so changing a link's target —
/// inside the workspace or out — changes the fingerprint.
pub fn fingerprint(workspace: &Path) -> Result<String, String> {
    examine(workspace).map(|f| f.sha256)
}

/// What fingerprinting a project found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    /// The fingerprint.
    pub sha256: String,
    /// SHA-256 of the content of every file read (through links too): a
    /// loader checks that what it loaded is among them.
    pub contents: BTreeSet<String>,
    /// Where links under the project lead (canonical): outside the
    /// project's own files, these must be protected as they are.
    pub link_targets: Vec<PathBuf>,
}

/// Fingerprint `workspace`'s project configuration, following links.
pub fn examine(workspace: &Path) -> Result<Fingerprint, String> {
    let mut walk = Walk {
        hasher: Sha256::new(),
        files: 0,
        bytes: 0,
        found: Fingerprint::default(),
        visited: BTreeSet::new(),
    };
    for name in [PROJECT_FILE, PROJECT_DIR] {
        walk.entry(&workspace.join(name), Path::new(name))?;
    }
    let mut found = walk.found;
    found.sha256 = crate::consent::hex(&walk.hasher.finalize());
    Ok(found)
}

struct Walk {
    hasher: Sha256,
    files: usize,
    bytes: u64,
    found: Fingerprint,
    /// Directories entered through links (canonical), so a link cycle
    /// ends.
    visited: BTreeSet<PathBuf>,
}

impl Walk {
    /// Hash what is at `path`, named `rel` in the fingerprint.
    fn entry(&mut self, path: &Path, rel: &Path) -> Result<(), String> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(format!("more than {MAX_FILES} files under {PROJECT_DIR}/"));
        }
        let name = rel.as_os_str().as_bytes();
        let ty = meta.file_type();
        if ty.is_symlink() {
            let target =
                std::fs::read_link(path).map_err(|e| format!("{}: {e}", path.display()))?;
            record(&mut self.hasher, b'l', name, target.as_os_str().as_bytes());
            return self.through_link(path, rel);
        }
        if ty.is_dir() {
            record(&mut self.hasher, b'd', name, b"");
            let mut children: Vec<_> = std::fs::read_dir(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .flatten()
                .map(|e| e.file_name())
                .collect();
            children.sort();
            for child in children {
                self.entry(&path.join(&child), &rel.join(&child))?;
            }
        } else if ty.is_file() {
            self.bytes += meta.len();
            if self.bytes > MAX_BYTES {
                return Err(format!("more than {MAX_BYTES} bytes under {PROJECT_DIR}/"));
            }
            let content =
                crate::safe_fs::read_regular(path, MAX_BYTES, crate::safe_fs::Links::Refuse)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            self.found.contents.insert(sha256_hex(&content));
            record(&mut self.hasher, b'f', name, &content);
        } else {
            // FIFOs, sockets, devices: their presence is what counts.
            record(&mut self.hasher, b'o', name, b"");
        }
        Ok(())
    }

    /// Hash what the link at `path` leads to, as `rel`.
    fn through_link(&mut self, path: &Path, rel: &Path) -> Result<(), String> {
        let name = rel.as_os_str().as_bytes();
        let Ok(target) = path.canonicalize() else {
            // Leads nowhere (now): that is what was trusted.
            record(&mut self.hasher, b'x', name, b"");
            return Ok(());
        };
        if !self.found.link_targets.contains(&target) {
            self.found.link_targets.push(target.clone());
        }
        if target.is_dir() && !self.visited.insert(target.clone()) {
            // A cycle, or a directory hashed already through another link.
            record(&mut self.hasher, b'c', name, target.as_os_str().as_bytes());
            return Ok(());
        }
        self.entry(&target, rel)
    }
}

/// What the operator trusted of a project: a plugin loader asks it before
/// loading one of the project's own plugins, and gets a yes only while the
/// project is as it was trusted and the plugin's manifest and component
/// are files that were part of it (so nothing changed between the check
/// and the load, however quickly).
#[derive(Debug, Clone)]
pub struct ProjectSeal {
    workspace: PathBuf,
    /// The fingerprint recorded by `sandcrab trust` (None: never trusted).
    trusted: Option<String>,
}

impl ProjectSeal {
    /// The seal of `workspace` under the operator's `records`.
    pub fn new(workspace: &Path, records: &BTreeMap<String, TrustRecord>) -> Self {
        ProjectSeal {
            workspace: workspace.to_path_buf(),
            trusted: records.get(&key(workspace)).map(|r| r.sha256.clone()),
        }
    }

    /// Whether a plugin directory (as discovered) belongs to the project:
    /// it is under `<workspace>/.sandcrab/`.
    pub fn covers(&self, dir: &Path) -> bool {
        dir.starts_with(self.workspace.join(PROJECT_DIR))
    }

    /// Admit the project plugin whose manifest and component are
    /// `manifest` and `component` (the bytes the loader read), or say
    /// why not.
    pub fn admit(&self, manifest: &[u8], component: &[u8]) -> Result<(), String> {
        let again = format!(
            "review it, then run `sandcrab trust {}` again",
            self.workspace.display()
        );
        let Some(trusted) = &self.trusted else {
            return Err(format!(
                "plugins of an untrusted project are never loaded ({again})"
            ));
        };
        let now = examine(&self.workspace).map_err(|e| format!("cannot check the project: {e}"))?;
        if &now.sha256 != trusted {
            return Err(format!(
                "the project's configuration ({PROJECT_FILE}, {PROJECT_DIR}/ and what its links lead to) changed since you trusted it, so its plugins are not loaded ({again})"
            ));
        }
        for (what, bytes) in [("manifest", manifest), ("component", component)] {
            if !now.contents.contains(&sha256_hex(bytes)) {
                return Err(format!(
                    "its {what} as read is not the one you trusted (it changed while being loaded); {again}"
                ));
            }
        }
        Ok(())
    }
}

impl crate::plugin::Admission for ProjectSeal {
    /// The project's own plugins must pass the seal; others are not the
    /// project's to decide.
    fn admit(
        &self,
        dir: &Path,
        manifest: &[u8],
        component: &[u8],
    ) -> Result<crate::plugin::Admitted, String> {
        if self.covers(dir) {
            ProjectSeal::admit(self, manifest, component)?;
        }
        Ok(crate::plugin::Admitted::default())
    }

    fn scope(&self, dir: &Path) -> Option<PathBuf> {
        self.covers(dir).then(|| self.workspace.join(PROJECT_DIR))
    }
}

fn record(h: &mut Sha256, kind: u8, name: &[u8], content: &[u8]) {
    h.update([kind]);
    h.update((name.len() as u64).to_le_bytes());
    h.update(name);
    h.update((content.len() as u64).to_le_bytes());
    h.update(content);
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
    fn a_link_is_trusted_for_what_it_leads_to() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::create_dir_all(w.join(".sandcrab/plugins")).unwrap();
        std::fs::create_dir_all(w.join("vendor/hello")).unwrap();
        std::fs::write(w.join("vendor/hello/plugin.toml"), "version = 1").unwrap();
        std::os::unix::fs::symlink("../../vendor/hello", w.join(".sandcrab/plugins/hello"))
            .unwrap();
        // A cycle ends.
        std::os::unix::fs::symlink("..", w.join(".sandcrab/plugins/up")).unwrap();
        let before = examine(w).unwrap();
        let target = w.join("vendor/hello").canonicalize().unwrap();
        assert!(before.link_targets.contains(&target), "{before:?}");
        assert!(before.contents.contains(&sha256_hex(b"version = 1")));
        std::fs::write(w.join("vendor/hello/plugin.toml"), "version = 2").unwrap();
        assert_ne!(examine(w).unwrap().sha256, before.sha256);
    }

    #[test]
    fn the_seal_admits_only_trusted_bytes_of_a_trusted_project() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".sandcrab/plugins/p")).unwrap();
        std::fs::write(ws.join(".sandcrab/plugins/p/plugin.toml"), "m").unwrap();
        std::fs::write(ws.join(".sandcrab/plugins/p/p.wasm"), "w").unwrap();
        let untrusted = ProjectSeal::new(&ws, &BTreeMap::new());
        assert!(
            untrusted
                .admit(b"m", b"w")
                .unwrap_err()
                .contains("untrusted")
        );
        let file = dir.path().join("config.toml");
        trust(&file, &ws).unwrap();
        let records = crate::config::Config::read(&file).unwrap().trust.projects;
        let seal = ProjectSeal::new(&ws, &records);
        assert!(seal.covers(&ws.join(".sandcrab/plugins/p")));
        assert!(!seal.covers(&ws.join("vendor/p")));
        seal.admit(b"m", b"w").unwrap();
        assert!(
            seal.admit(b"m", b"other")
                .unwrap_err()
                .contains("component")
        );
        std::fs::write(ws.join(".sandcrab/plugins/p/p.wasm"), "w2").unwrap();
        assert!(
            seal.admit(b"m", b"w2")
                .unwrap_err()
                .contains("changed since")
        );
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
        assert_eq!(config.trust.projects[&key(&ws)].sha256, sha);
        assert_eq!(state(&ws, &config.trust.projects), TrustState::Trusted);
        std::fs::write(ws.join(PROJECT_FILE), "model = \"b\"").unwrap();
        assert_eq!(state(&ws, &config.trust.projects), TrustState::Changed);
        assert!(revoke(&file, &ws).unwrap());
        let config = crate::config::Config::read(&file).unwrap();
        assert!(config.trust.projects.is_empty());
    }
}
