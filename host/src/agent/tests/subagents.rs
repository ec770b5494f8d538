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

/// A subagent's writes belong to the input that started it: its parent
/// shows them and `/undo` puts them back (they were kept nowhere before).
/// Control: the parent's own write in the same input is undone with them.
#[tokio::test]
async fn a_subagents_writes_are_shown_and_undone_with_its_parents_input() {
    use crate::plugin::{ToolTraits, Writes};
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let workspace = ws.path().canonicalize().unwrap();
    std::fs::write(workspace.join("child.txt"), "BEFORE\n").unwrap();
    let mut registry = tools();
    let root = workspace.clone();
    registry.register(
        ToolSpec {
            traits: ToolTraits {
                writes: Writes::Paths(vec!["file_path".into()]),
                ..Default::default()
            },
            ..ToolSpec::new("write", "Write a file", json!({"type": "object"}))
        },
        Arc::new(FnTool(move |args: Value, _| {
            let path = root.join(args["file_path"].as_str().unwrap_or_default());
            async move {
                std::fs::write(&path, "AFTER\n").map_err(|e| e.to_string())?;
                Ok("written".to_string())
            }
        })),
    );
    // The parent writes, spawns a child and waits; the child writes.
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[("p1", "write", json!({"file_path": "parent.txt"}))]),
        // Run to its end inside the call, so the script is taken in order.
        tool_calls(&[(
            "p2",
            "spawn_agent",
            json!({"task": "write child.txt", "run_in_background": true}),
        )]),
        tool_calls(&[("c1", "write", json!({"file_path": "child.txt"}))]),
        text("child done"),
        text("parent done"),
    ]));
    let mut config = SessionConfig::new("test-model");
    config.max_subagent_depth = 1;
    let session = Session::new(SessionParts {
        children: Some(super::super::Subagents::new()),
        ..SessionParts::new(
            client,
            profile(200_000),
            registry.into(),
            config,
            workspace.clone(),
        )
    });
    session.keep_checkpoints(data.path(), crate::kept::Protected::none());
    session.submit("go").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.join("child.txt")).unwrap(),
        "AFTER\n",
        "precondition: the child wrote"
    );
    let changed: Vec<String> = session
        .conversation_changes()
        .changes
        .iter()
        .map(|c| c.path.clone())
        .collect();
    assert!(
        changed.contains(&"child.txt".to_string()) && changed.contains(&"parent.txt".to_string()),
        "{changed:?}"
    );
    session.undo_last_changes(false).unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.join("child.txt")).unwrap(),
        "BEFORE\n"
    );
    assert!(
        !workspace.join("parent.txt").exists(),
        "control: the parent's own write is undone"
    );
}
