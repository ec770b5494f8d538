//! Phase 8: error handling and context tracking.

use super::*;
use crate::agent::{SessionError, SessionState};
use crate::llm::{ErrorKind, LlmError};

fn failing(kind: ErrorKind) -> Harness {
    harness(
        vec![Step::Fail(LlmError::new(
            kind,
            "test",
            format!("{kind:?} happened"),
        ))],
        |_| {},
    )
}

#[tokio::test]
async fn authentication_errors_close_the_session() {
    let h = failing(ErrorKind::Authentication);
    let mut events = h.session.events();
    let result = h.session.submit("hi").await;
    assert!(matches!(result, Err(SessionError::Llm(e)) if e.kind == ErrorKind::Authentication));
    let all = drain(&mut events);
    let error = all
        .iter()
        .find(|e| e.kind() == EventKind::Error)
        .expect("ERROR event");
    assert_eq!(error.data_json()["kind"], "Authentication");
    assert_eq!(h.session.state(), SessionState::Closed);
    assert_eq!(all.last().unwrap().kind(), EventKind::SessionEnd);
}

#[tokio::test]
async fn context_length_errors_warn_at_full_usage_then_close() {
    let h = failing(ErrorKind::ContextLength);
    let mut events = h.session.events();
    let _ = h.session.submit("hi").await;
    let all = drain(&mut events);
    let k = kinds(&all);
    let warning = all
        .iter()
        .find(|e| e.kind() == EventKind::ContextWarning)
        .expect("CONTEXT_WARNING");
    assert_eq!(warning.data_json()["usage_percent"], 1.0);
    assert!(
        k.iter().position(|x| *x == EventKind::ContextWarning)
            < k.iter().position(|x| *x == EventKind::Error)
    );
    assert_eq!(h.session.state(), SessionState::Closed);
}

#[tokio::test]
async fn rate_limits_after_retries_close_the_session() {
    let h = failing(ErrorKind::RateLimit);
    let mut events = h.session.events();
    let _ = h.session.submit("hi").await;
    assert!(kinds(&drain(&mut events)).contains(&EventKind::Error));
    assert_eq!(h.session.state(), SessionState::Closed);
}

#[tokio::test]
async fn a_nearly_full_context_warns_above_80_percent() {
    let client = ScriptedClient::new(vec![crate::llm::scripted::text("ok")]);
    let h = harness_with(client, |_| {}, 100_000);
    let mut events = h.session.events();
    // ~85,000 tokens: 340,000 characters.
    h.session.submit(&"x".repeat(340_000)).await.unwrap();
    let all = drain(&mut events);
    let warning = all
        .iter()
        .find(|e| e.kind() == EventKind::ContextWarning)
        .expect("CONTEXT_WARNING");
    let usage = warning.data_json()["usage_percent"].as_f64().unwrap();
    assert!(usage > 0.8 && usage < 0.9, "{usage}");

    let quiet = harness_with(
        ScriptedClient::new(vec![crate::llm::scripted::text("ok")]),
        |_| {},
        100_000,
    );
    let mut events = quiet.session.events();
    quiet.session.submit(&"x".repeat(200_000)).await.unwrap();
    assert!(
        !kinds(&drain(&mut events)).contains(&EventKind::ContextWarning),
        "50% does not warn"
    );
}
