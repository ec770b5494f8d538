//! The compaction pipeline: split, chunk, summarize with fold-in, fold
//! piled-up batches into deeper ones, archive and delete in one
//! transaction, and build the summary message.

use std::sync::Arc;

use serde::Serialize;

use super::batch::{SummaryBatch, parse_batch_metadata};
use super::clip::build_clip_archive;
use super::config::SummarizationConfig;
use super::entry::{Entry, chunk_entries, estimate_tokens, split_history};
use crate::store::{CompactionWrite, NewBlock, Store, StoreError};

/// Writes one summary: `existing_summary` (empty at first) folded with
/// `messages`.
#[async_trait::async_trait]
pub trait Summarizer: Send + Sync {
    async fn summarize(&self, existing_summary: &str, messages: &[Entry])
    -> Result<String, String>;
}

/// What one compaction did (the `compact_context` tool returns it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStats {
    pub messages_compressed: usize,
    pub batches_created: usize,
    pub tokens_estimate_before: u64,
    pub tokens_estimate_after: u64,
}

/// The outcome: the new summary message and where the kept entries start.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionResult {
    /// The `[Context Summary …]` text to put first (None: no batches).
    pub summary: Option<String>,
    /// `entries[kept_from..]` stay verbatim (0: nothing was compressed).
    pub kept_from: usize,
    pub stats: CompactionStats,
    /// Why nothing changed, when a summarization failed.
    pub failure: Option<String>,
}

/// The label prefix of a conversation's batches in archival memory.
pub fn batch_label_prefix(conversation: &str) -> String {
    format!("compaction-batch-{conversation}-")
}

/// Compacts conversations with one summarizer into one store.
pub struct Compactor {
    summarizer: Arc<dyn Summarizer>,
    store: Arc<dyn Store>,
    config: SummarizationConfig,
}

/// How much one compaction keeps and how much the summarizer reads at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressPlan {
    /// Most recent entries kept verbatim.
    pub keep_recent: usize,
    /// Most estimated tokens of entries per summarizer request (none: no
    /// limit but `chunk_size`).
    pub chunk_tokens: Option<u64>,
}

/// Entries as the summarizer reads them: none longer than a chunk may be
/// (a pasted file is cut in the middle, with a note).
fn fit_for_summarizer(entries: &[Entry], chunk_tokens: Option<u64>) -> Vec<Entry> {
    let Some(limit) = chunk_tokens else {
        return entries.to_vec();
    };
    let bytes = (limit * crate::llm::estimate::BYTES_PER_TOKEN) as usize;
    entries
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.text.len() > bytes {
                let head = e.text.floor_char_boundary(bytes * 2 / 3);
                let tail = e.text.ceil_char_boundary(e.text.len() - bytes / 4);
                e.text = format!(
                    "{}\n[… {} bytes not shown to the summarizer …]\n{}",
                    &e.text[..head],
                    tail - head,
                    &e.text[tail..]
                );
            }
            e
        })
        .collect()
}

/// A stored batch and its archival id.
struct Stored {
    id: Option<i64>,
    batch: SummaryBatch,
}

impl Compactor {
    pub fn new(
        summarizer: Arc<dyn Summarizer>,
        store: Arc<dyn Store>,
        config: SummarizationConfig,
    ) -> Self {
        Compactor {
            summarizer,
            store,
            config,
        }
    }

    pub fn config(&self) -> &SummarizationConfig {
        &self.config
    }

    /// Whether `estimated_tokens` is over the budget of a `window`.
    pub fn should_compress(&self, estimated_tokens: u64, window: u64) -> bool {
        estimated_tokens as f64 > self.config.context_budget * window as f64
    }

    /// The summary message of what is archived for `conversation` now
    /// (for a resumed session), if anything is.
    pub fn summary_message(&self, conversation: &str) -> Result<Option<String>, StoreError> {
        let batches = self.stored_batches(conversation)?;
        Ok(self.clip(&batches))
    }

    /// Compress `entries` (the history without its summary message) of
    /// `conversation`, as configured. A failed summarization changes
    /// nothing (zero stats, `kept_from` 0); a store failure is an error
    /// and changes nothing.
    pub async fn compress(
        &self,
        conversation: &str,
        entries: &[Entry],
    ) -> Result<CompactionResult, StoreError> {
        let plan = CompressPlan {
            keep_recent: self.config.keep_recent,
            chunk_tokens: None,
        };
        self.compress_with(conversation, entries, plan).await
    }

    /// [`Self::compress`], keeping `plan.keep_recent` entries verbatim and
    /// handing the summarizer no more than `plan.chunk_tokens` at a time.
    pub async fn compress_with(
        &self,
        conversation: &str,
        entries: &[Entry],
        plan: CompressPlan,
    ) -> Result<CompactionResult, StoreError> {
        let mut batches = self.stored_batches(conversation)?;
        let current = self.clip(&batches);
        let unchanged = |failure: Option<String>| CompactionResult {
            summary: current.clone(),
            kept_from: 0,
            stats: CompactionStats::default(),
            failure,
        };
        let cut = split_history(entries, plan.keep_recent);
        if cut == 0 {
            return Ok(unchanged(None));
        }
        let (old, kept) = entries.split_at(cut);
        let before =
            estimate_tokens(entries) + self.clip(&batches).map_or(0, |s| (s.len() / 4) as u64);

        // Fold-in: each chunk's summary carries the previous one forward.
        let mut summary = batches
            .last()
            .map(|b| b.batch.summary.clone())
            .unwrap_or_default();
        let mut created = Vec::new();
        let old = fit_for_summarizer(old, plan.chunk_tokens);
        for chunk in chunk_entries(&old, self.config.chunk_size, plan.chunk_tokens) {
            summary = match self.summarizer.summarize(&summary, chunk).await {
                Ok(s) => s,
                Err(why) => return Ok(unchanged(Some(why))),
            };
            created.push(SummaryBatch {
                depth: 0,
                start_time: chunk[0].timestamp.clone(),
                end_time: chunk[chunk.len() - 1].timestamp.clone(),
                message_count: chunk.len(),
                summary: summary.clone(),
            });
        }
        let batches_created = created.len();
        batches.extend(created.into_iter().map(|batch| Stored { id: None, batch }));

        let mut folded_away = Vec::new();
        let limit = self.config.clip_first + self.config.clip_last + self.config.buffer;
        if batches.len() > limit {
            match self.fold_oldest(&mut batches, plan.chunk_tokens).await {
                Ok(ids) => folded_away = ids,
                Err(why) => return Ok(unchanged(Some(why))),
            }
        }

        let prefix = batch_label_prefix(conversation);
        let write = CompactionWrite {
            delete_turns: old.iter().map(|e| e.id.clone()).collect(),
            add_blocks: batches
                .iter()
                .filter(|b| b.id.is_none())
                .map(|b| NewBlock {
                    label: format!("{prefix}{}", crate::time::now_rfc3339()),
                    content: b.batch.to_text(),
                })
                .collect(),
            delete_blocks: folded_away,
        };
        self.store.compact(conversation, &write)?;
        let summary = self.clip(&batches);
        let after = estimate_tokens(kept) + summary.as_ref().map_or(0, |s| (s.len() / 4) as u64);
        Ok(CompactionResult {
            summary,
            kept_from: cut,
            stats: CompactionStats {
                messages_compressed: old.len(),
                batches_created,
                tokens_estimate_before: before,
                tokens_estimate_after: after,
            },
            failure: None,
        })
    }

    /// Fold the oldest batches into one of greater depth, leaving
    /// `clip_first + clip_last` in all (handing the summarizer no more than
    /// `chunk_tokens` of them at a time, each part folded into the
    /// summary of the parts before); the archival ids of stored batches
    /// folded away.
    async fn fold_oldest(
        &self,
        batches: &mut Vec<Stored>,
        chunk_tokens: Option<u64>,
    ) -> Result<Vec<i64>, String> {
        let keep = (self.config.clip_first + self.config.clip_last).max(1);
        let n = batches.len() + 1 - keep;
        let sources: Vec<Stored> = batches.drain(..n).collect();
        let entries: Vec<Entry> = sources
            .iter()
            .map(|s| Entry {
                id: s.id.map(|i| i.to_string()).unwrap_or_default(),
                timestamp: s.batch.start_time.clone(),
                role: "summary".into(),
                text: s.batch.summary.clone(),
                calls: Vec::new(),
                answers: Vec::new(),
            })
            .collect();
        let entries = fit_for_summarizer(&entries, chunk_tokens);
        let mut summary = String::new();
        for part in chunk_entries(&entries, usize::MAX, chunk_tokens) {
            summary = self.summarizer.summarize(&summary, part).await?;
        }
        let folded = SummaryBatch {
            depth: sources.iter().map(|s| s.batch.depth).max().unwrap_or(0) + 1,
            start_time: sources[0].batch.start_time.clone(),
            end_time: sources[n - 1].batch.end_time.clone(),
            message_count: sources.iter().map(|s| s.batch.message_count).sum(),
            summary,
        };
        batches.insert(
            0,
            Stored {
                id: None,
                batch: folded,
            },
        );
        Ok(sources.iter().filter_map(|s| s.id).collect())
    }

    /// The conversation's batches in archival memory, in time order.
    fn stored_batches(&self, conversation: &str) -> Result<Vec<Stored>, StoreError> {
        let mut batches: Vec<Stored> = self
            .store
            .archival(conversation, &batch_label_prefix(conversation))?
            .into_iter()
            .filter_map(|block| {
                parse_batch_metadata(&block.content).map(|batch| Stored {
                    id: Some(block.id),
                    batch,
                })
            })
            .collect();
        batches.sort_by(|a, b| {
            (&a.batch.start_time, std::cmp::Reverse(a.batch.depth))
                .cmp(&(&b.batch.start_time, std::cmp::Reverse(b.batch.depth)))
        });
        Ok(batches)
    }

    fn clip(&self, batches: &[Stored]) -> Option<String> {
        if batches.is_empty() {
            return None;
        }
        let plain: Vec<SummaryBatch> = batches.iter().map(|s| s.batch.clone()).collect();
        Some(build_clip_archive(
            &plain,
            self.config.clip_first,
            self.config.clip_last,
        ))
    }
}

#[cfg(test)]
#[path = "compactor_tests.rs"]
mod tests;
