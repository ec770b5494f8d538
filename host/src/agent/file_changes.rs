//! The files a tool call changes: kept before the call writes them (the
//! session's checkpoints), compared after, each change (with its diff)
//! carried by the call's `TOOL_CALL_END`; `/diff` and `/undo` read them
//! back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::session::Session;
use crate::checkpoint::{
    CheckpointError, Checkpoints, ConversationDiff, FileChange, Kept, Snapshot, Undone,
};
use crate::tools::PreparedCall;

/// Most files one call may name for checkpoints (a patch can
/// name any number).
const MAX_PATHS_PER_CALL: usize = 200;

impl Session {
    /// Keep checkpoints of the files this session's tool calls change in
    /// `root/SESSION_ID` (earlier ones of a resumed session are read
    /// back); `/undo` never writes what `protected` protects. Without it,
    /// changes are neither shown nor undoable. A session id that is not a
    /// session id (an import's, a planted one) never becomes a path.
    pub fn keep_checkpoints(&self, root: &Path, protected: crate::kept::Protected) {
        if !crate::store::is_session_id(&self.id) {
            tracing::warn!("session {:?}: no checkpoints (not a session id)", self.id);
            return;
        }
        let dir = root.join(&self.id);
        let _ = self.checkpoints.set(Arc::new(
            Checkpoints::open(dir, &self.workspace).protecting(protected),
        ));
    }

    /// Keep `child`'s file changes (a subagent's) with this session's: they
    /// are part of the input that started it, shown with it and undone
    /// with it.
    pub(super) fn share_checkpoints_with(&self, child: &Session) {
        if let Some(checkpoints) = self.checkpoints.get() {
            let _ = child.checkpoints.set(checkpoints.clone());
        }
    }

    /// Where a call's snapshots wait between before and after: by session
    /// and call, so a subagent's call never takes its parent's.
    fn checkpoint_key(&self, call_id: &str) -> String {
        format!("{}/{call_id}", self.id)
    }

    /// Put back the files the last input that changed any found; what was
    /// restored and what could not be. Files changed since that input
    /// stop it, unless `force` (see [`Checkpoints::undo_last`]).
    pub fn undo_last_changes(&self, force: bool) -> Result<Undone, CheckpointError> {
        self.checkpoints
            .get()
            .ok_or(CheckpointError::NothingToUndo)?
            .undo_last(force)
    }

    /// Forget the last input's checkpoints without putting anything back;
    /// the files they were for (see [`Checkpoints::forget_last`]).
    pub fn forget_last_changes(&self) -> Vec<String> {
        self.checkpoints
            .get()
            .map(|c| c.forget_last())
            .unwrap_or_default()
    }

    /// Every file this conversation changed, from before its first change
    /// to now (and those that cannot be shown).
    pub fn conversation_changes(&self) -> ConversationDiff {
        self.checkpoints
            .get()
            .map(|c| c.conversation_diff())
            .unwrap_or_default()
    }

    /// A new input begins (its writes are one step of `/undo`).
    pub(super) fn checkpoint_input(&self) {
        // A subagent's task is part of its parent's input, not a step of
        // its own.
        if self.depth > 0 {
            return;
        }
        if let Some(checkpoints) = self.checkpoints.get() {
            checkpoints.begin_input();
        }
    }

    /// `call` was allowed and is about to run: keep the files it says it
    /// writes (a call that is refused keeps nothing); a file that cannot
    /// be kept is said. The reading (up to 8 MiB a file) runs on a
    /// blocking thread, not on the one driving the session; a call that
    /// writes nothing costs nothing.
    pub(super) async fn before_writes(self: &Arc<Self>, call: &PreparedCall) {
        if self.checkpoints.get().is_none() || self.playback.is_some() {
            return;
        }
        let paths: Vec<PathBuf> = call
            .writes
            .paths
            .iter()
            .take(MAX_PATHS_PER_CALL)
            .map(|p| p.host.clone())
            .collect();
        if paths.is_empty() {
            return;
        }
        let beyond = call.writes.paths.len().saturating_sub(MAX_PATHS_PER_CALL);
        if beyond > 0 {
            self.warn(&format!(
                "{} names {} files; the first {MAX_PATHS_PER_CALL} were checkpointed, {beyond} were not, and /undo cannot restore them",
                call.name,
                call.writes.paths.len()
            ));
        }
        let key = self.checkpoint_key(&call.id);
        let kept = self.off_thread(move |session| session.keep_before_writes(&key, paths));
        if let Err(err) = kept.await {
            self.warn(&format!(
                "checkpoints failed ({err}); /undo cannot restore this change"
            ));
        }
    }

    /// After the call `call_id` ran: what it changed, for its
    /// TOOL_CALL_END (the reading and hashing on a blocking thread).
    pub(super) async fn after_writes(self: &Arc<Self>, call_id: &str) -> Vec<FileChange> {
        let Some(checkpoints) = self.checkpoints.get() else {
            return Vec::new();
        };
        let snapshots = checkpoints.ended(&self.checkpoint_key(call_id));
        if snapshots.is_empty() {
            return Vec::new();
        }
        let id = call_id.to_string();
        self.off_thread(move |session| session.changes_of(&id, &snapshots))
            .await
            .unwrap_or_else(|err| {
                self.warn(&format!("the changes of a call could not be read ({err})"));
                Vec::new()
            })
    }

    /// `work` on a blocking thread.
    async fn off_thread<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Session) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let session = self.clone();
        tokio::task::spawn_blocking(move || work(&session)).await
    }

    /// Keep `paths` as they are before the call (its [`Self::checkpoint_key`]
    /// `key`) writes them.
    fn keep_before_writes(&self, key: &str, paths: Vec<PathBuf>) {
        let Some(checkpoints) = self.checkpoints.get() else {
            return;
        };
        let mut snapshots = Vec::new();
        for path in paths {
            match checkpoints.before_write(&path) {
                Ok(Kept::Snapshot(snapshot)) => snapshots.push(snapshot),
                Ok(Kept::Outside) => {}
                Ok(Kept::Skipped { path, why }) => self.warn(&format!(
                    "{} was not checkpointed ({why}); /undo cannot restore it",
                    crate::terminal_safe::json_text(&path)
                )),
                Err(err) => self.warn(&format!("{err}; /undo cannot restore this change")),
            }
        }
        checkpoints.running(key, snapshots);
    }

    /// What the call `call_id`, which ended, changed of the files of
    /// `snapshots`.
    fn changes_of(&self, call_id: &str, snapshots: &[Snapshot]) -> Vec<FileChange> {
        let Some(checkpoints) = self.checkpoints.get() else {
            return Vec::new();
        };
        snapshots
            .iter()
            .filter_map(|snapshot| match checkpoints.changed(snapshot) {
                Ok(change) => change,
                Err(err) => {
                    self.warn(&format!(
                        "{} cannot be read back after the call ({err}): its change is not shown, and /undo puts it back only if it stays as the call left it",
                        crate::terminal_safe::json_text(snapshot.path())
                    ));
                    None
                }
            })
            .map(|mut change| {
                change.call_id = call_id.to_string();
                change
            })
            .collect()
    }
}
