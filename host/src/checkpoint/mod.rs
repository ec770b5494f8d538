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

pub use change::{ChangeKind, DIFF_TIME, FileChange};
pub use targets::patch_paths;

use crate::safe_fs;

/// Largest file kept.
pub const MAX_FILE: u64 = 8 << 20;
/// Most bytes one conversation's checkpoints may hold.
pub const MAX_SESSION_BYTES: u64 = 256 << 20;
/// Highest input number read back from disk (a larger one was not written
/// by this module).
const MAX_INPUT: u64 = u32::MAX as u64;

/// Why a checkpoint could not be kept or restored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("nothing to undo: no file a tool changed in this conversation is left to put back")]
    NothingToUndo,
    /// Files the last input changed were changed again after it (by the
    /// operator or a program): undoing would throw that away.
    /// Files whose state after the input is not known (a call cut off
    /// before it ended) are named too: a later change cannot be ruled out.
    #[error(
        "not undone: {}; `/undo force` puts the turn's files back anyway",
        held_back(.changed, .unsure)
    )]
    ChangedSince {
        changed: Vec<String>,
        unsure: Vec<String>,
    },
    #[error("cannot keep checkpoints in {dir}: {source}")]
    Storage { dir: PathBuf, source: io::Error },
}

/// Why `/undo` holds back, in words.
fn held_back(changed: &[String], unsure: &[String]) -> String {
    let mut why = Vec::new();
    if !changed.is_empty() {
        why.push(format!(
            "{} changed since that turn's tools wrote them (by you or a program), and undoing would lose that",
            changed.join(", ")
        ));
    }
    if !unsure.is_empty() {
        why.push(format!(
            "how that turn left {} is not known (its call was cut off), so a later change cannot be ruled out",
            unsure.join(", ")
        ));
    }
    why.join("; ")
}

/// What `before_write` did with a file.
#[derive(Debug)]
pub enum Kept {
    /// Kept (or kept earlier in this input): the file as it is now.
    Snapshot(Snapshot),
    /// Not a file of the workspace: nothing to keep.
    Outside,
    /// A workspace file that cannot be kept, and why: `/undo` will not
    /// restore it.
    Skipped { path: String, why: String },
}

/// Every file a conversation changed (`/diff`).
#[derive(Debug, Default)]
pub struct ConversationDiff {
    /// Each file from how it was before the first change to how it is.
    pub changes: Vec<FileChange>,
    /// Files changed that cannot be shown (no longer readable: a link, a
    /// file over [`MAX_FILE`], a kept copy gone), and why.
    pub unshown: Vec<(String, String)>,
}

/// What `/undo` did.
#[derive(Debug, Default)]
pub struct Undone {
    /// Each file restored: from how it was to how it is again.
    pub restored: Vec<FileChange>,
    /// Files that could not be restored, and why.
    pub failed: Vec<(String, String)>,
}

/// The checkpoint directory of every session (None without a data
/// directory): `$XDG_DATA_HOME/sandcrab/checkpoints`.
pub fn default_root() -> Option<PathBuf> {
    Some(crate::user_files::data_dir()?.join("checkpoints"))
}

/// Remove a session's checkpoints (when the session is deleted).
pub fn remove_session(root: &Path, session_id: &str) -> io::Result<()> {
    if !crate::store::is_session_id(session_id) {
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
    /// The file's permission bits.
    #[serde(default)]
    mode: Option<u32>,
    /// The file as the input's calls left it (None: not known).
    #[serde(default)]
    left: Option<Left>,
}

/// A file as an input's calls left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Left {
    Absent,
    /// Its content's BLAKE3 digest and its permission bits.
    File {
        digest: String,
        mode: Option<u32>,
    },
    /// Something that is not read back (a file over [`MAX_FILE`], a link,
    /// a directory): what can be compared without reading it.
    Unread {
        kind: String,
        len: u64,
        inode: u64,
        modified_ns: i128,
        /// Set by every change, and not settable (unlike the mtime).
        changed_ns: i128,
        mode: u32,
    },
    /// Not reachable beneath the workspace without following a link, and
    /// why.
    Unreachable {
        why: String,
    },
}

impl Entry {
    /// Whether a manifest read back names its blob as this module writes
    /// it (a number), so a planted manifest cannot point elsewhere.
    fn is_sound(&self) -> bool {
        self.blob
            .as_deref()
            .is_none_or(|b| !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()))
    }
}

/// A file as a call found it, to tell what the call changed.
#[derive(Debug, Clone)]
pub struct Snapshot {
    path: String,
    before: Option<Vec<u8>>,
    /// The input that kept it.
    input: u64,
}

impl Snapshot {
    /// The file, relative to the workspace.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// A session's checkpoints.
pub struct Checkpoints {
    dir: PathBuf,
    workspace: PathBuf,
    /// What `/undo` never writes, whatever a manifest says.
    protected: crate::kept::Protected,
    state: Mutex<State>,
    /// Most bytes kept ([`MAX_SESSION_BYTES`]).
    quota: u64,
}

#[derive(Default)]
struct State {
    /// The current input's number.
    input: u64,
    /// What each input kept, by input number.
    inputs: BTreeMap<u64, Vec<Entry>>,
    /// Bytes kept on disk.
    stored: u64,
    /// Snapshots of calls that are running, by call id.
    running: std::collections::HashMap<String, Vec<Snapshot>>,
}

impl State {
    /// The last input that kept any file (inputs that kept none are
    /// dropped on the way).
    fn last_kept(&mut self) -> Option<u64> {
        loop {
            let (&input, kept) = self.inputs.iter().next_back()?;
            if !kept.is_empty() {
                return Some(input);
            }
            self.inputs.remove(&input);
        }
    }
}

const MANIFEST: &str = "manifest.json";

impl Checkpoints {
    /// The checkpoints kept in `dir` (a session's own directory) for
    /// files of `workspace`; earlier inputs' checkpoints (a resumed
    /// session) are read back.
    pub fn open(dir: PathBuf, workspace: &Path) -> Checkpoints {
        let mut inputs = BTreeMap::new();
        let mut stored = 0;
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let Some(n) = entry
                    .file_name()
                    .to_str()
                    .filter(|n| !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<u64>().ok())
                    .filter(|n| *n <= MAX_INPUT)
                else {
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
                    .filter(|kept| kept.iter().all(Entry::is_sound))
                {
                    for entry in &kept {
                        if let Some(blob) = &entry.blob {
                            stored += std::fs::symlink_metadata(entry_dir(&dir, n).join(blob))
                                .map(|m| m.len())
                                .unwrap_or(0);
                        }
                    }
                    inputs.insert(n, kept);
                }
            }
        }
        let input = inputs.keys().next_back().copied().unwrap_or(0);
        Checkpoints {
            dir,
            workspace: std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into()),
            protected: crate::kept::Protected::default(),
            state: Mutex::new(State {
                input,
                inputs,
                stored,
                running: Default::default(),
            }),
            quota: MAX_SESSION_BYTES,
        }
    }

    /// `/undo` never writes what `protected` protects (the workspace's
    /// protected paths as the operator set them; the default otherwise).
    pub fn protecting(mut self, protected: crate::kept::Protected) -> Self {
        self.protected = protected;
        self
    }

    /// Keep at most `bytes` (tests).
    #[cfg(test)]
    fn with_quota(mut self, bytes: u64) -> Self {
        self.quota = bytes;
        self
    }

    /// A new input begins: its first write of each file is kept apart.
    pub fn begin_input(&self) {
        let mut state = self.lock();
        let last = state.inputs.keys().next_back().copied().unwrap_or(0);
        state.input = state.input.max(last).saturating_add(1);
        // Calls of an earlier input that never ended (cut off) leave no
        // snapshots for a later call that reuses their id.
        state.running.clear();
    }

    /// Before a call writes `path` (absolute, or relative to the
    /// workspace): the file as it is now, kept on disk if this input has
    /// not kept it yet.
    pub fn before_write(&self, path: &Path) -> Result<Kept, CheckpointError> {
        let Some(relative) = self.relative(path) else {
            return Ok(Kept::Outside);
        };
        let shown = relative.to_string_lossy().into_owned();
        let skipped = |why: String| {
            Ok(Kept::Skipped {
                path: shown.clone(),
                why,
            })
        };
        let before = match self.read(&relative) {
            Ok(before) => before,
            Err(err) => return skipped(err.to_string()),
        };
        let mode = before.as_ref().and_then(|_| self.mode_of(&relative));
        let mut state = self.lock();
        let input = state.input;
        let already = state
            .inputs
            .get(&input)
            .is_some_and(|kept| kept.iter().any(|e| e.path == shown));
        if !already {
            let size = before.as_ref().map_or(0, |b| b.len() as u64);
            if state.stored + size > self.quota {
                return skipped(format!(
                    "this conversation's checkpoints reached {} KiB",
                    self.quota >> 10
                ));
            }
            let dir = entry_dir(&self.dir, input);
            let storage = |source| CheckpointError::Storage {
                dir: dir.clone(),
                source,
            };
            create_private_dir(&dir).map_err(storage)?;
            let kept = state.inputs.entry(input).or_default();
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
                mode,
                left: None,
            });
            write_manifest(&dir, kept).map_err(storage)?;
            state.stored += size;
        }
        Ok(Kept::Snapshot(Snapshot {
            path: shown,
            before,
            input,
        }))
    }

    /// Keep `snapshots` until the call `call_id` ends.
    pub fn running(&self, call_id: &str, snapshots: Vec<Snapshot>) {
        if !snapshots.is_empty() {
            self.lock().running.insert(call_id.to_string(), snapshots);
        }
    }

    /// The snapshots of the call `call_id`, which ended.
    pub fn ended(&self, call_id: &str) -> Vec<Snapshot> {
        self.lock().running.remove(call_id).unwrap_or_default()
    }

    /// What happened to the file of `snapshot` since it was taken (the
    /// call that took it ended); the file as it is now is remembered as
    /// what the input left, so `/undo` can tell a later change.
    ///
    /// A file that cannot be read back (over [`MAX_FILE`], a link) is an
    /// error, so the change is not shown, but how it stands is still
    /// remembered.
    pub fn changed(&self, snapshot: &Snapshot) -> io::Result<Option<FileChange>> {
        let path = Path::new(&snapshot.path);
        let now = self.read(path);
        self.remember_left(snapshot, self.left_of(path, &now));
        Ok(FileChange::between(
            &snapshot.path,
            snapshot.before.as_deref(),
            now?.as_deref(),
        ))
    }

    fn remember_left(&self, snapshot: &Snapshot, left: Left) {
        let mut state = self.lock();
        let Some(kept) = state.inputs.get_mut(&snapshot.input) else {
            return;
        };
        let Some(entry) = kept.iter_mut().find(|e| e.path == snapshot.path) else {
            return;
        };
        if entry.left.as_ref() == Some(&left) {
            return;
        }
        entry.left = Some(left);
        let _ = write_manifest(&entry_dir(&self.dir, snapshot.input), kept);
    }

    /// Put back every file the last input that changed files found, as it
    /// found it; each file on its own (one that cannot be restored is
    /// reported, the others are restored). The checkpoints of the files
    /// put back are then forgotten, so a second `/undo` goes one input
    /// further back; those that could not be put back are kept, and the
    /// next `/undo` tries them again first.
    ///
    /// When a file is no longer as the input left it (the operator or a
    /// program changed it since), or how the input left it is not known (a
    /// call cut off), nothing is put back and the files are named, unless
    /// `force`.
    pub fn undo_last(&self, force: bool) -> Result<Undone, CheckpointError> {
        let (input, kept) = {
            let mut state = self.lock();
            let input = state.last_kept().ok_or(CheckpointError::NothingToUndo)?;
            (input, state.inputs[&input].clone())
        };
        if !force {
            let (mut changed, mut unsure) = (Vec::new(), Vec::new());
            for entry in &kept {
                match &entry.left {
                    None => unsure.push(entry.path.clone()),
                    Some(left) if *left != self.stands(Path::new(&entry.path)) => {
                        changed.push(entry.path.clone())
                    }
                    Some(_) => {}
                }
            }
            if !changed.is_empty() || !unsure.is_empty() {
                return Err(CheckpointError::ChangedSince { changed, unsure });
            }
        }
        let dir = entry_dir(&self.dir, input);
        let mut undone = Undone::default();
        let mut done = Vec::new();
        let mut left_to_do = Vec::new();
        for entry in kept {
            match self.restore(input, &entry) {
                Ok(change) => {
                    undone.restored.extend(change);
                    done.push(entry);
                }
                Err(err) => {
                    undone.failed.push((entry.path.clone(), err.to_string()));
                    left_to_do.push(entry);
                }
            }
        }
        let freed = blob_bytes(&dir, &done);
        let mut state = self.lock();
        state.stored = state.stored.saturating_sub(freed);
        if left_to_do.is_empty() {
            state.inputs.remove(&input);
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            // What could not be put back keeps its checkpoint: the next
            // `/undo` tries it again before going further back.
            for blob in done.iter().filter_map(|e| e.blob.as_ref()) {
                let _ = std::fs::remove_file(dir.join(blob));
            }
            let _ = write_manifest(&dir, &left_to_do);
            state.inputs.insert(input, left_to_do);
        }
        Ok(undone)
    }

    /// Forget the checkpoints of the last input that kept any, without
    /// putting anything back (a file that cannot be restored would
    /// otherwise hold every earlier `/undo`); the files they were for.
    pub fn forget_last(&self) -> Vec<String> {
        let mut state = self.lock();
        let Some(input) = state.last_kept() else {
            return Vec::new();
        };
        let kept = state.inputs.remove(&input).unwrap_or_default();
        let dir = entry_dir(&self.dir, input);
        state.stored = state.stored.saturating_sub(blob_bytes(&dir, &kept));
        let _ = std::fs::remove_dir_all(&dir);
        kept.into_iter().map(|e| e.path).collect()
    }

    /// Put one file back; the change that made (None: it was already so).
    fn restore(&self, input: u64, entry: &Entry) -> io::Result<Option<FileChange>> {
        let relative = Path::new(&entry.path);
        let then = match &entry.blob {
            Some(blob) => Some(self.read_blob(input, blob)?),
            None => None,
        };
        // A file that cannot be read (over MAX_FILE, a link) is not absent:
        // it is put back like any other, its change shown without a diff.
        let now = self.read(relative);
        if let Ok(now) = &now
            && *now == then
            && (then.is_none() || self.mode_of(relative) == entry.mode)
        {
            // Already as it was: left untouched (no write, no new inode).
            return Ok(None);
        }
        // Whatever the manifest says: never what the host keeps or the
        // workspace protects (a planted checkpoint for `.git/hooks/x`).
        let judge = crate::kept::Judge::new(
            crate::kept::current(),
            self.protected.clone(),
            self.workspace.clone(),
        );
        let access = match then {
            Some(_) => crate::kept::Access::Write,
            None => crate::kept::Access::Move,
        };
        judge
            .check(&self.workspace.join(relative), access)
            .map_err(|refusal| {
                io::Error::new(io::ErrorKind::PermissionDenied, refusal.to_string())
            })?;
        match &then {
            Some(bytes) => safe_fs::write_beneath(&self.workspace, relative, bytes, entry.mode)?,
            None => safe_fs::remove_beneath(&self.workspace, relative)?,
        }
        Ok(match now {
            Ok(now) => FileChange::between(&entry.path, now.as_deref(), then.as_deref()),
            Err(_) => Some(FileChange::unshown(
                &entry.path,
                if then.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Deleted
                },
            )),
        })
    }

    /// Every file the conversation changed, from how it was before the
    /// first change to how it is now.
    pub fn conversation_diff(&self) -> ConversationDiff {
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
        let mut diff = ConversationDiff::default();
        for (path, (input, blob)) in first {
            let then = blob.map(|blob| self.read_blob(input, &blob)).transpose();
            let now = self.read(Path::new(&path));
            match (then, now) {
                (Ok(then), Ok(now)) => {
                    diff.changes
                        .extend(FileChange::between(&path, then.as_deref(), now.as_deref()))
                }
                (Err(err), _) => diff
                    .unshown
                    .push((path, format!("its kept copy cannot be read: {err}"))),
                (_, Err(err)) => diff.unshown.push((path, err.to_string())),
            }
        }
        diff
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

    /// How the file `relative` whose content is `bytes` stands.
    fn left(&self, relative: &Path, bytes: Option<&[u8]>) -> Left {
        match bytes {
            Some(bytes) => Left::File {
                digest: blake3::hash(bytes).to_hex().to_string(),
                mode: self.mode_of(relative),
            },
            None => Left::Absent,
        }
    }

    /// How the workspace file `relative` stands now.
    fn stands(&self, relative: &Path) -> Left {
        self.left_of(relative, &self.read(relative))
    }

    /// How `relative` stands, given what reading it gave: its digest, or
    /// what can be compared without reading it.
    fn left_of(&self, relative: &Path, read: &io::Result<Option<Vec<u8>>>) -> Left {
        match read {
            Ok(bytes) => self.left(relative, bytes.as_deref()),
            Err(_) => self.unread(relative),
        }
    }

    /// How `relative`, which is not read back, stands: what its metadata
    /// says, reached without following a link.
    fn unread(&self, relative: &Path) -> Left {
        use std::os::unix::fs::MetadataExt;
        match safe_fs::metadata_beneath(&self.workspace, relative) {
            Ok(meta) => Left::Unread {
                kind: kind_of(&meta.file_type()).to_string(),
                len: meta.len(),
                inode: meta.ino(),
                modified_ns: nanos(meta.mtime(), meta.mtime_nsec()),
                changed_ns: nanos(meta.ctime(), meta.ctime_nsec()),
                mode: meta.mode() & 0o7777,
            },
            Err(err) if err.kind() == io::ErrorKind::NotFound => Left::Absent,
            Err(err) => Left::Unreachable {
                why: err.to_string(),
            },
        }
    }

    /// The permission bits of the workspace file `relative`.
    fn mode_of(&self, relative: &Path) -> Option<u32> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(self.workspace.join(relative)).ok()?;
        Some(meta.permissions().mode() & 0o7777)
    }

    /// A kept file's content: a regular file in input `input`'s directory,
    /// reached without following a link.
    fn read_blob(&self, input: u64, blob: &str) -> io::Result<Vec<u8>> {
        let path = entry_dir(&self.dir, input).join(blob);
        safe_fs::read_regular(&path, MAX_FILE, safe_fs::Links::Refuse)
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

/// A time in nanoseconds since the epoch.
fn nanos(seconds: i64, nanoseconds: i64) -> i128 {
    i128::from(seconds) * 1_000_000_000 + i128::from(nanoseconds)
}

/// A file type in a word.
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    if kind.is_file() {
        "file"
    } else if kind.is_dir() {
        "directory"
    } else if kind.is_symlink() {
        "link"
    } else {
        "special"
    }
}

/// The bytes the kept copies of `entries` take in `dir`.
fn blob_bytes(dir: &Path, entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter_map(|e| std::fs::symlink_metadata(dir.join(e.blob.as_ref()?)).ok())
        .map(|m| m.len())
        .sum()
}

/// Where input `n` keeps its files.
fn entry_dir(dir: &Path, n: u64) -> PathBuf {
    dir.join(n.to_string())
}

/// Write what input directory `dir` keeps.
fn write_manifest(dir: &Path, kept: &[Entry]) -> io::Result<()> {
    let manifest = serde_json::to_vec(kept).expect("entries serialize");
    std::fs::write(dir.join(MANIFEST), manifest)
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
