//! Phase 1: session lifecycle.

use super::*;
use crate::agent::SessionState;
use crate::llm::scripted::text;

#[tokio::test]
async fn a_new_session_is_idle() {
    let h = harness(vec![], |_| {});
    assert_eq!(h.session.state(), SessionState::Idle);
}

#[tokio::test]
async fn submit_returns_to_idle() {
    let h = harness(vec![text("Hi there")], |_| {});
    h.session.submit("Hello").await.unwrap();
    assert_eq!(h.session.state(), SessionState::Idle);
    assert_eq!(h.session.last_assistant_text().as_deref(), Some("Hi there"));
}

#[tokio::test]
async fn the_first_event_is_session_start_with_the_id() {
    let h = harness(vec![text("Hi")], |_| {});
    let mut events = h.session.events();
    h.session.submit("Hello").await.unwrap();
    let all = drain(&mut events);
    assert_eq!(all[0].kind(), EventKind::SessionStart);
    assert!(!all[0].session_id.is_empty());
    assert_eq!(all[0].data_json()["session_id"], all[0].session_id);
    assert!(
        all.iter()
            .all(|e| e.session_id == h.session.id() && !e.timestamp.is_empty())
    );
    assert_eq!(all.last().unwrap().kind(), EventKind::ProcessingEnd);
}

#[tokio::test]
async fn abort_closes_and_submit_then_fails() {
    let h = harness(vec![text("unused")], |_| {});
    let mut events = h.session.events();
    h.session.abort().await;
    assert_eq!(h.session.state(), SessionState::Closed);
    assert!(matches!(
        h.session.submit("test").await,
        Err(crate::agent::SessionError::Closed)
    ));
    let all = drain(&mut events);
    assert_eq!(all.last().unwrap().kind(), EventKind::SessionEnd);
    assert!(
        events.next().await.is_none(),
        "the event stream ends after SESSION_END"
    );
}

#[tokio::test]
async fn abort_is_idempotent() {
    let h = harness(vec![], |_| {});
    h.session.abort().await;
    h.session.abort().await;
    assert_eq!(h.session.state(), SessionState::Closed);
}

#[tokio::test]
async fn abort_during_processing_cancels_and_nothing_follows_session_end() {
    let client = ScriptedClient::new(vec![
        Step::Delay(std::time::Duration::from_secs(30)),
        text("late"),
    ]);
    let h = harness_with(client, |_| {}, 200_000);
    let mut events = h.session.events();
    let session = h.session.clone();
    let running = tokio::spawn(async move { session.submit("slow").await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(h.session.state(), SessionState::Processing);
    tokio::time::timeout(std::time::Duration::from_secs(5), h.session.abort())
        .await
        .expect("abort returns promptly");
    let _ = running.await;
    let all = drain(&mut events);
    assert_eq!(all.last().unwrap().kind(), EventKind::SessionEnd);
    assert!(!kinds(&all).contains(&EventKind::AssistantTextDelta));
}

#[tokio::test]
async fn interrupt_stops_the_input_but_keeps_the_session() {
    let client = ScriptedClient::new(vec![
        Step::Delay(std::time::Duration::from_secs(30)),
        text("late"),
        text("second"),
    ]);
    let h = harness_with(client, |_| {}, 200_000);
    let session = h.session.clone();
    let running = tokio::spawn(async move { session.submit("slow").await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    h.session.interrupt();
    running.await.unwrap().unwrap();
    assert_eq!(h.session.state(), SessionState::Idle);
    h.session.submit("again").await.unwrap();
    assert_eq!(h.session.last_assistant_text().as_deref(), Some("late"));
}
