//! Consent by content: what makes sandcrab execute or believe something
//! on the operator's behalf (a hook's command and the files it runs, a
//! skill's folder) is pinned by a SHA-256 of exactly that, and is used
//! only while the operator's consent names that hash. A change — by the
//! model, a `git pull`, anything — is shown as a diff against what was
//! consented and waits for `sandcrab trust`.
//!
//! Consents are kept in the operator's configuration file
//! (`[consented."<what>"]`, written by `sandcrab trust`); copies of the
//! consented files are kept in the data folder by their hash, so a later
//! change can be shown against them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::plugin::integrity::sha256_hex;

/// Most bytes of one pinned file.
const MAX_FILE: u64 = 16 << 20;

/// `[consented."<what>"]` in the operator's configuration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConsentRecord {
    /// The hash consented to.
    pub sha256: String,
    /// When (RFC 3339).
    #[serde(default)]
    pub at: Option<String>,
    /// Each file it covered, by path, with its content's SHA-256.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// Whether the operator consented to a pinned thing as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsentState {
    /// Consented to this exact content.
    Given,
    /// Consented once; it changed since.
    Changed,
    /// Never consented to.
    Missing,
}

impl ConsentState {
    /// One word for lists.
    pub fn word(self) -> &'static str {
        match self {
            ConsentState::Given => "consented",
            ConsentState::Changed => "CHANGED",
            ConsentState::Missing => "not consented",
        }
    }
}

/// Something pinned by content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// What it is, as the consent record names it (`hook operator
    /// PreToolUse shell: python3 guard.py`, `skill operator review`).
    pub what: String,
    /// The hash of everything below.
    pub sha256: String,
    /// The files it covers, with their content's SHA-256 (empty for a
    /// command that runs no file).
    pub files: Vec<PinnedFile>,
    /// Files it names that could not be read (they count as changed).
    pub unreadable: Vec<String>,
}

/// One file a pinned thing covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedFile {
    pub path: PathBuf,
    pub sha256: String,
}

impl Pinned {
    /// Pin `what`: `text` (a command, a front matter) and `files`, read
    /// now.
    pub fn of(what: String, text: &str, files: &[PathBuf]) -> Pinned {
        let mut sorted: Vec<&PathBuf> = files.iter().collect();
        sorted.sort();
        sorted.dedup();
        let read: Vec<(PathBuf, std::io::Result<Vec<u8>>)> =
            sorted.into_iter().map(|p| (p.clone(), read(p))).collect();
        Self::of_read(what, text, read)
    }

    /// Pin `what`: `text` and the files as already read (sorted by path).
    pub fn of_read(
        what: String,
        text: &str,
        files: Vec<(PathBuf, std::io::Result<Vec<u8>>)>,
    ) -> Pinned {
        let mut hasher = Sha256::new();
        feed(&mut hasher, b"text", text.as_bytes());
        let mut pinned = Vec::new();
        let mut unreadable = Vec::new();
        for (path, content) in files {
            let path = &path;
            let name = path.display().to_string();
            match content {
                Ok(bytes) => {
                    feed(&mut hasher, name.as_bytes(), &bytes);
                    pinned.push(PinnedFile {
                        path: path.clone(),
                        sha256: sha256_hex(&bytes),
                    });
                }
                Err(e) => {
                    feed(&mut hasher, name.as_bytes(), b"\0unreadable");
                    unreadable.push(format!("{name}: {e}"));
                }
            }
        }
        Pinned {
            what,
            sha256: hex(&hasher.finalize()),
            files: pinned,
            unreadable,
        }
    }

    /// Its state under the operator's `records`.
    pub fn state(&self, records: &BTreeMap<String, ConsentRecord>) -> ConsentState {
        match records.get(&self.what) {
            Some(r) if r.sha256 == self.sha256 && self.unreadable.is_empty() => ConsentState::Given,
            Some(_) => ConsentState::Changed,
            None => ConsentState::Missing,
        }
    }

    /// What changed since `record` was consented, file by file, as
    /// unified diffs (against the copies kept at consent; a file whose
    /// copy is gone is named only).
    pub fn diff(&self, record: &ConsentRecord) -> String {
        let mut out = String::new();
        for file in &self.files {
            let name = file.path.display().to_string();
            match record.files.get(&name) {
                Some(old) if *old == file.sha256 => {}
                Some(old) => {
                    let before = snapshot(old).unwrap_or_default();
                    let after = read(&file.path).unwrap_or_default();
                    let (before, after) = (
                        String::from_utf8_lossy(&before),
                        String::from_utf8_lossy(&after),
                    );
                    let diff = similar::TextDiff::from_lines(before.as_ref(), after.as_ref());
                    out.push_str(
                        &diff
                            .unified_diff()
                            .context_radius(3)
                            .header(&format!("{name} (consented)"), &format!("{name} (now)"))
                            .to_string(),
                    );
                }
                None => out.push_str(&format!("+ new file {name}\n")),
            }
        }
        for name in record.files.keys() {
            if !self
                .files
                .iter()
                .any(|f| f.path.display().to_string() == *name)
            {
                out.push_str(&format!("- no longer runs {name}\n"));
            }
        }
        for line in &self.unreadable {
            out.push_str(&format!("! {line}\n"));
        }
        out
    }

    /// Keep a copy of each file it covers, for the diffs of later
    /// changes. A copy that cannot be kept only means a later change is
    /// named rather than shown.
    pub fn keep_copies(&self) {
        let Some(dir) = copies_dir() else { return };
        for file in &self.files {
            let at = dir.join(&file.sha256);
            if at.exists() {
                continue;
            }
            if let Ok(bytes) = read(&file.path)
                && sha256_hex(&bytes) == file.sha256
            {
                let _ = crate::user_files::write_private(&at, &bytes);
            }
        }
    }
}

/// Where copies of consented files are kept.
fn copies_dir() -> Option<PathBuf> {
    Some(crate::user_files::data_dir()?.join("consented"))
}

/// The kept copy of the file whose content hashes to `sha256`, if it is
/// there and still that content.
fn snapshot(sha256: &str) -> Option<Vec<u8>> {
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes = read(&copies_dir()?.join(sha256)).ok()?;
    (sha256_hex(&bytes) == sha256).then_some(bytes)
}

fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::safe_fs::read_regular(path, MAX_FILE, crate::safe_fs::Links::Follow)
}

fn feed(h: &mut Sha256, name: &[u8], content: &[u8]) {
    h.update((name.len() as u64).to_le_bytes());
    h.update(name);
    h.update((content.len() as u64).to_le_bytes());
    h.update(content);
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_changes_the_pin_and_is_shown() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("guard.sh");
        std::fs::write(&script, "echo one\n").unwrap();
        let first = Pinned::of(
            "hook x".into(),
            "sh guard.sh",
            std::slice::from_ref(&script),
        );
        let mut records = BTreeMap::new();
        assert_eq!(first.state(&records), ConsentState::Missing);
        let record = ConsentRecord {
            sha256: first.sha256.clone(),
            at: None,
            files: first
                .files
                .iter()
                .map(|f| (f.path.display().to_string(), f.sha256.clone()))
                .collect(),
        };
        records.insert("hook x".to_string(), record.clone());
        assert_eq!(first.state(&records), ConsentState::Given);
        std::fs::write(&script, "echo two\n").unwrap();
        let second = Pinned::of(
            "hook x".into(),
            "sh guard.sh",
            std::slice::from_ref(&script),
        );
        assert_eq!(second.state(&records), ConsentState::Changed);
        // No copy was kept here: the change is still named.
        assert!(
            second.diff(&record).contains("guard.sh"),
            "{}",
            second.diff(&record)
        );
        let other_text = Pinned::of(
            "hook x".into(),
            "sh guard.sh ",
            std::slice::from_ref(&script),
        );
        assert_ne!(other_text.sha256, second.sha256);
        std::fs::remove_file(&script).unwrap();
        let gone = Pinned::of(
            "hook x".into(),
            "sh guard.sh",
            std::slice::from_ref(&script),
        );
        assert_eq!(gone.state(&records), ConsentState::Changed);
    }
}

/// The instruction files every profile reads (`AGENTS.md` and each
/// provider's own), the ones a trusted project's consent pins.
pub const INSTRUCTION_FILES: [&str; 4] = [
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
    ".codex/instructions.md",
];

/// Which of a workspace's instruction files the prompt may include. An
/// untrusted project's are repository text, included as such; a trusted
/// project's are what the operator vouched for, so each is included only
/// as consented (a change — by the model, by a pull — waits for
/// `sandcrab trust`).
#[derive(Debug, Clone, Default)]
pub struct DocsConsent {
    /// The workspace, when its project is trusted.
    pub trusted: Option<PathBuf>,
    pub records: BTreeMap<String, ConsentRecord>,
}

impl DocsConsent {
    /// What the consent to the instruction file at `path` is called.
    pub fn what(workspace: &Path, path: &Path) -> String {
        format!("instructions {} {}", workspace.display(), path.display())
    }

    /// Whether the instruction file at `path`, read as `bytes`, may be
    /// included; why not.
    pub fn admits(&self, path: &Path, bytes: &[u8]) -> Result<(), String> {
        let Some(workspace) = &self.trusted else {
            return Ok(());
        };
        let pinned = Pinned::of_read(
            Self::what(workspace, path),
            "",
            vec![(path.to_path_buf(), Ok(bytes.to_vec()))],
        );
        match pinned.state(&self.records) {
            ConsentState::Given => Ok(()),
            state => Err(format!(
                "{} {} since you trusted the project, so it is left out of the prompt; review it (`sandcrab trust --show` shows the change), then run `sandcrab trust`",
                path.display(),
                if state == ConsentState::Changed {
                    "changed"
                } else {
                    "appeared"
                }
            )),
        }
    }

    /// The instruction files of `workspace` to pin: those of
    /// [`INSTRUCTION_FILES`] in it and its folders (not links, not `.git`
    /// or dependency folders; bounded).
    pub fn files_of(workspace: &Path) -> Vec<PathBuf> {
        const SKIP: [&str; 5] = [".git", "node_modules", "target", ".venv", "vendor"];
        let mut out = Vec::new();
        let mut stack = vec![(workspace.to_path_buf(), 0usize)];
        let mut seen = 0usize;
        while let Some((dir, depth)) = stack.pop() {
            for name in INSTRUCTION_FILES {
                let path = dir.join(name);
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                    out.push(path);
                }
            }
            if depth >= 8 {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > 50_000 {
                    return out;
                }
                let name = entry.file_name();
                if entry.file_type().is_ok_and(|t| t.is_dir()) && !SKIP.iter().any(|s| name == *s) {
                    stack.push((entry.path(), depth + 1));
                }
            }
        }
        out.sort();
        out
    }

    /// The pins of `workspace`'s instruction files as they are now.
    pub fn pins(workspace: &Path) -> Vec<Pinned> {
        Self::files_of(workspace)
            .into_iter()
            .map(|path| Pinned::of(Self::what(workspace, &path), "", &[path]))
            .collect()
    }
}
