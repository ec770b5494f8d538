//! Sessions with a store: durability, resume, and compaction through the
//! loop (AC5.x, AC7.2), on a real SQLite file; the models are scripted.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{drain, kinds, profile, tools};
use crate::agent::memory::{SUMMARY_TURN_ID, SessionInfo, SessionMemory};
use crate::agent::{EventKind, Session, SessionConfig, SessionParts, TurnKind};
use crate::compaction::{Compactor, Entry, SummarizationConfig, Summarizer};
use crate::llm::scripted::{ScriptedClient, Step, text, tool_calls};
use crate::llm::{LlmError, Message};
use crate::store::SessionStore;
use crate::store::{SqliteStore, Store, StoredTurn};

/// Summarizes as "summary of <ids>".
struct Ids;

#[async_trait::async_trait]
impl Summarizer for Ids {
    async fn summarize(&self, _existing: &str, messages: &[Entry]) -> Result<String, String> {
        let ids: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
        Ok(format!("summary of: {}", ids.join(" | ")))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    compactor: Arc<Compactor>,
}

fn fixture(config: SummarizationConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let compactor = Arc::new(Compactor::new(Arc::new(Ids), store.clone(), config));
    Fixture {
        _dir: dir,
        store,
        compactor,
    }
}

fn small() -> SummarizationConfig {
    SummarizationConfig {
        chunk_size: 4,
        keep_recent: 2,
        ..SummarizationConfig::default()
    }
}

fn session(
    f: &Fixture,
    client: Arc<ScriptedClient>,
    window: u64,
    memory: Arc<SessionMemory>,
) -> Arc<Session> {
    let _ = f;
    Session::new(SessionParts {
        memory: Some(memory),
        host_tools: vec![Arc::new(crate::agent::session_memory::tools::MemoryTools)],
        ..SessionParts::new(
            client,
            profile(window),
            tools().into(),
            SessionConfig::new("test-model"),
            std::env::temp_dir(),
        )
    })
}

fn new_memory(f: &Fixture) -> Arc<SessionMemory> {
    let store: Arc<dyn Store> = f.store.clone();
    SessionMemory::create(
        store,
        f.compactor.clone(),
        &SessionInfo {
            workspace: "/w".into(),
            provider: "anthropic".into(),
            profile: "anthropic".into(),
            model: "test-model".into(),
        },
    )
    .unwrap()
}

/// Messages of a request, without the system prompt.
fn conversation(request: &crate::llm::Request) -> Vec<&Message> {
    request.messages.iter().skip(1).collect()
}

#[tokio::test]
async fn every_turn_is_committed_before_the_next_model_request() {
    let f = fixture(small());
    let memory = new_memory(&f);
    let client = Arc::new(ScriptedClient::new([
        tool_calls(&[("c1", "echo", json!({"text": "hi"}))]),
        Step::Delay(std::time::Duration::from_millis(300)),
        text("done"),
    ]));
    let s = session(&f, client, 200_000, memory.clone());
    let id = s.id().to_string();
    let run = tokio::spawn({
        let s = s.clone();
        async move { s.submit("say hi").await }
    });
    // While the second model call is in flight, the user turn, the call and
    // its result are already in the store.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let kinds: Vec<String> = f
        .store
        .turns(&id)
        .unwrap()
        .into_iter()
        .map(|t| t.kind)
        .collect();
    assert_eq!(kinds, ["user", "assistant", "tool_results"]);
    run.await.unwrap().unwrap();
    assert_eq!(f.store.turns(&id).unwrap().len(), 4);
    assert_eq!(
        f.store.session(&id).unwrap().unwrap().title.as_deref(),
        Some("say hi")
    );
}

#[tokio::test]
async fn a_resumed_session_continues_with_every_committed_turn_repaired() {
    let f = fixture(small());
    let memory = new_memory(&f);
    let client = Arc::new(ScriptedClient::new([text("one"), text("two")]));
    let s = session(&f, client, 200_000, memory);
    s.submit("first").await.unwrap();
    s.submit("second").await.unwrap();
    let id = s.id().to_string();
    let before = s.history();
    // The process died in a tool round: the call is stored, its result
    // never was. The call started a background job.
    let dangling = crate::agent::Turn::new(TurnKind::Assistant {
        text: String::new(),
        tool_calls: vec![crate::llm::ToolCall::new(
            "c9",
            "echo",
            json!({"text": "x"}),
        )],
        reasoning: None,
        usage: Default::default(),
    });
    let started = crate::agent::Turn::new(TurnKind::Assistant {
        text: String::new(),
        tool_calls: vec![crate::llm::ToolCall::new(
            "c8",
            "shell",
            json!({"command": "make"}),
        )],
        reasoning: None,
        usage: Default::default(),
    });
    let job = crate::agent::Turn::new(TurnKind::ToolResults {
        results: vec![crate::agent::ToolResult {
            call_id: "c8".into(),
            name: "shell".into(),
            content: json!({"mode": "background", "job_id": "job-7", "status": "running"})
                .to_string(),
            is_error: false,
            receipt: None,
        }],
    });
    for turn in [&started, &job, &dangling] {
        f.store
            .append_turns(
                &id,
                &[StoredTurn {
                    id: turn.id.clone(),
                    timestamp: turn.timestamp.clone(),
                    kind: "x".into(),
                    body: serde_json::to_string(turn).unwrap(),
                }],
            )
            .unwrap();
    }
    drop(s);

    let store: Arc<dyn Store> = f.store.clone();
    let resumed = SessionMemory::resume(store, f.compactor.clone(), &id).unwrap();
    let client = Arc::new(ScriptedClient::new([text("three")]));
    let s = session(&f, client.clone(), 200_000, resumed);
    assert_eq!(s.id(), id);
    let history = s.history();
    assert_eq!(&history[..before.len()], &before[..]);
    // The dangling call got an answer, and the lost job is named.
    assert!(history.iter().any(|t| matches!(&t.kind, TurnKind::ToolResults { results } if results.iter().any(|r| r.call_id == "c9"))));
    let note = history.last().unwrap().text().unwrap().to_string();
    assert!(
        note.contains("job job-7") && note.contains("restart"),
        "{note}"
    );
    s.submit("third").await.unwrap();
    let sent = conversation(&client.requests()[0]).len();
    assert!(sent >= before.len() + 3, "{sent}");

    let unknown = SessionMemory::resume(f.store.clone(), f.compactor.clone(), "nope");
    let Err(err) = unknown else {
        panic!("an unknown id resumed")
    };
    assert!(err.to_string().contains("no session with id 'nope'"));
}

#[tokio::test]
async fn ac5_1_compact_context_takes_no_parameters() {
    let f = fixture(small());
    let s = session(
        &f,
        Arc::new(ScriptedClient::new([])),
        200_000,
        new_memory(&f),
    );
    let tools = s.tools();
    let spec = &tools.get("compact_context").expect("offered").spec;
    assert_eq!(spec.parameters["properties"], json!({}));
    assert!(spec.parameters.get("required").is_none());
    assert!(!spec.description.is_empty());
    assert!(tools.get("memory_read").is_some());
}

/// A session with `inputs` answered exchanges already in it.
async fn with_history(f: &Fixture, client: Arc<ScriptedClient>, inputs: usize) -> Arc<Session> {
    for i in 0..inputs {
        client.push(text(&format!("answer {i}")));
    }
    let s = session(f, client, 200_000, new_memory(f));
    for i in 0..inputs {
        s.submit(&format!("question {i}")).await.unwrap();
    }
    s
}

#[tokio::test]
async fn ac5_2_and_ac5_3_compact_context_reports_stats_and_the_next_request_is_shorter() {
    let f = fixture(small());
    let client = Arc::new(ScriptedClient::new([]));
    let s = with_history(&f, client.clone(), 6).await;
    client.push(tool_calls(&[
        ("c1", "compact_context", json!({})),
        ("c2", "echo", json!({"text": "after"})),
    ]));
    client.push(text("compacted"));
    s.submit("compact now").await.unwrap();
    let requests = client.requests();
    let (asked, answered) = (&requests[requests.len() - 2], &requests[requests.len() - 1]);
    assert!(
        conversation(answered).len() < conversation(asked).len(),
        "{} then {}",
        conversation(asked).len(),
        conversation(answered).len()
    );
    let result = s
        .history()
        .iter()
        .find_map(|t| match &t.kind {
            TurnKind::ToolResults { results } => results
                .iter()
                .find(|r| r.call_id == "c1")
                .map(|r| r.content.clone()),
            _ => None,
        })
        .unwrap();
    let stats: Value = serde_json::from_str(&result).unwrap();
    for field in [
        "messagesCompressed",
        "batchesCreated",
        "tokensEstimateBefore",
        "tokensEstimateAfter",
    ] {
        assert!(stats[field].is_u64(), "{field}: {stats}");
    }
    assert!(
        stats["messagesCompressed"].as_u64().unwrap() >= 10,
        "{stats}"
    );
    // The next request starts with the summary, and the round's call and
    // result are intact.
    match conversation(answered)[0] {
        Message::System { text } => assert!(text.starts_with("[Context Summary"), "{text}"),
        other => panic!("expected the summary first, got {other:?}"),
    }
    assert_eq!(s.history()[0].id, SUMMARY_TURN_ID);
}

#[tokio::test]
async fn ac5_4_compact_context_on_a_short_history_changes_nothing() {
    let f = fixture(SummarizationConfig {
        keep_recent: 50,
        ..small()
    });
    let client = Arc::new(ScriptedClient::new([]));
    let s = with_history(&f, client.clone(), 1).await;
    let before = s.history();
    let stats = s.compact().await;
    assert_eq!(stats, Default::default());
    assert_eq!(s.history(), before);
    let _ = client;
}

#[tokio::test]
async fn ac7_2_the_budget_triggers_compaction_before_a_request() {
    let f = fixture(small());
    let client = Arc::new(ScriptedClient::new([]));
    // 200 000-token window: 6 short exchanges stay far below 80 %.
    let s = with_history(&f, client.clone(), 6).await;
    let mut events = s.subscribe();
    client.push(text("fine"));
    s.submit("below the budget").await.unwrap();
    assert!(!kinds(&drain(&mut events)).contains(&EventKind::CompactionStart));

    // The same history with a 1,200-token window is over budget:
    // compacted before the request, which starts with the summary.
    let store: Arc<dyn Store> = f.store.clone();
    let resumed = SessionMemory::resume(store, f.compactor.clone(), s.id()).unwrap();
    let client = Arc::new(ScriptedClient::new([text("ok")]));
    let s = session(&f, client.clone(), 700, resumed);
    let mut events = s.subscribe();
    s.submit("over the budget").await.unwrap();
    let seen = kinds(&drain(&mut events));
    let start = seen
        .iter()
        .position(|k| *k == EventKind::CompactionStart)
        .unwrap();
    let end = seen
        .iter()
        .position(|k| *k == EventKind::CompactionEnd)
        .unwrap();
    assert!(start < end);
    match conversation(&client.requests()[0])[0] {
        Message::System { text } => assert!(text.starts_with("[Context Summary"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_context_length_error_compacts_once_and_asks_again() {
    let f = fixture(small());
    let client = Arc::new(ScriptedClient::new([]));
    let s = with_history(&f, client.clone(), 6).await;
    client.push(Step::Fail(LlmError::new(
        crate::llm::ErrorKind::ContextLength,
        "anthropic",
        "prompt is too long",
    )));
    client.push(text("after compaction"));
    s.submit("one more").await.unwrap();
    assert_eq!(s.last_assistant_text().as_deref(), Some("after compaction"));
    assert_eq!(s.history()[0].id, SUMMARY_TURN_ID);
}
