//! Replays of sessions recorded through the real loop (scripted models,
//! a real SQLite store): steering, a tool round, an interrupt while the
//! model answers and compactions replay the same; a recording that no
//! longer matches is reported at its first difference; an entry this
//! sandcrab cannot read is named with its field.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{ReplayError, ReplayOptions, Stop, replay};
use crate::agent::recorder::{RecordingSettings, recorded_compactor};
use crate::agent::{Profile, Session, SessionConfig, SessionInfo, SessionMemory, SessionParts};
use crate::compaction::{Entry, SummarizationConfig, Summarizer};
use crate::llm::scripted::{ScriptedClient, Step, text, tool_calls};
use crate::plugin::{ProfileInfo, ToolSpec};
use crate::store::SessionStore;
use crate::store::SqliteStore;
use crate::store::export::SessionExport;
use crate::tools::{FnTool, ToolRegistry};

struct Counting;

#[async_trait::async_trait]
impl Summarizer for Counting {
    async fn summarize(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        Ok(format!("{existing} + {} messages", messages.len()))
    }
}

fn echo_tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(
        ToolSpec::new(
            "echo",
            "Echo text",
            json!({"type":"object","properties":{"text":{"type":"string"}}}),
        ),
        Arc::new(FnTool(|args: Value, _| async move {
            Ok(format!("echo: {}", args["text"].as_str().unwrap_or("")))
        })),
    );
    r
}

/// A recorded session on `store` answering with `client`.
fn recorded_session(store: &Arc<SqliteStore>, client: Arc<ScriptedClient>) -> Arc<Session> {
    recorded_with(store, client, RecordingSettings::default(), 900)
}

fn recorded_with(
    store: &Arc<SqliteStore>,
    client: Arc<ScriptedClient>,
    settings: RecordingSettings,
    window: u64,
) -> Arc<Session> {
    let (recorder, compactor) = recorded_compactor(
        settings,
        0,
        Arc::new(Counting),
        store.clone(),
        SummarizationConfig {
            chunk_size: 2,
            keep_recent: 2,
            ..SummarizationConfig::default()
        },
    );
    let memory = SessionMemory::create(
        store.clone(),
        compactor,
        &SessionInfo {
            workspace: "/w".into(),
            provider: "scripted".into(),
            profile: "p".into(),
            model: "m".into(),
        },
    )
    .unwrap();
    memory.record_with(recorder.unwrap());
    Session::new(SessionParts {
        memory: Some(memory),
        host_tools: vec![Arc::new(crate::agent::session_memory::tools::MemoryTools)],
        ..SessionParts::new(
            client,
            Arc::new(Profile {
                info: ProfileInfo {
                    id: "p".into(),
                    default_model: "m".into(),
                    // Small: the history compacts as it grows.
                    context_window: window,
                    parallel_tool_calls: true,
                    tool_names: vec![],
                    project_doc_files: vec![],
                    max_output_tokens: 0,
                },
                base_instructions: "You are a test agent.".into(),
            }),
            echo_tools().into(),
            SessionConfig::new("m"),
            std::env::temp_dir(),
        )
    })
}

/// A session with steering, a tool round, an interrupted answer and
/// compactions; its id and how many requests the model got.
async fn eventful_session(store: &Arc<SqliteStore>) -> (String, usize) {
    let client = Arc::new(ScriptedClient::new([
        tool_calls(&[("c1", "echo", json!({"text": "one"}))]),
        text(&"the first answer, long enough to fill the context. ".repeat(8)),
        // The second input is interrupted while the model thinks.
        Step::Delay(std::time::Duration::from_secs(5)),
        text(&"the third answer, again long enough to compact. ".repeat(8)),
        tool_calls(&[("c2", "echo", json!({"text": "two"}))]),
        text("done"),
    ]));
    let session = recorded_session(store, client.clone());
    session.steer("be brief");
    session.submit("first").await.unwrap();
    let interrupted = tokio::spawn({
        let session = session.clone();
        async move { session.submit("second").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    session.interrupt();
    interrupted.await.unwrap().unwrap();
    session.submit("third").await.unwrap();
    session.compact_on_request().await;
    session.submit("fourth").await.unwrap();
    (session.id().to_string(), client.requests().len())
}

#[tokio::test]
async fn an_eventful_session_replays_with_every_request_the_same() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (id, requests) = eventful_session(&store).await;
    let kinds: Vec<String> = store
        .records(&id)
        .unwrap()
        .into_iter()
        .map(|r| r.kind)
        .collect();
    for kind in [
        "start", "steering", "tools", "model", "tool", "summary", "compact",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} entry in {kinds:?}"
        );
    }
    let report = replay(store.as_ref(), &id, ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!(report.stop, None);
    assert_eq!(report.model_calls as usize, requests);
    assert_eq!((report.inputs, report.tool_answers), (4, 2));
    // The replay wrote nothing to the store it read.
    assert_eq!(store.records(&id).unwrap().len(), kinds.len());
}

/// The session's export with one recording entry's JSON edited.
fn edited(store: &SqliteStore, id: &str, kind: &str, edit: impl Fn(&str) -> String) -> SqliteStore {
    let mut export = SessionExport::of(store, id).unwrap();
    let entry = export.records.iter_mut().find(|r| r.kind == kind).unwrap();
    let changed = edit(&entry.body);
    assert_ne!(changed, entry.body);
    entry.body = changed;
    let other = SqliteStore::in_memory().unwrap();
    other.import_session(&export).unwrap();
    other
}

#[tokio::test]
async fn the_first_difference_is_named_with_the_call_the_field_and_both_values() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (id, _) = eventful_session(&store).await;
    // As if the host had built the first request from other text.
    let other = edited(&store, &id, "model", |b| {
        b.replacen("\"first\"", "\"frist\"", 1)
    });
    let report = replay(&other, &id, ReplayOptions::default()).await.unwrap();
    let Some(Stop::Diverged(d)) = report.stop else {
        panic!("no divergence: {:?}", report.stop);
    };
    assert_eq!(
        (
            d.model_call,
            d.field.as_str(),
            d.recorded.as_str(),
            d.now.as_str()
        ),
        (1, "messages[1].text", "\"frist\"", "\"first\"")
    );
    // The edit is also what `verify` finds.
    let links = other.chain(&id).unwrap();
    let broken = crate::store::chain::verify(
        &links,
        &other.turns(&id).unwrap(),
        &other.records(&id).unwrap(),
        other.session(&id).unwrap().unwrap().title.as_deref(),
    );
    assert!(matches!(
        broken,
        Err(crate::store::chain::Broken::RecordChanged { .. })
    ));
}

#[tokio::test]
async fn an_entry_this_sandcrab_cannot_read_is_named_with_its_field() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (id, _) = eventful_session(&store).await;
    let newer = edited(&store, &id, "start", |b| {
        b.replacen("\"format\":1", "\"format\":99", 1)
    });
    let err = replay(&newer, &id, ReplayOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReplayError::Unreadable(e) if e.seq == 1 && e.message.contains("field `format`")),
        "{err}"
    );
    let unknown = edited(&store, &id, "model", |b| {
        b.replacen("\"type\":\"finish\"", "\"type\":\"hologram\"", 1)
    });
    let err = replay(&unknown, &id, ReplayOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(model): field `events[") && err.contains("hologram"),
        "{err}"
    );
}

#[tokio::test]
async fn until_stops_after_that_many_calls() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (id, _) = eventful_session(&store).await;
    let report = replay(store.as_ref(), &id, ReplayOptions { until: Some(2) })
        .await
        .unwrap();
    assert_eq!((report.stop, report.model_calls), (Some(Stop::Until(2)), 2));
}

#[tokio::test]
async fn a_digests_recording_replays_and_names_the_message_that_differs() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let client = Arc::new(ScriptedClient::new([
        tool_calls(&[("c1", "echo", json!({"text": "one"}))]),
        text("done"),
    ]));
    let settings = RecordingSettings {
        mode: crate::store::RecordingMode::Digests,
        ..RecordingSettings::default()
    };
    let session = recorded_with(&store, client, settings, 900);
    session.submit("hello there").await.unwrap();
    let id = session.id().to_string();
    let bodies: Vec<String> = store
        .records(&id)
        .unwrap()
        .into_iter()
        .map(|r| r.body)
        .collect();
    assert!(
        bodies
            .iter()
            .all(|b| !b.contains("hello there") || b.contains("\"entry\":\"input\"")),
        "digests mode keeps no request text"
    );
    let report = replay(store.as_ref(), &id, ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!((report.stop, report.model_calls), (None, 2));
    // The recorded input differs from what the request digest vouches for.
    let other = edited(&store, &id, "input", |b| {
        b.replacen("hello there", "hello where", 1)
    });
    let report = replay(&other, &id, ReplayOptions::default()).await.unwrap();
    let Some(Stop::Diverged(d)) = report.stop else {
        panic!("no divergence: {:?}", report.stop);
    };
    assert_eq!((d.model_call, d.field.as_str()), (1, "messages[1]"));
    assert!(
        d.recorded.starts_with("digest ") && d.now.contains("hello where"),
        "{d:?}"
    );
}

#[tokio::test]
async fn past_the_size_cap_recording_stops_with_a_note_and_replay_says_so() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let client = Arc::new(ScriptedClient::new([
        text("first answer"),
        text("second answer"),
    ]));
    let settings = RecordingSettings {
        cap_bytes: 6_000,
        ..RecordingSettings::default()
    };
    // Room for the long second input.
    let session = recorded_with(&store, client, settings, 8000);
    session.submit("one").await.unwrap();
    session.submit(&"two ".repeat(2_000)).await.unwrap();
    let id = session.id().to_string();
    let records = store.records(&id).unwrap();
    assert_eq!(records.last().unwrap().kind, "stopped");
    // The cap, and the short note that says where recording stopped.
    assert!(store.recording_size(&id).unwrap() <= 6_000 + 100);
    let report = replay(store.as_ref(), &id, ReplayOptions::default())
        .await
        .unwrap();
    assert!(
        report.recording_capped && report.stop.is_none(),
        "{report:?}"
    );
}
