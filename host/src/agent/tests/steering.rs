//! Phase 6: steering and follow-up.

use super::*;
use crate::agent::TurnKind;
use crate::llm::scripted::{text, tool_calls};

#[tokio::test]
async fn steering_before_submit_lands_before_the_assistant_turn() {
    let h = harness(vec![text("ok")], |_| {});
    let mut events = h.session.events();
    h.session.steer("change approach");
    h.session.submit("input").await.unwrap();
    let history = h.session.history();
    let steering = history
        .iter()
        .position(|t| matches!(&t.kind, TurnKind::Steering { text } if text == "change approach"))
        .expect("steering turn");
    let assistant = history
        .iter()
        .position(|t| matches!(t.kind, TurnKind::Assistant { .. }))
        .unwrap();
    assert!(steering < assistant);
    assert!(kinds(&drain(&mut events)).contains(&EventKind::SteeringInjected));
    let sent = &h.client.requests()[0].messages;
    assert!(
        sent.iter()
            .any(|m| matches!(m, crate::llm::Message::User { text } if text == "change approach")),
        "steering is sent as a user message"
    );
}

#[tokio::test]
async fn steering_during_tool_rounds_is_injected_between_rounds() {
    let h = harness(
        vec![
            tool_calls(&[("c", "echo", json!({"text": "x"}))]),
            text("ok"),
        ],
        |_| {},
    );
    let mut registry = h.session.tools();
    let session = Arc::downgrade(&h.session);
    registry.register(
        ToolSpec {
            name: "echo".into(),
            description: "steers".into(),
            parameters: json!({"type": "object"}),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |_, _| {
            let session = session.clone();
            async move {
                session.upgrade().unwrap().steer("mid-course correction");
                Ok("done".to_string())
            }
        })),
    );
    for spec in registry.definitions() {
        let tool = registry.get(&spec.name).unwrap().executor.clone();
        h.session.register_tool(spec, tool);
    }
    h.session.submit("go").await.unwrap();
    let history = h.session.history();
    let results = history
        .iter()
        .position(|t| matches!(t.kind, TurnKind::ToolResults { .. }))
        .unwrap();
    assert!(
        matches!(&history[results + 1].kind, TurnKind::Steering { text } if text == "mid-course correction")
    );
}

#[tokio::test]
async fn follow_up_runs_after_the_input_completes() {
    let h = harness(vec![text("first answer"), text("second answer")], |_| {});
    h.session.follow_up("next question");
    h.session.submit("first input").await.unwrap();
    let users: Vec<String> = h
        .session
        .history()
        .iter()
        .filter_map(|t| match &t.kind {
            TurnKind::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(users, vec!["first input", "next question"]);
    assert_eq!(h.client.requests().len(), 2, "two model round trips");
}
