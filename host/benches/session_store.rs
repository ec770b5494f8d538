//! The session store and compaction, host side only (the summarizing model
//! answers at once):
//! - appending one turn, committed (goal ≥ 5,000 turns/s);
//! - resuming a 10,000-turn session (goal ≤ 100 ms);
//! - compacting 1,000 turns (goal ≤ 20 ms);
//! - `memory_read` (FTS5) over 10,000 archived blocks (goal ≤ 10 ms);
//! - `sessions verify` of a 10,000-turn session: reading the turns and
//!   the chain and recomputing every hash (goal ≤ 200 ms).
//!
//! Run: `cargo bench -p sandcrab --bench session_store`.

#[path = "support/turns.rs"]
mod turns;

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sandcrab::agent::SessionMemory;
use sandcrab::compaction::{Compactor, Entry, SummarizationConfig, Summarizer};
use sandcrab::store::{ArchiveStore, SessionStore};
use sandcrab::store::{NewBlock, SqliteStore, StoredTurn};
use turns::{info, turn};

struct Instant;

#[async_trait::async_trait]
impl Summarizer for Instant {
    async fn summarize(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        Ok(format!(
            "{} +{} messages",
            &existing[..existing.len().min(200)],
            messages.len()
        ))
    }
}

fn compactor(store: &Arc<SqliteStore>) -> Arc<Compactor> {
    Arc::new(Compactor::new(
        Arc::new(Instant),
        store.clone(),
        SummarizationConfig::default(),
    ))
}

/// A store file with one session of `n` turns; its id.
fn session_with(dir: &std::path::Path, n: usize) -> (Arc<SqliteStore>, String) {
    let store = Arc::new(SqliteStore::open(&dir.join("s.db")).unwrap());
    let memory = SessionMemory::create(store.clone(), compactor(&store), &info()).unwrap();
    let turns: Vec<StoredTurn> = (0..n).map(turn).collect();
    store.append_turns(memory.id(), &turns).unwrap();
    (store, memory.id().to_string())
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = session_with(dir.path(), 0);
    let mut i = 0;
    c.bench_function("store/append_one_turn_committed", |b| {
        b.iter(|| {
            i += 1;
            store.append_turns(&id, &[turn(i)]).unwrap();
        })
    });
}

fn resume(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = session_with(dir.path(), 10_000);
    let compactor = compactor(&store);
    c.bench_function("store/resume_10000_turns", |b| {
        b.iter(|| SessionMemory::resume(store.clone(), compactor.clone(), &id).unwrap())
    });
}

fn compact(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("compaction");
    group.sample_size(20);
    group.bench_function("compact_1000_turns", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let (store, id) = session_with(dir.path(), 1000);
                let entries: Vec<Entry> = store
                    .turns(&id)
                    .unwrap()
                    .into_iter()
                    .map(|t| Entry {
                        id: t.id,
                        timestamp: t.timestamp,
                        role: "user".into(),
                        text: t.body,
                        calls: vec![],
                        answers: vec![],
                    })
                    .collect();
                (dir, compactor(&store), id, entries)
            },
            |(_dir, compactor, id, entries)| {
                let r = rt.block_on(compactor.compress(&id, &entries)).unwrap();
                assert_eq!(r.stats.messages_compressed, 995);
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn search(c: &mut Criterion) {
    let store = SqliteStore::in_memory().unwrap();
    let words = [
        "deploy",
        "staging",
        "rsync",
        "heron",
        "migration",
        "schema",
        "tokio",
        "flaky",
        "cache",
        "release",
    ];
    for i in 0..10_000 {
        let content = format!(
            "[Summary batch | depth 0 | t to t | 20 messages]\nBatch {i}: the team discussed {} and {} while fixing issue {}; {}",
            words[i % 10],
            words[(i / 10) % 10],
            i * 7,
            "more context about decisions and files changed ".repeat(6)
        );
        store
            .add_block(
                "conv",
                &NewBlock {
                    label: format!("compaction-batch-conv-{i}"),
                    content,
                },
            )
            .unwrap();
    }
    c.bench_function("store/memory_read_fts_10000_blocks", |b| {
        b.iter(|| {
            let hits = store.search(Some("conv"), "rsync heron deploy", 5).unwrap();
            assert_eq!(hits.len(), 5);
        })
    });
}

fn verify(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = session_with(dir.path(), 10_000);
    let mut group = c.benchmark_group("chain");
    group.sample_size(20);
    group.bench_function("verify_10000_turns", |b| {
        b.iter(|| {
            let links = store.chain(&id).unwrap();
            let turns = store.turns(&id).unwrap();
            let ok = sandcrab::store::chain::verify(&links, &turns, &[], None).unwrap();
            assert_eq!(ok.links, 10_000);
        })
    });
    group.finish();
}

criterion_group!(benches, append, resume, compact, search, verify);
criterion_main!(benches);
