//! Phase 7: subagents.

use super::*;
use crate::agent::{SessionState, TurnKind};
use crate::llm::scripted::{text, tool_calls};
use crate::tools::{ToolCallRequest, ToolContext, dispatch};

async fn call(session: &Arc<Session>, name: &str, args: Value) -> crate::tools::ToolOutcome {
    let request = ToolCallRequest {
        id: "x".into(),
        name: name.into(),
        arguments: args,
    };
    dispatch(&session.tools(), &request, &ToolContext::default()).await
}

#[tokio::test]
async fn spawn_creates_a_child_with_its_own_history() {
    let h = harness(vec![text("child done")], |c| c.max_subagent_depth = 2);
    h.session.push(TurnKind::User {
        text: "parent history".into(),
    });
    let out = call(&h.session, "spawn_agent", json!({"task": "do a thing"})).await;
    assert!(!out.is_error(), "{}", out.content);
    let id = serde_json::from_str::<Value>(&out.content).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let waited: Value = serde_json::from_str(
        &call(&h.session, "wait", json!({"agent_id": id}))
            .await
            .content,
    )
    .unwrap();
    assert_eq!(waited["success"], true);
    let child = h.children.get(&id).await.expect("the child exists");
    assert_eq!(child.depth(), 1);
    assert_eq!(child.workspace, h.session.workspace, "same environment");
    let child_history = child.history();
    assert!(
        child_history
            .iter()
            .all(|t| t.text() != Some("parent history")),
        "independent history"
    );
    assert!(matches!(&child_history[0].kind, TurnKind::User { text } if text == "do a thing"));
    assert!(
        child.tools().get("spawn_agent").is_some(),
        "depth 1 < 2 may spawn again"
    );
}

#[tokio::test]
async fn the_depth_limit_is_an_error_and_creates_nothing() {
    let h = harness(
        vec![
            tool_calls(&[("s", "spawn_agent", json!({"task": "nested"}))]),
            text("child done"),
        ],
        |c| c.max_subagent_depth = 1,
    );
    let out = call(&h.session, "spawn_agent", json!({"task": "t"})).await;
    let id = serde_json::from_str::<Value>(&out.content).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    call(&h.session, "wait", json!({"agent_id": id})).await;
    let child = h.children.get(&id).await.unwrap();
    assert!(
        child.tools().get("spawn_agent").is_none(),
        "at the limit the tool is not offered"
    );
    // Even when asked directly, the child refuses.
    let mut config = SessionConfig::new("m");
    config.max_subagent_depth = 1;
    let deep = Session::new(SessionParts {
        depth: 1,
        ..SessionParts::new(
            h.client.clone(),
            profile(200_000),
            tools().into(),
            config,
            std::env::temp_dir(),
        )
    });
    let mut registry = deep.tools();
    crate::agent::HostTools::register(
        super::super::Subagents::new(),
        &mut registry,
        Arc::downgrade(&deep),
    );
    let request = ToolCallRequest {
        id: "x".into(),
        name: "spawn_agent".into(),
        arguments: json!({"task": "t"}),
    };
    let out = dispatch(&registry, &request, &ToolContext::default()).await;
    assert!(
        out.is_error() && out.content.contains("depth limit reached"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn send_input_then_wait_returns_output_success_and_turns() {
    let h = harness(vec![text("first"), text("second result")], |_| {});
    let out = call(&h.session, "spawn_agent", json!({"task": "start"})).await;
    let id = serde_json::from_str::<Value>(&out.content).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let sent = call(
        &h.session,
        "send_input",
        json!({"agent_id": id, "message": "more"}),
    )
    .await;
    assert!(!sent.is_error(), "{}", sent.content);
    let waited: Value = serde_json::from_str(
        &call(&h.session, "wait", json!({"agent_id": id}))
            .await
            .content,
    )
    .unwrap();
    assert_eq!(waited["output"], "second result");
    assert_eq!(waited["success"], true);
    assert_eq!(waited["turns_used"], 2);
}

/// A parent with one subagent whose model takes 30 s to answer.
async fn slow_child() -> (Harness, String, Arc<Session>) {
    let client = ScriptedClient::new(vec![
        Step::Delay(std::time::Duration::from_secs(30)),
        text("never"),
    ]);
    let h = harness_with(client, |_| {}, 200_000);
    let out = call(&h.session, "spawn_agent", json!({"task": "slow"})).await;
    let id = serde_json::from_str::<Value>(&out.content).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let child = h.children.get(&id).await.unwrap();
    (h, id, child)
}

#[tokio::test]
async fn close_agent_aborts_the_child() {
    let (h, id, child) = slow_child().await;
    let closed = call(&h.session, "close_agent", json!({"agent_id": id})).await;
    assert!(!closed.is_error(), "{}", closed.content);
    assert_eq!(child.state(), SessionState::Closed);
    assert!(
        call(&h.session, "wait", json!({"agent_id": id}))
            .await
            .content
            .contains("no subagent")
    );
}

#[tokio::test]
async fn aborting_the_parent_closes_its_children() {
    let (h, _id, child) = slow_child().await;
    h.session.abort().await;
    assert_eq!(child.state(), SessionState::Closed);
}
