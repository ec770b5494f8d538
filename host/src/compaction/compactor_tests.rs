//! The compactor against a real SQLite file and a scripted summarizer
//! (the model is the only stand-in).

use std::sync::Mutex;

use super::*;
use crate::compaction::entry::tests::msgs;
use crate::compaction::{CLIP_HEADER, parse_batch_metadata};
use crate::store::{ArchiveStore, SessionStore};
use crate::store::{SessionRecord, SqliteStore, StoredTurn};

/// Answers "summary N of [ids]" and records what it was asked; fails when
/// told to.
#[derive(Default)]
struct Scripted {
    calls: Mutex<Vec<(String, Vec<String>)>>,
    fail: bool,
    /// Words added to each summary (a wordy summarizer).
    pad: usize,
}

#[async_trait::async_trait]
impl Summarizer for Scripted {
    async fn summarize(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        if self.fail {
            return Err("the summarizing model answered 500".into());
        }
        let mut calls = self.calls.lock().unwrap();
        let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
        calls.push((existing.to_string(), ids.clone()));
        Ok(format!(
            "summary {} of [{}]{}",
            calls.len(),
            ids.join(","),
            " word".repeat(self.pad)
        ))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    summarizer: Arc<Scripted>,
    compactor: Compactor,
}

const CONV: &str = "conv-1";

fn fixture(config: SummarizationConfig, fail: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    store
        .create_session(&SessionRecord {
            id: CONV.into(),
            workspace: "/w".into(),
            provider: "p".into(),
            profile: "p".into(),
            model: "m".into(),
            title: None,
            created_at: crate::time::now_rfc3339(),
            updated_at: crate::time::now_rfc3339(),
            state: crate::store::StoredState::Active,
            turns: 0,
            host: String::new(),
        })
        .unwrap();
    let summarizer = Arc::new(Scripted {
        fail,
        ..Scripted::default()
    });
    let compactor = Compactor::new(summarizer.clone(), store.clone(), config);
    Fixture {
        _dir: dir,
        store,
        summarizer,
        compactor,
    }
}

fn config(chunk_size: usize, keep_recent: usize) -> SummarizationConfig {
    SummarizationConfig {
        chunk_size,
        keep_recent,
        ..SummarizationConfig::default()
    }
}

/// Store `entries` as the conversation's turns.
fn store_turns(f: &Fixture, entries: &[Entry]) {
    let turns: Vec<StoredTurn> = entries
        .iter()
        .map(|e| StoredTurn {
            id: e.id.clone(),
            timestamp: e.timestamp.clone(),
            kind: e.role.clone(),
            body: e.text.clone(),
        })
        .collect();
    f.store.append_turns(CONV, &turns).unwrap();
}

fn batches(f: &Fixture) -> Vec<(String, SummaryBatch)> {
    f.store
        .archival(CONV, "")
        .unwrap()
        .into_iter()
        .map(|b| (b.label, parse_batch_metadata(&b.content).unwrap()))
        .collect()
}

#[tokio::test]
async fn ac1_1_history_over_budget_is_compressed_into_batches() {
    let f = fixture(config(3, 2), false);
    let h = msgs(10);
    store_turns(&f, &h);
    assert!(f.compactor.should_compress(estimate_tokens(&h), 10));
    let r = f.compactor.compress(CONV, &h).await.unwrap();
    assert!(r.stats.batches_created > 0);
    assert_eq!(r.kept_from, 8);
    assert_eq!(h.len() - r.kept_from + 1, 3, "shorter: summary + 2 kept");
    assert!(r.stats.tokens_estimate_after < r.stats.tokens_estimate_before || h.len() < 20);
}

#[tokio::test]
async fn ac1_3_each_chunk_is_summarized_with_the_previous_summary_folded_in() {
    let f = fixture(config(3, 1), false);
    let h = msgs(10);
    f.compactor.compress(CONV, &h).await.unwrap();
    let calls = f.summarizer.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 3, "9 compressed in chunks of 3");
    assert_eq!(calls[0].0, "", "AC1.8: the first call has no prior summary");
    assert_eq!(calls[1].0, "summary 1 of [t0,t1,t2]");
    assert_eq!(calls[2].0, "summary 2 of [t3,t4,t5]");
}

#[tokio::test]
async fn ac1_4_batches_carry_depth_time_range_and_count() {
    let f = fixture(config(3, 1), false);
    let h = msgs(8);
    f.compactor.compress(CONV, &h).await.unwrap();
    let stored = batches(&f);
    let got: Vec<(u32, &str, &str, usize)> = stored
        .iter()
        .map(|(_, b)| {
            (
                b.depth,
                b.start_time.as_str(),
                b.end_time.as_str(),
                b.message_count,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, h[0].timestamp.as_str(), h[2].timestamp.as_str(), 3),
            (0, h[3].timestamp.as_str(), h[5].timestamp.as_str(), 3),
            (0, h[6].timestamp.as_str(), h[6].timestamp.as_str(), 1),
        ]
    );
}

#[tokio::test]
async fn ac1_5_compressed_turns_are_deleted_from_the_store() {
    let f = fixture(config(3, 4), false);
    let h = msgs(10);
    store_turns(&f, &h);
    f.compactor.compress(CONV, &h).await.unwrap();
    let left: Vec<String> = f
        .store
        .turns(CONV)
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(left, ["t6", "t7", "t8", "t9"]);
}

#[tokio::test]
async fn ac1_7_a_failed_summarization_changes_nothing() {
    let f = fixture(config(3, 2), true);
    let h = msgs(10);
    store_turns(&f, &h);
    let r = f.compactor.compress(CONV, &h).await.unwrap();
    assert_eq!(r.kept_from, 0);
    assert_eq!(r.stats, CompactionStats::default());
    assert!(r.failure.unwrap().contains("500"));
    assert_eq!(f.store.turns(CONV).unwrap().len(), 10);
    assert!(batches(&f).is_empty());
}

#[tokio::test]
async fn ac1_8_a_first_compaction_makes_depth_0_batches_and_a_summary_message() {
    let f = fixture(config(20, 5), false);
    let r = f.compactor.compress(CONV, &msgs(12)).await.unwrap();
    assert!(batches(&f).iter().all(|(_, b)| b.depth == 0));
    let summary = r.summary.unwrap();
    assert!(summary.starts_with(CLIP_HEADER), "{summary}");
    assert!(summary.contains("## Earliest context"), "{summary}");
}

#[tokio::test]
async fn ac2_1_too_many_batches_are_resummarized_and_few_are_not() {
    // 7 batches with clip 2 + 2 + buffer 2: folded.
    let f = fixture(config(1, 0), false);
    f.compactor.compress(CONV, &msgs(7)).await.unwrap();
    let depths: Vec<u32> = batches(&f).iter().map(|(_, b)| b.depth).collect();
    assert_eq!(depths.iter().filter(|d| **d == 1).count(), 1, "{depths:?}");
    assert_eq!(depths.len(), 4, "{depths:?}");
    // 4 batches: left alone.
    let f = fixture(config(1, 0), false);
    f.compactor.compress(CONV, &msgs(4)).await.unwrap();
    assert_eq!(batches(&f).len(), 4);
    assert!(batches(&f).iter().all(|(_, b)| b.depth == 0));
}

#[tokio::test]
async fn ac2_2_and_ac2_3_a_folded_batch_is_one_deeper_and_replaces_its_sources() {
    let f = fixture(config(1, 0), false);
    f.compactor.compress(CONV, &msgs(5)).await.unwrap();
    let ids_before: Vec<i64> = f
        .store
        .archival(CONV, "")
        .unwrap()
        .iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(ids_before.len(), 5);
    // Two more turns: 7 batches > 6: the oldest four fold into one.
    let more: Vec<Entry> = msgs(7).into_iter().skip(5).collect();
    f.compactor.compress(CONV, &more).await.unwrap();
    let after = f.store.archival(CONV, "").unwrap();
    let kept_ids: Vec<i64> = after.iter().map(|b| b.id).collect();
    for old in &ids_before[..4] {
        assert!(!kept_ids.contains(old), "source batch {old} still stored");
    }
    let stored = batches(&f);
    let deep: Vec<&SummaryBatch> = stored
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b.depth == 1)
        .collect();
    assert_eq!(deep.len(), 1);
    assert_eq!(deep[0].message_count, 4);
    assert_eq!(deep[0].start_time, msgs(1)[0].timestamp);
}

#[tokio::test]
async fn ac2_4_repeated_cycles_reach_higher_depths() {
    let f = fixture(config(1, 0), false);
    let all = msgs(40);
    let mut max_depth = 0;
    let mut seen = Vec::new();
    for window in all.chunks(5) {
        f.compactor.compress(CONV, window).await.unwrap();
        let depth = batches(&f).iter().map(|(_, b)| b.depth).max().unwrap();
        assert!(depth >= max_depth);
        max_depth = depth;
        seen.push(depth);
    }
    assert!(max_depth >= 2, "{seen:?}");
    let total: usize = batches(&f).iter().map(|(_, b)| b.message_count).sum();
    assert_eq!(total, 40, "every message is covered exactly once");
}

#[tokio::test]
async fn ac3_3_the_summary_message_stands_first_with_both_sections() {
    let f = fixture(config(2, 2), false);
    let r = f.compactor.compress(CONV, &msgs(14)).await.unwrap();
    let summary = r.summary.unwrap();
    assert!(summary.starts_with("[Context Summary"), "{summary}");
    for part in [
        "## Earliest context",
        "## Recent context",
        "[Summary batch | depth ",
    ] {
        assert!(summary.contains(part), "{part}: {summary}");
    }
}

#[tokio::test]
async fn ac4_1_and_ac4_2_each_batch_is_archived_under_its_label() {
    let f = fixture(config(3, 1), false);
    f.compactor.compress(CONV, &msgs(7)).await.unwrap();
    let stored = batches(&f);
    assert_eq!(stored.len(), 2);
    let label = regex::Regex::new(
        r"^compaction-batch-conv-1-\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
    )
    .unwrap();
    for (l, _) in &stored {
        assert!(label.is_match(l), "{l}");
    }
}

#[tokio::test]
async fn ac4_3_archived_batches_are_found_by_memory_search() {
    let f = fixture(config(3, 1), false);
    let mut h = msgs(7);
    h[1].text = "we chose the zebra-migration strategy".into();
    f.compactor.compress(CONV, &h).await.unwrap();
    // The scripted summaries name the turn ids; search by one of them.
    let hits = f.store.search(Some(CONV), "t1", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].content.contains("summary 1 of [t0,t1,t2]"));
}

#[tokio::test]
async fn a_history_under_keep_recent_is_left_alone() {
    let f = fixture(config(3, 5), false);
    let r = f.compactor.compress(CONV, &msgs(4)).await.unwrap();
    assert_eq!(r.kept_from, 0);
    assert_eq!(r.stats, CompactionStats::default());
    assert!(f.summarizer.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_summarizer_with_a_small_window_reads_the_history_and_the_folds_in_parts() {
    let mut f = fixture(config(20, 0), false);
    // Summaries of ~70 estimated tokens each.
    f.summarizer = Arc::new(Scripted {
        pad: 40,
        ..Scripted::default()
    });
    f.compactor = Compactor::new(f.summarizer.clone(), f.store.clone(), config(20, 0));
    let mut long = msgs(14);
    for e in &mut long {
        e.text = format!("{} {}", e.text, "detail ".repeat(40));
    }
    // Each entry is ~100 estimated tokens; the summarizer takes 250.
    let plan = CompressPlan {
        keep_recent: 0,
        chunk_tokens: Some(250),
    };
    f.compactor.compress_with(CONV, &long, plan).await.unwrap();
    let calls = f.summarizer.calls.lock().unwrap().clone();
    // Fourteen entries in parts of two (not one part, as chunk_size 20
    // alone would make), each folded into the one before...
    let parts: Vec<usize> = calls.iter().map(|(_, ids)| ids.len()).collect();
    assert_eq!(&parts[..7], &[2; 7], "{calls:?}");
    assert!(calls[1].0.starts_with("summary 1 of"), "{calls:?}");
    // ...then the seven batches (over the 6 allowed) fold into a deeper
    // one, again in parts that fit, each carrying the one before.
    let fold = &calls[7..];
    assert!(fold.len() > 1, "the fold ran in one part: {calls:?}");
    assert!(fold[0].0.is_empty() && fold[1..].iter().all(|(e, _)| !e.is_empty()));
    let depths: Vec<u32> = batches(&f).iter().map(|(_, b)| b.depth).collect();
    assert!(depths.contains(&1), "{depths:?}");
}
