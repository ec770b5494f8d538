//! What the bridge refuses, what a reconnecting client gets, the OpenAPI
//! document, the `sandcrab agent` client, shutdown, load, and the pinned
//! JSON of every route.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_refuses_what_a_web_page_or_a_stranger_would_send() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let b = bridge(&scene, Some(&server), true);
    let status_url = format!("{}/agent/status", b.url);
    let http = &b.http;
    let code = |r: reqwest::Response| r.status().as_u16();

    assert_eq!(code(http.get(&status_url).send().await.unwrap()), 401);
    assert_eq!(
        code(
            http.get(&status_url)
                .bearer_auth("wrong")
                .send()
                .await
                .unwrap()
        ),
        401
    );
    let events_url = format!("{}/events", b.url);
    assert_eq!(code(http.get(&events_url).send().await.unwrap()), 401);
    // EventSource cannot set headers: the token in the query works.
    let r = http
        .get(format!("{events_url}?token={}", b.token))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    drop(r);
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1.
    let r = http
        .get(&status_url)
        .bearer_auth(&b.token)
        .header("Host", "evil.example:9990")
        .send()
        .await
        .unwrap();
    assert_eq!(code(r), 403);
    // A cross-origin request from a page the user opened.
    let r = http
        .post(format!("{}/agent/start", b.url))
        .bearer_auth(&b.token)
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(code(r), 403);
    assert_eq!(b.status().await, stopped(), "the refused start did not run");
    // Oversize bodies.
    let huge = "x".repeat(sandcrab::server::MAX_BODY + 1);
    let r = http
        .post(format!("{}/agent/messages", b.url))
        .bearer_auth(&b.token)
        .json(&json!({"message": huge}))
        .send()
        .await
        .unwrap();
    assert_eq!(code(r), 413);
    // A malformed body names what is wrong.
    let r = http
        .post(format!("{}/agent/messages", b.url))
        .bearer_auth(&b.token)
        .header("content-type", "application/json")
        .body("{\"msg\": 1}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message"),
        "{body}"
    );

    // Nothing anywhere carries the key.
    server.push(stream(KIND, &Answer::Text(vec!["ok"])));
    assert_eq!(b.post("/agent/start").await.0, 200);
    let events = b.follow(Some(0)).await;
    assert_eq!(b.send("hi").await.0, 202);
    events.wait_for("agent:session-completed").await;
    let (_, history) = b.call("GET", "/agent/history", None).await;
    let (_, status) = b.call("GET", "/agent/status", None).await;
    let (_, api) = b.call("GET", "/openapi.json", None).await;
    let everything = format!(
        "{history}{status}{api}{:?}{}",
        events.list.lock().unwrap(),
        b.stderr.lock().unwrap()
    );
    assert!(!everything.contains(KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reconnects_gets_exactly_what_it_missed() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(slow(120, Duration::from_millis(5)));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let witness = b.follow(None).await;
    let dropped = b.follow(None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(b.send("stream").await.0, 202);
    // Drop mid-turn, after some chunks.
    let deadline = Instant::now() + Duration::from_secs(30);
    while dropped
        .names()
        .iter()
        .filter(|n| *n == "agent:message-chunk")
        .count()
        < 10
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    dropped.stop();
    let seen = dropped.ids();
    let last = *seen.last().unwrap();
    let resumed = b.follow(Some(last)).await;
    resumed.wait_for("agent:session-completed").await;
    witness.wait_for("agent:session-completed").await;
    let mut combined = seen.clone();
    combined.extend(resumed.ids());
    let all: Vec<u64> = witness.ids();
    // Compare from the first event both clients were connected for.
    let from = all.iter().position(|i| *i == combined[0]).unwrap();
    let upto = all.iter().position(|i| Some(i) == combined.last()).unwrap();
    assert_eq!(
        combined,
        all[from..=upto],
        "missed, duplicated or out of order"
    );
    // Several clients: the witness and the resumed one agree.
    assert!(all.windows(2).all(|w| w[1] == w[0] + 1), "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_in_the_openapi_document_exists() {
    let scene = Scene::new();
    let b = bridge(&scene, None, true);
    let (code, doc) = b.call("GET", "/openapi.json", None).await;
    assert_eq!(code, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 10);
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            if path == "/events" {
                continue;
            }
            let body = match path.as_str() {
                "/workspace/initialize" => Some(json!({"path": scene.workspace()})),
                "/agent/messages" => Some(json!({"message": "x"})),
                "/agent/permissions/{id}" => Some(json!({"decision": "deny"})),
                _ => None,
            };
            let (code, answer) = b.call(&method.to_uppercase(), path, body).await;
            // A request id nobody waits on is its own 404, not a missing route.
            let unknown_id = answer["error"]["code"] == "unknown_permission";
            assert!(
                (code != 404 || unknown_id) && code != 405,
                "{method} {path}: {code} {answer}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_command_drives_the_bridge_from_a_shell() {
    let scene = Scene::new();
    let b = bridge(&scene, None, false);
    let token_file = scene.root.path().join("serve.token");
    let agent = |args: &[&str]| {
        sandcrab_cmd(&scene)
            .arg("agent")
            .args(args)
            .args(["--url", &b.url, "--token-file"])
            .arg(&token_file)
            .output()
            .unwrap()
    };
    let out = agent(&["start"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Agent manager not initialized") && err.contains("409"),
        "{err}"
    );
    let ws = scene.workspace();
    assert!(agent(&["init", ws.to_str().unwrap()]).status.success());
    assert!(agent(&["start"]).status.success());
    let out = agent(&["status"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status, running(false));
    assert!(agent(&["stop"]).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_bridge_and_releases_the_port() {
    let scene = Scene::new();
    let mut b = bridge(&scene, None, true);
    let events = b.follow(None).await;
    assert_eq!(b.post("/agent/start").await.0, 200);
    events.wait_for("agent:status-changed").await;
    unsafe {
        libc::kill(b.child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = b.child.try_wait().unwrap() {
            assert!(status.success(), "{}", b.stderr.lock().unwrap());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running: {}",
            b.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr = b.url.trim_start_matches("http://").to_string();
    std::net::TcpListener::bind(addr).expect("the port was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_clients_each_get_every_event_of_a_10000_chunk_turn_in_order() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let chunks: Vec<&'static str> = std::iter::repeat_n("y", 10_000).collect();
    server.push(stream(KIND, &Answer::Text(chunks)));
    let b = bridge(&scene, Some(&server), true);
    assert_eq!(b.post("/agent/start").await.0, 200);
    let mut clients = Vec::new();
    for _ in 0..50 {
        clients.push(b.follow(None).await);
    }
    assert_eq!(b.send("many chunks").await.0, 202);
    for (n, client) in clients.iter().enumerate() {
        client.wait_for("agent:session-completed").await;
        let list = client.list.lock().unwrap();
        let chunks = list.iter().filter(|e| e.1 == "agent:message-chunk").count();
        assert_eq!(chunks, 10_000, "client {n}");
        assert!(
            list.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "client {n}: ids not contiguous"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reconnecting_after_a_bridge_restart_gets_what_it_missed() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["one ", "two ", "three"])));
    let first = bridge(&scene, Some(&server), true);
    assert_eq!(first.post("/agent/start").await.0, 200);
    let events = first.follow(Some(0)).await;
    assert_eq!(first.send("count").await.0, 202);
    events.wait_for("agent:session-completed").await;
    let seen = events.list.lock().unwrap().clone();
    let last = seen.last().unwrap().0;
    // The client saw up to the first chunk, then the bridge went away.
    let cut = seen
        .iter()
        .position(|e| e.1 == "agent:message-chunk")
        .unwrap();
    let resume_after = seen[cut].0;
    events.stop();
    drop(first);

    let second = bridge(&scene, Some(&server), true);
    let resumed = second.follow(Some(resume_after)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while resumed.ids().last() != Some(&last) {
        assert!(
            Instant::now() < deadline,
            "{:?} vs {seen:?}",
            resumed.names()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let expected: Vec<u64> = seen
        .iter()
        .map(|e| e.0)
        .filter(|i| *i > resume_after)
        .collect();
    assert_eq!(resumed.ids(), expected);
    // New events go on from there.
    assert_eq!(second.post("/agent/start").await.0, 200);
    let (id, _, _) = resumed.wait_for("agent:status-changed").await;
    let newest = *resumed.ids().last().unwrap();
    assert!(
        id > resume_after && newest > last,
        "ids restarted: {:?}",
        resumed.ids()
    );
}

/// The keys of every object in `value`, recursively, in a stable text form
/// (values masked): the shape a client depends on.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!(null),
    }
}

/// The JSON every route answers, pinned: a change here breaks clients, so
/// it must be deliberate (and versioned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_of_every_route_is_pinned() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["Hello back."])));
    let b = bridge(&scene, Some(&server), false);
    let error = json!({"error": {"code": "string", "message": "string"}});
    let ok = json!({"ok": true});
    let (code, body) = b.post("/agent/start").await;
    assert_eq!((code, shape(&body)), (409, error.clone()), "{body}");
    let ws = scene.workspace().canonicalize().unwrap();
    let (code, body) = b
        .call("POST", "/workspace/initialize", Some(json!({"path": ws})))
        .await;
    assert_eq!((code, body), (200, json!({"ok": true, "workspace": ws})));
    assert_eq!(b.post("/agent/start").await, (200, ok.clone()));
    assert_eq!(b.status().await, running(false));
    let events = b.follow(None).await;
    assert_eq!(b.send("hello").await, (202, ok.clone()));
    events.wait_for("agent:session-completed").await;
    let (code, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        shape(&history),
        json!([
            {"id": "string", "timestamp": "string", "kind": "string", "text": "string"},
            {"id": "string", "timestamp": "string", "kind": "string", "text": "string",
             "tool_calls": [], "reasoning": null,
             "usage": {"input_tokens": "number", "output_tokens": "number",
                       "cached_tokens": "number", "reasoning_tokens": "number",
                       "cache_write_tokens": "number"}}
        ]),
        "{history}"
    );
    assert_eq!(b.post("/agent/interrupt").await, (200, ok.clone()));
    assert_eq!(b.post("/agent/clear").await, (200, ok.clone()));
    assert_eq!(b.post("/agent/stop").await, (200, ok.clone()));
    assert_eq!(b.status().await, stopped());
    let (code, body) = b.send("late").await;
    assert_eq!((code, shape(&body)), (409, error.clone()));
    let (code, body) = b
        .call(
            "POST",
            "/agent/messages",
            Some(json!({"text": "wrong key"})),
        )
        .await;
    assert_eq!((code, shape(&body)), (422, error));
}
