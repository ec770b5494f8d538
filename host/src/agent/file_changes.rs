//! The files a tool call changes: kept before the call writes them (the
//! session's checkpoints), compared after, each change (with its diff)
//! carried by the call's `TOOL_CALL_END`; `/diff` and `/undo` read them
//! back.

use super::session::Session;
use crate::checkpoint::{CheckpointError, Checkpoints, FileChange, Snapshot, patch_paths};
use crate::llm::ToolCall;
use crate::plugin::Writes;
use std::path::{Path, PathBuf};

impl Session {
    /// Keep checkpoints of the files this session's tool calls change in
    /// `root/SESSION_ID` (earlier ones of a resumed session are read
    /// back). Without it, changes are neither shown nor undoable.
    pub fn keep_checkpoints(&self, root: &Path) {
        let dir = root.join(&self.id);
        let _ = self
            .checkpoints
            .set(Checkpoints::open(dir, &self.workspace));
    }

    /// Put back the files the last input that changed any found; what was
    /// restored.
    pub fn undo_last_changes(&self) -> Result<Vec<FileChange>, CheckpointError> {
        self.checkpoints
            .get()
            .ok_or(CheckpointError::NothingToUndo)?
            .undo_last()
    }

    /// Every file this conversation changed, from before its first change
    /// to now.
    pub fn conversation_changes(&self) -> Vec<FileChange> {
        self.checkpoints
            .get()
            .map(Checkpoints::conversation_diff)
            .unwrap_or_default()
    }

    /// A new input begins (its writes are one step of `/undo`).
    pub(super) fn checkpoint_input(&self) {
        if let Some(checkpoints) = self.checkpoints.get() {
            checkpoints.begin_input();
        }
    }

    /// Before `call` runs: the files it names for writing, kept.
    pub(super) fn before_writes(&self, call: &ToolCall) -> Vec<Snapshot> {
        let Some(checkpoints) = self.checkpoints.get() else {
            return Vec::new();
        };
        if self.playback.is_some() {
            return Vec::new();
        }
        let mut snapshots = Vec::new();
        for path in self.written_paths(call) {
            match checkpoints.before_write(&path) {
                Ok(Some(snapshot)) => snapshots.push(snapshot),
                Ok(None) => {}
                Err(err) => self.warn(&format!("{err}; /undo cannot restore this change")),
            }
        }
        snapshots
    }

    /// After `call` ran: what it changed, for its TOOL_CALL_END.
    pub(super) fn after_writes(&self, call: &ToolCall, snapshots: &[Snapshot]) -> Vec<FileChange> {
        let Some(checkpoints) = self.checkpoints.get() else {
            return Vec::new();
        };
        snapshots
            .iter()
            .filter_map(|snapshot| checkpoints.changed(snapshot))
            .map(|mut change| {
                change.call_id = call.id.clone();
                change
            })
            .collect()
    }

    /// The host paths `call` says it writes: the path arguments its tool
    /// declares, or the files its `patch` names.
    fn written_paths(&self, call: &ToolCall) -> Vec<PathBuf> {
        let tools = self.tools();
        let Some(tool) = tools.get(&call.name) else {
            return Vec::new();
        };
        let names: Vec<String> = match &tool.spec.traits.writes {
            Writes::Nothing => Vec::new(),
            Writes::Paths(args) => args
                .iter()
                .filter_map(|arg| Some(call.arguments.get(arg)?.as_str()?.to_string()))
                .collect(),
            Writes::Workspace => call.arguments["patch"]
                .as_str()
                .map(patch_paths)
                .unwrap_or_default(),
        };
        names.iter().map(|name| self.host_path(name)).collect()
    }

    /// A tool's path as the host sees it: `/workspace/…` is the workspace,
    /// a relative path is under the working directory.
    fn host_path(&self, name: &str) -> PathBuf {
        match name.strip_prefix("/workspace") {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                self.workspace.join(rest.trim_start_matches('/'))
            }
            _ => self.working_dir.join(name),
        }
    }
}
