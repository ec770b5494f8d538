//! Aborting a session stops what it is doing: the model stream, and the
//! programs its tools started (their process groups are killed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use sandcrab::agent::{EventKind, SessionState};
use sandcrab::llm::scripted::{ScriptedClient, text, tool_calls};
use serde_json::json;

use crate::support::{Scene, gone_soon, plugin_session, process_running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_kills_the_running_command_and_ends_the_session() {
    let scene = Scene::new();
    let marker = format!("sleep 45.{}", std::process::id());
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[(
            "c1",
            "shell",
            json!({"command": marker, "timeout_ms": 60000}),
        )]),
        text("never reached"),
    ]));
    let (_host, session) = plugin_session(&scene, "anthropic", client).await;
    let mut events = session.events();
    let task = {
        let session = session.clone();
        tokio::spawn(async move { session.submit("sleep").await })
    };
    let started = Instant::now();
    while !process_running(&marker) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    session.abort().await;
    let _ = task.await;
    assert_eq!(session.state(), SessionState::Closed);
    assert!(gone_soon(&marker), "the command's process was killed");
    let mut all = Vec::new();
    while let Some(e) = events.next().await {
        all.push(e);
    }
    let kinds: Vec<EventKind> = all.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds.last(), Some(&EventKind::SessionEnd));
    let ends: Vec<&sandcrab::agent::Event> = all
        .iter()
        .filter(|e| e.kind() == EventKind::ToolCallEnd)
        .collect();
    assert_eq!(ends.len(), 1, "the aborted call ends once");
    assert_eq!(ends[0].data_json()["is_error"], true);
    assert!(
        ends[0].data_json()["output"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{}",
        ends[0].data_json()
    );
}
