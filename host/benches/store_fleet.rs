//! The session store shared by many hosts, SQLite against PostgreSQL on
//! loopback (a cluster the benchmark starts, as the tests do):
//! - committed turns per second, 1 and 8 concurrent writers (each its own
//!   session, each append one committed transaction with its chain link);
//! - resuming a 10,000-turn session on PostgreSQL: taking its lease and
//!   reading the history (goal ≤ 150 ms);
//! - an event published by one host's bridge log reaching another host's
//!   (NOTIFY, then the rows read from the store): p50/p99 printed (goal
//!   p99 ≤ 50 ms), criterion's mean beside it.
//!
//! Run: `cargo bench -p sandcrab --bench store_fleet` (needs the Debian
//! `postgresql` packages, as `scripts/test` installs).

// A benchmark report is our own text, not a peer's.
#![allow(clippy::disallowed_macros)]

#[path = "../../tests/e2e/pg_cluster.rs"]
#[allow(dead_code)]
mod pg_cluster;

#[path = "support/turns.rs"]
mod turns;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sandcrab::agent::SessionMemory;
use sandcrab::compaction::{Compactor, Entry, SummarizationConfig, Summarizer};
use sandcrab::store::{PgSettings, PgStore, SqliteStore, Store, StoreOptions, StoredTurn};
use turns::{info, turn};

struct NoSummaries;

#[async_trait::async_trait]
impl Summarizer for NoSummaries {
    async fn summarize(&self, _: &str, m: &[Entry]) -> Result<String, String> {
        Ok(format!("{} messages", m.len()))
    }
}

fn pg(url: &str, host: &str) -> Arc<dyn Store> {
    let settings = PgSettings {
        url: url.into(),
        password_env: Some(pg_cluster::PASSWORD_ENV.into()),
        ..PgSettings::default()
    };
    let options = StoreOptions {
        host: Some(host.into()),
        ..StoreOptions::default()
    };
    Arc::new(PgStore::open(&settings, &options, &|_| Some(pg_cluster::PASSWORD.into())).unwrap())
}

/// A new database on the benchmark's cluster, which (unlike the tests')
/// makes every commit durable.
fn database(hint: &str) -> String {
    pg_cluster::DURABLE.store(true, std::sync::atomic::Ordering::SeqCst);
    pg_cluster::database(hint)
}

fn compactor(store: &Arc<dyn Store>) -> Arc<Compactor> {
    Arc::new(Compactor::new(
        Arc::new(NoSummaries),
        store.clone(),
        SummarizationConfig::default(),
    ))
}

/// A new session in `store`; its id (the lease is let go).
fn new_session(store: &Arc<dyn Store>) -> String {
    let memory = SessionMemory::create(store.clone(), compactor(store), &info()).unwrap();
    memory.id().to_string()
}

fn appends(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let postgres = pg(&database("bench_append"), "bench");
    let mut group = c.benchmark_group("fleet/append_committed");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for (name, store) in [("sqlite", &sqlite), ("postgres", &postgres)] {
        for writers in [1usize, 8] {
            let sessions: Vec<String> = (0..writers).map(|_| new_session(store)).collect();
            group.bench_function(format!("{name}/{writers}_writers"), |b| {
                b.iter_custom(|iters| {
                    let per = (iters as usize).div_ceil(writers);
                    let started = Instant::now();
                    std::thread::scope(|scope| {
                        for id in &sessions {
                            let store = store.clone();
                            scope.spawn(move || {
                                for i in 0..per {
                                    store.append_turns(id, &[turn(i)]).unwrap();
                                }
                            });
                        }
                    });
                    started.elapsed()
                })
            });
        }
    }
    group.finish();
}

fn resume(c: &mut Criterion) {
    let store = pg(&database("bench_resume"), "bench");
    let id = new_session(&store);
    let turns: Vec<StoredTurn> = (0..10_000).map(turn).collect();
    for chunk in turns.chunks(500) {
        store.append_turns(&id, chunk).unwrap();
    }
    let compactor = compactor(&store);
    let mut group = c.benchmark_group("fleet");
    group.sample_size(20);
    group.bench_function("resume_10000_turns/postgres", |b| {
        b.iter(|| SessionMemory::resume(store.clone(), compactor.clone(), &id).unwrap())
    });
    group.finish();
}

fn cross_host_events(c: &mut Criterion) {
    let url = database("bench_events");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let (a, _b, mut follower) = runtime.block_on(async {
        let a = sandcrab::harness::EventLog::stored(pg(&url, "host-a"));
        let b = Arc::new(sandcrab::harness::EventLog::stored(pg(&url, "host-b")));
        a.switch_to(workspace.path()).unwrap();
        b.switch_to(workspace.path()).unwrap();
        b.follow_other_hosts();
        let (_, follower) = b.follow(0);
        // Let the listening connection come up.
        tokio::time::sleep(Duration::from_millis(500)).await;
        (a, b, follower)
    });
    let mut one = |n: u64| -> Duration {
        runtime.block_on(async {
            let started = Instant::now();
            let id = a.publish("agent:message-chunk", serde_json::json!({"text": n}));
            loop {
                let e = tokio::time::timeout(Duration::from_secs(10), follower.recv())
                    .await
                    .expect("the event reached the other host")
                    .unwrap();
                if e.id == id {
                    return started.elapsed();
                }
            }
        })
    };
    let mut n = 0;
    let mut samples: Vec<Duration> = (0..500)
        .map(|_| {
            n += 1;
            one(n)
        })
        .collect();
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "fleet/cross_host_event: p50 {:?}, p99 {:?} over {} events (goal p99 ≤ 50 ms)",
        at(0.5),
        at(0.99),
        samples.len()
    );
    let mut group = c.benchmark_group("fleet");
    group.sample_size(30);
    group.bench_function("cross_host_event", |b| {
        b.iter(|| {
            n += 1;
            one(n)
        })
    });
    group.finish();
}

criterion_group!(benches, appends, resume, cross_host_events);
criterion_main!(benches);
