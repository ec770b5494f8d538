//! The flight recorder's cost and the replay's speed:
//! - one turn of a stored session (a model call with a tool call, the
//!   tool, a model call with text; every turn committed to SQLite), with
//!   and without recording — the overhead is the difference;
//! - `replay` of a recorded 1,000-model-call session, start to verdict
//!   (reading the recording, re-running the loop, comparing requests).
//!
//! Run: `cargo bench -p sandcrab --bench flight_recorder`.

// A benchmark reports its numbers on the terminal.
#![allow(clippy::disallowed_macros)]

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sandcrab::agent::recorder::{Recorder, RecordingSettings};
use sandcrab::agent::{Profile, Session, SessionConfig, SessionInfo, SessionMemory, SessionParts};
use sandcrab::compaction::{Compactor, Entry, SummarizationConfig, Summarizer};
use sandcrab::llm::scripted::{ScriptedClient, Step, text, tool_calls};
use sandcrab::plugin::{ProfileInfo, ToolSpec};
use sandcrab::replay::{ReplayOptions, replay};
use sandcrab::store::SessionStore;
use sandcrab::store::SqliteStore;
use sandcrab::tools::{FnTool, ToolRegistry};
use serde_json::{Value, json};

struct Never;

#[async_trait::async_trait]
impl Summarizer for Never {
    async fn summarize(&self, _: &str, _: &[Entry]) -> Result<String, String> {
        Err("not in this benchmark".into())
    }
}

fn tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(
        ToolSpec::new("echo", "Echo text", json!({"type": "object"})),
        Arc::new(FnTool(|args: Value, _| async move {
            Ok(format!("echo: {}", args["text"].as_str().unwrap_or("")))
        })),
    );
    r
}

/// A stored session (recorded or not) answering with `steps`.
fn stored_session(store: &Arc<SqliteStore>, steps: Vec<Step>, recorded: bool) -> Arc<Session> {
    let compactor = Arc::new(Compactor::new(
        Arc::new(Never),
        store.clone(),
        SummarizationConfig::default(),
    ));
    let memory = SessionMemory::create(
        store.clone(),
        compactor,
        &SessionInfo {
            workspace: "/bench".into(),
            provider: "scripted".into(),
            profile: "bench".into(),
            model: "m".into(),
        },
    )
    .unwrap();
    if recorded {
        memory.record_with(Recorder::new(RecordingSettings::default(), 0).unwrap());
    }
    Session::new(SessionParts {
        memory: Some(memory),
        ..SessionParts::new(
            Arc::new(ScriptedClient::new(steps)),
            Arc::new(Profile {
                info: ProfileInfo {
                    id: "bench".into(),
                    default_model: "m".into(),
                    context_window: 10_000_000,
                    parallel_tool_calls: true,
                    tool_names: vec![],
                    project_doc_files: vec![],
                    max_output_tokens: 0,
                },
                base_instructions: "You are a benchmark.".into(),
            }),
            tools().into(),
            SessionConfig::new("m"),
            std::env::temp_dir(),
        )
    })
}

/// `inputs` rounds of (tool call, text): two model calls each.
fn script(inputs: usize) -> Vec<Step> {
    (0..inputs)
        .flat_map(|i| {
            [
                tool_calls(&[(
                    &format!("c{i}"),
                    "echo",
                    json!({"text": format!("item {i}")}),
                )]),
                text(&format!("Item {i} is echoed; the next one follows.")),
            ]
        })
        .collect()
}

fn recording_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("bench.db")).unwrap());
    let mut group = c.benchmark_group("stored_turn");
    for recorded in [false, true] {
        let name = if recorded { "recorded" } else { "not_recorded" };
        group.bench_function(name, |b| {
            b.iter_batched(
                // A session 20 inputs in, so requests carry some history.
                || {
                    let s = stored_session(&store, script(21), recorded);
                    drop(s.events());
                    for i in 0..20 {
                        rt.block_on(s.submit(&format!("echo item {i}"))).unwrap();
                    }
                    s
                },
                |session| {
                    rt.block_on(session.submit("echo the last item")).unwrap();
                    session
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn replay_long_session(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("long.db")).unwrap());
    let session = stored_session(&store, script(500), true);
    drop(session.events());
    for i in 0..500 {
        rt.block_on(session.submit(&format!("echo item {i}")))
            .unwrap();
    }
    let id = session.id().to_string();
    drop(session);
    let check = rt
        .block_on(replay(store.as_ref(), &id, ReplayOptions::default()))
        .unwrap();
    assert_eq!((check.model_calls, check.stop), (1000, None));
    eprintln!(
        "recording of the 1,000-call session: {} bytes uncompressed",
        store.recording_size(&id).unwrap()
    );
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.bench_function("1000_model_calls", |b| {
        b.iter(|| {
            rt.block_on(replay(store.as_ref(), &id, ReplayOptions::default()))
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, recording_overhead, replay_long_session);
criterion_main!(benches);
