//! A session's memory: its turns in the store (committed before each model
//! request, so a killed process loses at most the turn in flight), resuming
//! a stored session, and compaction of its history (automatic over the
//! budget, on demand through `compact_context` or `/compact`, and once
//! after a context-length error).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::turns::{Turn, TurnKind};
use crate::compaction::{Compactor, Entry};
use crate::store::{SessionRecord, Store, StoreError, StoredTurn};

/// The id of the summary turn that stands for the compacted history. It
/// is rebuilt from archival memory, never stored as a turn.
pub const SUMMARY_TURN_ID: &str = "context-summary";

/// Longest tool result text handed to the summarizer, per result.
const RESULT_CHARS: usize = 2_000;

/// The store behind one session, and its compactor.
pub struct SessionMemory {
    id: String,
    store: Arc<dyn Store>,
    pub(super) compactor: Arc<Compactor>,
    /// Turns already in the store.
    persisted: Mutex<HashSet<String>>,
    /// The stored history of a resumed session, taken by the session.
    loaded: Mutex<Vec<Turn>>,
    /// Whether the session has a title yet.
    titled: Mutex<bool>,
    /// The session's flight recorder (none: not recorded).
    recorder: std::sync::OnceLock<Arc<super::recorder::Recorder>>,
    /// Search by meaning (none: `[embeddings]` is not configured).
    semantic: std::sync::OnceLock<Arc<super::recall::Semantic>>,
}

impl Drop for SessionMemory {
    /// The session ends here: another host may take it from now on.
    fn drop(&mut self) {
        if let Err(err) = self.store.release_lease(&self.id) {
            tracing::warn!("session {}: lease not released: {err}", self.id);
        }
    }
}

/// Who runs a new session (recorded with it).
pub struct SessionInfo {
    pub workspace: String,
    pub provider: String,
    pub profile: String,
    pub model: String,
}

impl SessionMemory {
    /// A new stored session.
    pub fn create(
        store: Arc<dyn Store>,
        compactor: Arc<Compactor>,
        info: &SessionInfo,
    ) -> Result<Arc<Self>, StoreError> {
        let now = crate::time::now_rfc3339();
        let id = uuid::Uuid::new_v4().to_string();
        store.create_session(&SessionRecord {
            id: id.clone(),
            workspace: info.workspace.clone(),
            provider: info.provider.clone(),
            profile: info.profile.clone(),
            model: info.model.clone(),
            title: None,
            created_at: now.clone(),
            updated_at: now,
            state: crate::store::StoredState::Active,
            turns: 0,
            host: String::new(),
        })?;
        // Nobody else knows it yet: this cannot be refused.
        store.acquire_lease(&id)?;
        Ok(Arc::new(SessionMemory {
            id,
            store,
            compactor,
            persisted: Mutex::new(HashSet::new()),
            loaded: Mutex::new(Vec::new()),
            titled: Mutex::new(false),
            recorder: Default::default(),
            semantic: Default::default(),
        }))
    }

    /// Continue the stored session `id`: its turns, behind the summary of
    /// what was compacted, repaired so every tool call has its result, and
    /// a note when background jobs were lost with the restart.
    pub fn resume(
        store: Arc<dyn Store>,
        compactor: Arc<Compactor>,
        id: &str,
    ) -> Result<Arc<Self>, StoreError> {
        let record = store
            .session(id)?
            .ok_or_else(|| StoreError::UnknownSession(id.to_string()))?;
        // One driver at a time: taken before the history is read, so what
        // is read is final (a previous holder can no longer write).
        store.acquire_lease(id)?;
        let (persisted, history) = match Self::load(&store, &compactor, id) {
            Ok(loaded) => loaded,
            Err(err) => {
                let _ = store.release_lease(id);
                return Err(err);
            }
        };
        // Going on again: listed as active until it ends.
        if record.state != crate::store::StoredState::Active {
            store.update_session(id, None, Some(crate::store::StoredState::Active.as_str()))?;
        }
        Ok(Arc::new(SessionMemory {
            id: record.id,
            store,
            compactor,
            persisted: Mutex::new(persisted),
            loaded: Mutex::new(history),
            titled: Mutex::new(record.title.is_some()),
            recorder: Default::default(),
            semantic: Default::default(),
        }))
    }

    /// Keep that the conversation ended (while this host still holds it).
    pub fn close(&self) -> Result<(), StoreError> {
        self.store.update_session(
            &self.id,
            None,
            Some(crate::store::StoredState::Closed.as_str()),
        )
    }

    /// The stored history of `id`, repaired, and the ids of its turns.
    fn load(
        store: &Arc<dyn Store>,
        compactor: &Compactor,
        id: &str,
    ) -> Result<(HashSet<String>, Vec<Turn>), StoreError> {
        let mut persisted = HashSet::new();
        let mut history = Vec::new();
        if let Some(summary) = compactor.summary_message(id)? {
            history.push(summary_turn(summary));
        }
        for stored in store.turns(id)? {
            persisted.insert(stored.id.clone());
            match serde_json::from_str::<Turn>(&stored.body) {
                Ok(turn) => history.push(turn),
                Err(e) => {
                    tracing::warn!("session {id}: turn {} unreadable ({e}); skipped", stored.id)
                }
            }
        }
        super::history::repair(&mut history);
        let lost = lost_jobs(&history);
        if !lost.is_empty() {
            history.push(Turn::new(TurnKind::System {
                text: format!(
                    "This conversation was resumed after sandcrab restarted. Background jobs do not survive a restart: {} no longer running and will not report back. Start them again if they are still needed.",
                    lost.join(", ")
                ),
            }));
        }
        Ok((persisted, history))
    }

    /// The stored session's id (the session uses it as its own).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The history to start from (empty for a new session).
    pub(super) fn take_loaded(&self) -> Vec<Turn> {
        std::mem::take(&mut *self.loaded.lock().expect("memory lock"))
    }

    /// Record the session with `recorder` from now on (once).
    pub fn record_with(&self, recorder: Arc<super::recorder::Recorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// The session's recorder, when it is recorded.
    pub fn recorder(&self) -> Option<&Arc<super::recorder::Recorder>> {
        self.recorder.get()
    }

    /// Search archived memory by meaning too (once).
    pub fn search_by_meaning(&self, semantic: Arc<super::recall::Semantic>) {
        let _ = self.semantic.set(semantic);
    }

    /// Search by meaning, when configured.
    pub fn semantic(&self) -> Option<&Arc<super::recall::Semantic>> {
        self.semantic.get()
    }

    /// The store (for `memory_read`).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The turns of `history` not stored yet (in order, ready to store),
    /// and the session's title if it has none yet.
    pub(super) fn unsaved(&self, history: &[Turn]) -> (Vec<StoredTurn>, Option<String>) {
        let persisted = self.persisted.lock().expect("memory lock");
        let new = history
            .iter()
            .filter(|t| t.id != SUMMARY_TURN_ID && !persisted.contains(&t.id))
            .map(stored)
            .collect();
        let untitled = !*self.titled.lock().expect("memory lock");
        (
            new,
            untitled
                .then(|| history.iter().find_map(title_of))
                .flatten(),
        )
    }

    /// Store what [`Self::unsaved`] found.
    pub(super) fn save(
        &self,
        new: Vec<StoredTurn>,
        title: Option<String>,
    ) -> Result<(), StoreError> {
        let records = self.recorder().map(|r| r.take()).unwrap_or_default();
        if new.is_empty() && records.is_empty() {
            // Nothing to write, so no write checks the lease: ask the store
            // whether this host lost it (noticed when it renews).
            if self.store.lease_lost(&self.id) {
                return Err(StoreError::LeaseLost {
                    session: self.id.clone(),
                });
            }
            return Ok(());
        }
        if let Err(err) = self.store.append(&self.id, &new, &records) {
            if let Some(recorder) = self.recorder() {
                recorder.restore(records);
            }
            return Err(err);
        }
        self.persisted
            .lock()
            .expect("memory lock")
            .extend(new.into_iter().map(|t| t.id));
        if let Some(title) = title {
            self.store.update_session(&self.id, Some(&title), None)?;
            *self.titled.lock().expect("memory lock") = true;
        }
        Ok(())
    }
}

pub(super) fn summary_turn(text: String) -> Turn {
    Turn {
        id: SUMMARY_TURN_ID.to_string(),
        timestamp: crate::time::now_rfc3339(),
        kind: TurnKind::System { text },
    }
}

/// A turn as the store keeps it.
pub fn stored(turn: &Turn) -> StoredTurn {
    let kind = match turn.kind {
        TurnKind::User { .. } => "user",
        TurnKind::Assistant { .. } => "assistant",
        TurnKind::ToolResults { .. } => "tool_results",
        TurnKind::Steering { .. } => "steering",
        TurnKind::System { .. } => "system",
    };
    StoredTurn {
        id: turn.id.clone(),
        timestamp: turn.timestamp.clone(),
        kind: kind.to_string(),
        body: serde_json::to_string(turn).unwrap_or_default(),
    }
}

/// A title from the first user input.
fn title_of(turn: &Turn) -> Option<String> {
    let TurnKind::User { text } = &turn.kind else {
        return None;
    };
    let line = text.lines().find(|l| !l.trim().is_empty())?.trim();
    Some(match line.char_indices().nth(72) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    })
}

/// Background jobs the history started (their ids).
fn lost_jobs(history: &[Turn]) -> Vec<String> {
    let mut ids = Vec::new();
    for turn in history {
        if let TurnKind::ToolResults { results } = &turn.kind {
            for r in results {
                if let Some(started) = crate::jobs::BackgroundAnswer::read(&r.content) {
                    ids.push(format!("job {}", started.job_id));
                }
            }
        }
    }
    ids
}

/// A turn as the compactor sees it.
pub(super) fn entry(turn: &Turn) -> Entry {
    let (role, text, calls, answers) = match &turn.kind {
        TurnKind::User { text } | TurnKind::Steering { text } => {
            ("user", text.clone(), vec![], vec![])
        }
        TurnKind::System { text } => ("system", text.clone(), vec![], vec![]),
        TurnKind::Assistant {
            text, tool_calls, ..
        } => {
            let mut out = text.clone();
            for c in tool_calls {
                out.push_str(&format!("\n(called {} with {})", c.name, c.arguments));
            }
            (
                "assistant",
                out,
                tool_calls.iter().map(|c| c.id.clone()).collect(),
                vec![],
            )
        }
        TurnKind::ToolResults { results } => {
            let text = results
                .iter()
                .map(|r| {
                    let content: String = r.content.chars().take(RESULT_CHARS).collect();
                    format!("{} → {}", r.name, content)
                })
                .collect::<Vec<_>>()
                .join("\n");
            (
                "tool",
                text,
                vec![],
                results.iter().map(|r| r.call_id.clone()).collect(),
            )
        }
    };
    Entry {
        id: turn.id.clone(),
        timestamp: turn.timestamp.clone(),
        role: role.to_string(),
        text,
        calls,
        answers,
    }
}
