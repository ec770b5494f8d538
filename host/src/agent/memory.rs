//! A session's memory: its turns in the store (committed before each model
//! request, so a killed process loses at most the turn in flight), resuming
//! a stored session, and compaction of its history (automatic over the
//! budget, on demand through `compact_context` or `/compact`, and once
//! after a context-length error).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::events::EventKind;
use super::session::Session;
use super::turns::{Turn, TurnKind};
use crate::compaction::{CompactionStats, Compactor, Entry};
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
    compactor: Arc<Compactor>,
    /// Turns already in the store.
    persisted: Mutex<HashSet<String>>,
    /// The stored history of a resumed session, taken by the session.
    loaded: Mutex<Vec<Turn>>,
    /// Whether the session has a title yet.
    titled: Mutex<bool>,
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
            state: "active".into(),
            turns: 0,
        })?;
        Ok(Arc::new(SessionMemory {
            id,
            store,
            compactor,
            persisted: Mutex::new(HashSet::new()),
            loaded: Mutex::new(Vec::new()),
            titled: Mutex::new(false),
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
        Ok(Arc::new(SessionMemory {
            id: record.id,
            store,
            compactor,
            persisted: Mutex::new(persisted),
            loaded: Mutex::new(history),
            titled: Mutex::new(record.title.is_some()),
        }))
    }

    /// The stored session's id (the session uses it as its own).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The history to start from (empty for a new session).
    pub(super) fn take_loaded(&self) -> Vec<Turn> {
        std::mem::take(&mut *self.loaded.lock().expect("memory lock"))
    }

    /// The store (for `memory_read`).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The turns of `history` not stored yet (in order, ready to store),
    /// and the session's title if it has none yet.
    fn unsaved(&self, history: &[Turn]) -> (Vec<StoredTurn>, Option<String>) {
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
    fn save(&self, new: Vec<StoredTurn>, title: Option<String>) -> Result<(), StoreError> {
        if new.is_empty() {
            return Ok(());
        }
        self.store.append_turns(&self.id, &new)?;
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

fn summary_turn(text: String) -> Turn {
    Turn {
        id: SUMMARY_TURN_ID.to_string(),
        timestamp: crate::time::now_rfc3339(),
        kind: TurnKind::System { text },
    }
}

fn stored(turn: &Turn) -> StoredTurn {
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
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&r.content)
                    && v["mode"] == "background"
                    && let Some(id) = v["job_id"].as_str()
                {
                    ids.push(format!("job {id}"));
                }
            }
        }
    }
    ids
}

/// A turn as the compactor sees it.
fn entry(turn: &Turn) -> Entry {
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

impl Session {
    /// Commit the turns not stored yet (before a model request, and when
    /// an input ends). A store failure is reported, not fatal.
    pub(super) fn persist(&self) {
        let Some(memory) = &self.memory else { return };
        // Only the new turns are copied out of the history, not all of it.
        let (new, title) = memory.unsaved(&self.lock().history);
        if let Err(err) = memory.save(new, title) {
            self.warn(&format!("the session could not be saved: {err}"));
        }
    }

    /// Compact when the context (`tokens`, estimated) is over the budget.
    pub(super) async fn compact_if_over_budget(&self, tokens: u64) {
        let Some(memory) = &self.memory else { return };
        let compressible = self
            .lock()
            .history
            .iter()
            .filter(|t| t.id != SUMMARY_TURN_ID)
            .count()
            > memory.compactor.config().keep_recent;
        if !compressible {
            return;
        }
        let window = self.profile.info.context_window.max(1);
        if memory.compactor.should_compress(tokens, window) {
            self.compact().await;
        }
    }

    /// Compact the history now (nothing when the session has no store or
    /// the history is short); the stats.
    pub async fn compact(&self) -> CompactionStats {
        let Some(memory) = &self.memory else {
            return CompactionStats::default();
        };
        self.emit(EventKind::CompactionStart, json!({}));
        // What is compacted must be stored first: compaction deletes it.
        self.persist();
        let history = self.lock().history.clone();
        let body: Vec<&Turn> = history.iter().filter(|t| t.id != SUMMARY_TURN_ID).collect();
        let entries: Vec<Entry> = body.iter().map(|t| entry(t)).collect();
        let outcome = memory.compactor.compress(&memory.id, &entries).await;
        let stats = match outcome {
            Ok(result) if result.kept_from > 0 => {
                let kept_first = body.get(result.kept_from).map(|t| t.id.clone());
                let mut inner = self.lock();
                let start = kept_first
                    .and_then(|id| inner.history.iter().position(|t| t.id == id))
                    .unwrap_or(inner.history.len());
                let mut new: Vec<Turn> = result.summary.map(summary_turn).into_iter().collect();
                new.extend(inner.history.drain(start..));
                inner.history = new;
                result.stats
            }
            Ok(result) => {
                if let Some(why) = result.failure {
                    self.warn(&format!(
                        "compaction failed, the history is unchanged: {why}"
                    ));
                }
                result.stats
            }
            Err(err) => {
                self.warn(&format!(
                    "compaction failed, the history is unchanged: {err}"
                ));
                CompactionStats::default()
            }
        };
        self.emit(
            EventKind::CompactionEnd,
            serde_json::to_value(stats).unwrap_or_default(),
        );
        stats
    }
}

/// The compaction and memory tools of a session with a store.
pub(super) mod tools {
    use std::sync::{Arc, Weak};

    use serde_json::{Value, json};

    use super::Session;
    use crate::plugin::ToolSpec;
    use crate::tools::{FnTool, ToolRegistry};

    /// Names of the tools registered here.
    pub const TOOL_NAMES: &[&str] = &["compact_context", "memory_read"];

    /// Register `compact_context` and `memory_read` for `session`.
    pub fn register(tools: &mut ToolRegistry, session: Weak<Session>) {
        let s = session.clone();
        tools.register(
            ToolSpec {
                name: "compact_context".into(),
                description: "Compact the conversation now: older messages are summarized and archived (search them later with memory_read), the most recent ones are kept verbatim. Returns how many messages were compressed and the estimated tokens before and after.".into(),
                parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
                traits: Default::default(),
            },
            Arc::new(FnTool(move |_args: Value, _ctx: crate::tools::ToolContext| {
                let s = s.clone();
                async move {
                    let session = s.upgrade().ok_or("the session has ended")?;
                    let stats = session.compact().await;
                    Ok(serde_json::to_string(&stats).unwrap_or_default())
                }
            })),
        );
        let s = session;
        tools.register(
            ToolSpec {
                name: "memory_read".into(),
                description: "Search the archived summaries of this conversation's compacted history (full-text, best matches first).".into(),
                parameters: json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "Words to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results (default 5)"}
                }, "required": ["query"], "additionalProperties": false}),
                traits: Default::default(),
            },
            Arc::new(FnTool(move |args: Value, _ctx: crate::tools::ToolContext| {
                let s = s.clone();
                async move {
                    let session = s.upgrade().ok_or("the session has ended")?;
                    let memory = session.memory.as_ref().ok_or("this session has no memory")?;
                    let query = args["query"].as_str().unwrap_or_default();
                    let limit = args["limit"].as_u64().unwrap_or(5) as usize;
                    let hits = memory
                        .store()
                        .search(Some(memory.id()), query, limit)
                        .map_err(|e| e.to_string())?;
                    if hits.is_empty() {
                        return Ok(format!("No archived summary matches \"{query}\"."));
                    }
                    Ok(hits
                        .iter()
                        .map(|b| format!("[{}]\n{}", b.label, b.content))
                        .collect::<Vec<_>>()
                        .join("\n\n"))
                }
            })),
        );
    }
}
