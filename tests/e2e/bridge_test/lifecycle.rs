//! The agent-lifecycle seed, one test per scenario: start, status, stop,
//! interrupt, clear and history through the bridge.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_01_start_without_a_workspace_is_refused() {
    let scene = Scene::new();
    let b = bridge(&scene, None, false);
    let (code, body) = b.post("/agent/start").await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_initialized");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Agent manager not initialized for current workspace")
    );
    assert_eq!(b.status().await, stopped());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_02_start_without_a_provider_key_uses_the_stub() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    let (code, body) = b.post("/agent/start").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(b.status().await, running(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_03_a_second_start_is_already_running() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let (code, body) = b.post("/agent/start").await;
    assert_eq!(code, 409);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already running")
    );
    assert_eq!(b.status().await, running(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_04_status_is_stopped_before_start() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.status().await, stopped());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_05_status_is_running_after_start() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.status().await, running(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_06_a_message_to_a_stopped_agent_is_refused_and_not_recorded() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    let (code, body) = b.send("Hello").await;
    assert_eq!(code, 409);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not running")
    );
    assert_eq!(b.status().await, stopped());
    let (_, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(history, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_07_the_stub_provider_error_arrives_as_an_event() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(None).await;
    let started = Instant::now();
    let (code, _) = b.send("What is in my workspace?").await;
    assert_eq!(code, 202);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "send must return at once"
    );
    let (_, _, error) = events.wait_for("agent:error").await;
    assert!(
        error["error"].as_str().unwrap().contains("not configured"),
        "{error}"
    );
    // The harness stays usable.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.status().await != running(false) {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.send("again").await.0, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_08_stop_while_idle_then_start_again() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.status().await, running(false));
    assert_eq!(b.post("/agent/stop").await.0, 200);
    assert_eq!(b.status().await, stopped());
    assert_eq!(b.post("/agent/start").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_09_stop_when_stopped_is_a_no_op() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.post("/agent/stop").await.0, 200);
    assert_eq!(b.status().await, stopped());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_10_interrupt_while_idle_is_a_no_op() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["Hi."])));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.post("/agent/interrupt").await.0, 200);
    assert_eq!(b.status().await, running(false));
    let events = b.follow(None).await;
    assert_eq!(b.send("hello").await.0, 202);
    events.wait_for("agent:session-completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_11_interrupt_while_streaming_ends_the_session_not_the_harness() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(slow(400, Duration::from_millis(10)));
    server.push(stream(KIND, &Answer::Text(vec!["Next answer."])));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(None).await;
    assert_eq!(b.send("write a long story").await.0, 202);
    events.wait_for("agent:message-chunk").await;
    assert_eq!(b.post("/agent/interrupt").await.0, 200);
    events.wait_for("agent:session-interrupted").await;
    assert!(
        !events
            .names()
            .contains(&"agent:session-completed".to_string())
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.status().await != running(false) {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.send("go on").await.0, 202);
    events.wait_for("agent:session-completed").await;
}

/// An interrupt stops the message waiting behind the turn it interrupts:
/// the model never sees it (a message sent later is answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_also_stops_the_message_waiting_for_its_turn() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(slow(400, Duration::from_millis(10)));
    server.fallback(|_path, _body| stream(KIND, &Answer::Text(vec!["Answered."])));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(None).await;
    assert_eq!(b.send("write a long story").await.0, 202);
    events.wait_for("agent:message-chunk").await;
    assert_eq!(b.send("QUEUED-MESSAGE").await.0, 202);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(b.post("/agent/interrupt").await.0, 200);
    events.wait_for("agent:session-interrupted").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.status().await != running(false) {
        assert!(Instant::now() < deadline, "the bridge went on streaming");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let asked = |server: &MockLlm, text: &str| {
        server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains(text))
    };
    assert!(
        !asked(&server, "QUEUED-MESSAGE"),
        "the model was asked the message sent before the interrupt"
    );
    // The control: a message sent after the interrupt is answered.
    assert_eq!(b.send("LATER-MESSAGE").await.0, 202);
    events.wait_for("agent:session-completed").await;
    assert!(asked(&server, "LATER-MESSAGE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_12_start_stop_start_is_reusable() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.status().await, running(false));
    assert_eq!(b.post("/agent/stop").await.0, 200);
    assert_eq!(b.status().await, stopped());
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.status().await, running(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_13_status_reports_streaming_during_a_turn() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(slow(100, Duration::from_millis(10)));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(None).await;
    assert_eq!(b.send("stream slowly").await.0, 202);
    assert_eq!(b.status().await, running(true));
    events.wait_for("agent:session-completed").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.status().await != running(false) {
        assert!(
            Instant::now() < deadline,
            "still streaming after completion"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_14_clear_succeeds_and_starts_a_new_conversation() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["First."])));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(None).await;
    assert_eq!(b.send("remember this").await.0, 202);
    events.wait_for("agent:session-completed").await;
    let (_, before) = b.call("GET", "/agent/history", None).await;
    assert_eq!(before.as_array().unwrap().len(), 2, "{before}");
    let (code, _) = b.post("/agent/clear").await;
    assert_eq!(code, 200);
    assert_eq!(b.status().await, running(false));
    let (_, after) = b.call("GET", "/agent/history", None).await;
    assert_eq!(after, json!([]));
    // The cleared conversation is still a saved session.
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("remember this"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_15_history_is_empty_when_fresh_and_persists_turns() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["Hello back."])));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let (code, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(code, 200);
    assert_eq!(history, json!([]));
    let events = b.follow(None).await;
    assert_eq!(b.send("hello").await.0, 202);
    events.wait_for("agent:session-completed").await;
    let (_, history) = b.call("GET", "/agent/history", None).await;
    let kinds: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["user", "assistant"]);
    assert_eq!(history[1]["text"], "Hello back.");
}
