//! Context compaction (SPEC §7): old turns are summarized in chunks into
//! summary batches, archived, and replaced by one `[Context Summary …]`
//! system message; batches that pile up are folded into deeper ones.
//!
//! This folder knows nothing of sessions: it works on [`Entry`]s (one per
//! turn: id, time, role, text, and the tool call ids it makes or answers),
//! a [`Summarizer`], and a [`Store`](crate::store::Store).

mod batch;
mod clip;
mod compactor;
pub mod config;
mod entry;
mod llm_summarizer;
mod prompt;

pub use batch::{SummaryBatch, parse_batch_metadata};
pub use clip::{CLIP_HEADER, build_clip_archive};
pub use compactor::{
    CompactionResult, CompactionStats, Compactor, CompressPlan, Summarizer, batch_label_prefix,
};
pub use config::{ConfigError, SummarizationConfig};
pub use entry::{Entry, chunk_entries, estimate_tokens, split_history};
pub use llm_summarizer::{LlmSummarizer, PromptSource};
pub use prompt::{NO_PRIOR_SUMMARY, interpolate_prompt};
