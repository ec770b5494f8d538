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

fn too_long(message: &str) -> Step {
    Step::Fail(LlmError::new(ErrorKind::ContextLength, "test", message))
}

#[tokio::test]
async fn a_refusal_teaches_the_window_and_the_request_is_asked_again_smaller() {
    let h = harness(vec![crate::llm::scripted::text("noted")], |_| {});
    h.session
        .submit(&"an early detail. ".repeat(400))
        .await
        .unwrap();
    // The provider counts a little more than the estimate, and takes two
    // thirds of it.
    let sent = h.session.estimated_tokens() + 20;
    let limit = sent * 2 / 3;
    h.client.push(too_long(&format!(
        "prompt is too long: {sent} tokens > {limit} maximum"
    )));
    h.client.push(crate::llm::scripted::text("fits now"));
    let mut events = h.session.events();
    h.session.submit("and now?").await.unwrap();
    let all = drain(&mut events);
    let notice = all
        .iter()
        .find(|e| e.kind() == EventKind::Notice)
        .expect("a notice of the learned window");
    assert!(
        notice.data_json()["text"]
            .as_str()
            .unwrap()
            .contains(&format!("{limit} tokens")),
        "{:?}",
        notice.data_json()
    );
    assert!(!kinds(&all).contains(&EventKind::Error));
    assert_eq!(h.session.context_window(), limit);
    assert_eq!(h.session.state(), SessionState::Idle);
    let requests = h.client.requests();
    assert_eq!(requests.len(), 3);
    // Asked again at a size that fits what was learned, the input whole.
    let again = crate::llm::estimate::request_tokens(&requests[2]);
    assert!(again < limit, "{again} of {limit}");
    assert!(format!("{:?}", requests[2].messages.last()).contains("and now?"));
}

/// The seed plan closed the session on a context-length error; issue #51
/// asks the opposite (a conversation never bricks): the warning at full
/// usage and the error stay, the session does not close.
#[tokio::test]
async fn refusals_that_go_on_are_reported_with_full_usage_and_the_session_stays_open() {
    let mut steps: Vec<Step> = (0..5).map(|_| too_long("prompt is too long")).collect();
    steps.push(crate::llm::scripted::text("next turn works"));
    let h = harness(steps, |_| {});
    let mut events = h.session.events();
    let result = h.session.submit("hi").await;
    assert!(matches!(result, Err(SessionError::Llm(e)) if e.kind == ErrorKind::ContextLength));
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
    let error = all.iter().find(|e| e.kind() == EventKind::Error).unwrap();
    assert_eq!(error.data_json()["closes_session"], false);
    // Asked once and again after each of the four refusals it answered.
    assert_eq!(h.client.requests().len(), 5);
    assert_eq!(h.session.state(), SessionState::Idle);
    h.session.submit("again").await.unwrap();
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
    // ~85,000 tokens (at three bytes a token): 255,000 characters.
    h.session.submit(&"x".repeat(252_000)).await.unwrap();
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
    quiet.session.submit(&"x".repeat(150_000)).await.unwrap();
    assert!(
        !kinds(&drain(&mut events)).contains(&EventKind::ContextWarning),
        "50% does not warn"
    );
}
