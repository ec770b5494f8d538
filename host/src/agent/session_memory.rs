//! What a session does with its memory: commit its turns before each
//! request, compact when its context is over budget, and the tools that
//! let the model compact on demand and search what was archived.

use super::event_data::EventData;
use super::memory::{SUMMARY_TURN_ID, entry, summary_turn};
use super::session::Session;
use super::turns::{Turn, TurnKind};
use crate::compaction::{CompactionStats, CompressPlan, Entry};

impl Session {
    /// Commit the turns not stored yet (before a model request, and when
    /// an input ends). A store failure is reported, not fatal.
    pub(super) fn persist(&self) -> Result<(), crate::store::StoreError> {
        let Some(memory) = &self.memory else {
            return Ok(());
        };
        // Only the new turns are copied out of the history, not all of it.
        let (new, title) = memory.unsaved(&self.lock().history);
        let saved = memory.save(new, title);
        if let Err(err) = &saved {
            self.warn(&format!("the session could not be saved: {err}"));
        }
        saved
    }

    /// Compact when the context (`tokens`, the provider's count as
    /// estimated) is over the budget: the configured share of the window,
    /// or what the window leaves beside the answer when that is less.
    pub(super) async fn compact_if_over_budget(&self, tokens: u64) {
        let Some(memory) = &self.memory else { return };
        let keep = memory.compactor.config().keep_recent;
        if !self.compressible(keep) {
            return;
        }
        // Over the configured share of the window, or over what it leaves
        // beside the answer (a small window's tighter bound).
        let window = self.window.facts().tokens;
        let room = window.saturating_sub(self.window.answer_reserve(self.config.max_tokens));
        if memory.compactor.should_compress(tokens, window) || tokens > room {
            self.compact_keeping(self.turns_to_keep(keep)).await;
        }
    }

    /// Whether the history holds more than `keep` turns besides its
    /// summary and the current input's (so a compaction keeping `keep`
    /// has something to do).
    pub(super) fn compressible(&self, keep: usize) -> bool {
        let inner = self.lock();
        let body: Vec<&Turn> = inner
            .history
            .iter()
            .filter(|t| t.id != SUMMARY_TURN_ID)
            .collect();
        body.len() > keep.max(since_input(&body))
    }

    /// Make the vectors of what was just archived, off the request path
    /// (the compaction is committed already). A failure is retried by the
    /// next compaction, the next `memory_read` or `sandcrab sessions
    /// reindex`.
    fn embed_archived(&self, memory: &std::sync::Arc<super::memory::SessionMemory>) {
        let Some(semantic) = memory.semantic().cloned() else {
            return;
        };
        semantic.archived();
        let store = memory.store().clone();
        let id = memory.id().to_string();
        tokio::spawn(async move {
            if let Err(e) = semantic.backfill(store.as_ref(), Some(&id)).await {
                tracing::warn!("session {id}: archived summaries not embedded yet: {e}");
            }
        });
    }

    /// Compact because the operator asked (`/compact`): recorded, so a
    /// replay compacts at the same point.
    pub async fn compact_on_request(&self) -> CompactionStats {
        self.record(super::recording::Entry::Compact);
        super::turns::with_clock(self.turn_clock(), self.compact()).await
    }

    /// Compact the history now (nothing when the session has no store or
    /// the history is short); the stats.
    pub async fn compact(&self) -> CompactionStats {
        match &self.memory {
            // Asked between inputs: its summary is the session's spend too.
            Some(memory) => {
                crate::llm::spend::charging(
                    self.spend.clone(),
                    self.compact_keeping_for(memory.compactor.config().keep_recent, "manual"),
                )
                .await
            }
            None => CompactionStats::default(),
        }
    }

    /// Compact, keeping the last `keep` turns verbatim (at least one), and
    /// handing the summarizer no more at a time than its window takes.
    pub(super) async fn compact_keeping(&self, keep: usize) -> CompactionStats {
        self.compact_keeping_for(keep, "auto").await
    }

    /// [`Self::compact_keeping`], `trigger` saying why (`auto`, or
    /// `manual`: the operator or the model asked) to PreCompact hooks.
    async fn compact_keeping_for(&self, keep: usize, trigger: &str) -> CompactionStats {
        let Some(memory) = &self.memory else {
            return CompactionStats::default();
        };
        let mut fields = serde_json::Map::new();
        fields.insert("trigger".into(), trigger.into());
        fields.insert("custom_instructions".into(), "".into());
        self.hooks_observe(crate::hooks::HookEvent::PreCompact, trigger, fields)
            .await;
        self.emit(EventData::CompactionStart(Default::default()));
        // What is compacted must be stored first: compaction deletes it.
        let _ = self.persist();
        let history = self.lock().history.clone();
        let body: Vec<&Turn> = history.iter().filter(|t| t.id != SUMMARY_TURN_ID).collect();
        let entries: Vec<Entry> = body.iter().map(|t| entry(t)).collect();
        let plan = CompressPlan {
            // Never the operator's current input, nor what answers it.
            keep_recent: keep.max(since_input(&body)).max(1),
            chunk_tokens: Some(self.summarizer_chunk_tokens()),
        };
        let outcome = memory
            .compactor
            .compress_with(memory.id(), &entries, plan)
            .await;
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
                drop(inner);
                self.embed_archived(memory);
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
        self.emit(EventData::CompactionEnd(stats));
        stats
    }
}

/// How many of the latest turns of `body` belong to the operator's
/// current input: from its turn to the end (none: no input yet).
fn since_input(body: &[&Turn]) -> usize {
    body.iter()
        .rposition(|t| matches!(t.kind, TurnKind::User { .. }))
        .map_or(0, |at| body.len() - at)
}

/// The compaction and memory tools of a session with a store.
pub mod tools {
    use std::sync::{Arc, Weak};

    use serde_json::{Value, json};

    use super::Session;
    use crate::plugin::ToolSpec;
    use crate::tools::{FnTool, ToolRegistry};

    /// Names of the tools registered here.
    pub const TOOL_NAMES: &[&str] = &["compact_context", "memory_read"];

    /// The session's memory tools: `compact_context` and `memory_read`.
    pub struct MemoryTools;

    impl crate::agent::session::HostTools for MemoryTools {
        fn register(self: Arc<Self>, tools: &mut ToolRegistry, session: Weak<Session>) {
            register(tools, session);
        }
    }

    /// Register `compact_context` and `memory_read` for `session`.
    fn register(tools: &mut ToolRegistry, session: Weak<Session>) {
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
                description: "Search the archived summaries of this conversation's compacted history (by words, and by meaning when embeddings are configured; best matches first, each saying what found it).".into(),
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
                    let limit = (args["limit"].as_u64().unwrap_or(5) as usize).clamp(1, 50);
                    let found = crate::agent::recall::recall(
                        memory.store().as_ref(),
                        memory.id(),
                        memory.semantic().map(|s| s.as_ref()),
                        query,
                        limit,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                    if let Some(warning) = found.warning {
                        session.warn(&warning);
                    }
                    if found.hits.is_empty() {
                        return Ok(format!("No archived summary matches \"{query}\"."));
                    }
                    Ok(found
                        .hits
                        .iter()
                        .map(|(b, by)| format!("[{}] (found by {})\n{}", b.label, by.describe(), b.content))
                        .collect::<Vec<_>>()
                        .join("\n\n"))
                }
            })),
        );
    }
}
