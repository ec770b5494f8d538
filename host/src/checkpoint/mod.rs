//! Checkpoints of the files a conversation changes: before a tool call
//! writes a file for the first time in an input, the file as it was is
//! kept on disk (`DATA/sandcrab/checkpoints/SESSION/INPUT/`), so the
//! operator can see every change of the conversation (`/diff`) and put
//! back what the last input changed (`/undo`).
//!
//! Files are read and restored beneath the workspace without following a
//! symbolic link at any level (a model that swapped a file for a link to
//! `~/.bashrc` cannot make `/undo` write there), regular files only, at
//! most [`MAX_FILE`] bytes; what cannot be kept is said, not guessed.

mod change;
mod targets;

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

pub use change::{ChangeKind, FileChange};
pub use targets::patch_paths;

use crate::safe_fs;

/// Largest file kept.
pub const MAX_FILE: u64 = 8 << 20;

/// Why a checkpoint could not be kept or restored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("nothing to undo: no file was changed by a tool since this conversation began")]
    NothingToUndo,
    #[error("cannot keep checkpoints in {dir}: {source}")]
    Storage { dir: PathBuf, source: io::Error },
    #[error("cannot restore {path}: {source}")]
    Restore { path: String, source: io::Error },
}

/// The checkpoint directory of every session (None without a data
/// directory): `$XDG_DATA_HOME/sandcrab/checkpoints`.
pub fn default_root() -> Option<PathBuf> {
    Some(crate::store::default_path()?.parent()?.join("checkpoints"))
}

/// Remove a session's checkpoints (when the session is deleted).
pub fn remove_session(root: &Path, session_id: &str) -> io::Result<()> {
    if session_id.contains(['/', '\\']) || session_id.starts_with('.') {
        return Ok(());
    }
    match std::fs::remove_dir_all(root.join(session_id)) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// One file as it was before an input's first write to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// Relative to the workspace.
    path: String,
    /// The kept content's file name in the input's directory (None: the
    /// file did not exist).
    blob: Option<String>,
}

/// A file as a call found it, to tell what the call changed.
#[derive(Debug, Clone)]
pub struct Snapshot {
    path: String,
    before: Option<Vec<u8>>,
}

/// A session's checkpoints.
pub struct Checkpoints {
    dir: PathBuf,
    workspace: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The current input's number.
    input: u64,
    /// What each input kept, by input number.
    inputs: BTreeMap<u64, Vec<Entry>>,
}

const MANIFEST: &str = "manifest.json";

impl Checkpoints {
    /// The checkpoints kept in `dir` (a session's own directory) for
    /// files of `workspace`; earlier inputs' checkpoints (a resumed
    /// session) are read back.
    pub fn open(dir: PathBuf, workspace: &Path) -> Checkpoints {
        let mut inputs = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let Some(n) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                let manifest = safe_fs::read_regular(
                    &entry.path().join(MANIFEST),
                    1 << 20,
                    safe_fs::Links::Refuse,
                );
                if let Some(kept) = manifest
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Vec<Entry>>(&b).ok())
                {
                    inputs.insert(n, kept);
                }
            }
        }
        let input = inputs.keys().next_back().copied().unwrap_or(0);
        Checkpoints {
            dir,
            workspace: std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into()),
            state: Mutex::new(State { input, inputs }),
        }
    }

    /// A new input begins: its first write of each file is kept apart.
    pub fn begin_input(&self) {
        let mut state = self.lock();
        let last = state.inputs.keys().next_back().copied().unwrap_or(0);
        state.input = state.input.max(last) + 1;
    }

    /// Before a call writes `path` (absolute, or relative to the
    /// workspace): the file as it is now, kept on disk if this input has
    /// not kept it yet. None when the file cannot be kept (outside the
    /// workspace, a link, not a regular file, too big).
    pub fn before_write(&self, path: &Path) -> Result<Option<Snapshot>, CheckpointError> {
        let Some(relative) = self.relative(path) else {
            return Ok(None);
        };
        let Ok(before) = self.read(&relative) else {
            return Ok(None);
        };
        let shown = relative.to_string_lossy().into_owned();
        let mut state = self.lock();
        let input = state.input;
        let kept = state.inputs.entry(input).or_default();
        if !kept.iter().any(|e| e.path == shown) {
            let dir = self.dir.join(input.to_string());
            let storage = |source| CheckpointError::Storage {
                dir: dir.clone(),
                source,
            };
            create_private_dir(&dir).map_err(storage)?;
            let blob = match &before {
                Some(bytes) => {
                    let name = kept.len().to_string();
                    std::fs::write(dir.join(&name), bytes).map_err(storage)?;
                    Some(name)
                }
                None => None,
            };
            kept.push(Entry {
                path: shown.clone(),
                blob,
            });
            let manifest = serde_json::to_vec(kept).expect("entries serialize");
            std::fs::write(dir.join(MANIFEST), manifest).map_err(storage)?;
        }
        Ok(Some(Snapshot {
            path: shown,
            before,
        }))
    }

    /// What happened to the file of `snapshot` since it was taken.
    pub fn changed(&self, snapshot: &Snapshot) -> Option<FileChange> {
        let now = self.read(Path::new(&snapshot.path)).ok()?;
        FileChange::between(&snapshot.path, snapshot.before.as_deref(), now.as_deref())
    }

    /// Put back every file the last input that changed files found, as it
    /// found it; what was restored (from the file now to the file then).
    /// That input's checkpoints are then forgotten, so a second `/undo`
    /// goes one input further back.
    pub fn undo_last(&self) -> Result<Vec<FileChange>, CheckpointError> {
        let (input, kept) = {
            let mut state = self.lock();
            loop {
                let Some((&input, kept)) = state.inputs.iter().next_back() else {
                    return Err(CheckpointError::NothingToUndo);
                };
                if kept.is_empty() {
                    state.inputs.remove(&input);
                    continue;
                }
                break (input, kept.clone());
            }
        };
        let dir = self.dir.join(input.to_string());
        let mut restored = Vec::new();
        for entry in &kept {
            let relative = Path::new(&entry.path);
            let then = match &entry.blob {
                Some(blob) => Some(std::fs::read(dir.join(blob)).map_err(|source| {
                    CheckpointError::Storage {
                        dir: dir.clone(),
                        source,
                    }
                })?),
                None => None,
            };
            let now = self.read(relative).unwrap_or(None);
            let failed = |source| CheckpointError::Restore {
                path: entry.path.clone(),
                source,
            };
            match &then {
                Some(bytes) => {
                    safe_fs::write_beneath(&self.workspace, relative, bytes).map_err(failed)?
                }
                None => safe_fs::remove_beneath(&self.workspace, relative).map_err(failed)?,
            }
            restored.extend(FileChange::between(
                &entry.path,
                now.as_deref(),
                then.as_deref(),
            ));
        }
        self.lock().inputs.remove(&input);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(restored)
    }

    /// Every file the conversation changed, from how it was before the
    /// first change to how it is now.
    pub fn conversation_diff(&self) -> Vec<FileChange> {
        let kept: Vec<(u64, Entry)> = {
            let state = self.lock();
            state
                .inputs
                .iter()
                .flat_map(|(n, kept)| kept.iter().map(|e| (*n, e.clone())))
                .collect()
        };
        let mut first: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
        for (input, entry) in kept {
            first.entry(entry.path).or_insert((input, entry.blob));
        }
        first
            .into_iter()
            .filter_map(|(path, (input, blob))| {
                let then = match blob {
                    Some(blob) => {
                        Some(std::fs::read(self.dir.join(input.to_string()).join(blob)).ok()?)
                    }
                    None => None,
                };
                let now = self.read(Path::new(&path)).ok()?;
                FileChange::between(&path, then.as_deref(), now.as_deref())
            })
            .collect()
    }

    /// `path` relative to the workspace, if it is inside (lexically: no
    /// `..` may climb out).
    fn relative(&self, path: &Path) -> Option<PathBuf> {
        let rest = if path.is_absolute() {
            path.strip_prefix(&self.workspace).ok()?
        } else {
            path
        };
        let mut out = PathBuf::new();
        for c in rest.components() {
            match c {
                Component::Normal(name) => out.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        (!out.as_os_str().is_empty()).then_some(out)
    }

    /// The file's bytes (None: it does not exist); an error for anything
    /// that cannot be kept.
    fn read(&self, relative: &Path) -> io::Result<Option<Vec<u8>>> {
        match safe_fs::read_beneath(&self.workspace, relative, MAX_FILE) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests;
