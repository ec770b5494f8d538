//! More than one machine: two `sandcrab serve` processes ("host-a" and
//! "host-b", each with its own configuration) sharing one real PostgreSQL.
//! A session driven on one is followed live from the other, cannot be
//! taken while its host lives, is taken over at once after `kill -9` and
//! within the lease after its host freezes — and a host that lost it can
//! no longer ask the model or write to it.

use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;
use serde_json::Value;

use crate::bridge_test::{Bridge, Events, bridge_named};
use crate::llm_transcripts::{Answer, stream};
use crate::mock_llm::MockLlm;
use crate::pg_cluster;
use crate::support::{Scene, sandcrab_cmd};

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

/// The configuration of host `name` on the database at `url`.
fn host_config(scene: &Scene, name: &str, url: &str) -> String {
    let path = scene.root.path().join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[store]\nurl = \"{url}\"\npassword_env = \"{}\"\nhost = \"{name}\"\n",
            pg_cluster::PASSWORD_ENV
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// `sandcrab serve` as host `name`, on the scene's workspace.
fn host(scene: &Scene, server: &MockLlm, name: &str, url: &str) -> Bridge {
    let config = host_config(scene, name, url);
    bridge_named(
        scene,
        Some(server),
        true,
        name,
        &["--config", &config],
        &[(pg_cluster::PASSWORD_ENV, pg_cluster::PASSWORD)],
    )
}

/// Wait until `events` holds `n` events named `name`.
async fn wait_count(events: &Events, name: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while events.names().iter().filter(|e| *e == name).count() < n {
        assert!(
            Instant::now() < deadline,
            "not {n} {name}: {:?}",
            events.names()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn user_texts(history: &Value) -> Vec<String> {
    history
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "user")
        .map(|t| t["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Post start to `b` until it is taken (at most `limit`); how long it took.
async fn start_when_free(b: &Bridge, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (code, body) = b.post("/agent/start").await;
        if code == 200 {
            return started.elapsed();
        }
        assert_eq!(code, 409, "{body}");
        assert_eq!(body["error"]["code"], "session_leased", "{body}");
        assert!(
            started.elapsed() < limit,
            "not taken over within {limit:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_followed_live_from_another_host_and_taken_over_after_kill_9() {
    let scene = Scene::new();
    let url = pg_cluster::database("fleet");
    let server = MockLlm::strict(KIND).await;
    let mut a = host(&scene, &server, "host-a", &url);
    let b = host(&scene, &server, "host-b", &url);

    // A client of host B follows the workspace while host A drives it.
    let follower = b.follow(None).await;
    let watcher = a.follow(None).await;
    assert_eq!(a.post("/agent/start").await.0, 200);
    let pieces: Vec<&'static str> = (0..150)
        .map(|i| &*Box::leak(format!("w{i} ").into_boxed_str()))
        .collect();
    server.push(stream(KIND, &Answer::Text(pieces.clone())).delayed(Duration::from_millis(4)));
    assert_eq!(a.send("first message").await.0, 202);
    wait_count(&watcher, "agent:session-completed", 1).await;
    wait_count(&follower, "agent:session-completed", 1).await;

    // Every event host A published reaches host B's client, same ids,
    // same order; the delay is what one host adds to another's.
    let local = watcher.list.lock().unwrap().clone();
    let remote = follower.list.lock().unwrap().clone();
    let from_a: Vec<(u64, String)> = local.iter().map(|e| (e.0, e.1.clone())).collect();
    let seen_on_b: Vec<(u64, String)> = remote
        .iter()
        .filter(|e| from_a.iter().any(|a| a.0 == e.0))
        .map(|e| (e.0, e.1.clone()))
        .collect();
    assert_eq!(seen_on_b, from_a, "host B's client saw another sequence");
    let ids: Vec<u64> = remote.iter().map(|e| e.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order: {ids:?}");
    let chunks = from_a
        .iter()
        .filter(|e| e.1 == "agent:message-chunk")
        .count();
    assert!(chunks >= 100, "{chunks} chunks");
    let (a_times, b_times) = (
        watcher.arrived.lock().unwrap().clone(),
        follower.arrived.lock().unwrap().clone(),
    );
    let mut delays: Vec<Duration> = local
        .iter()
        .zip(&a_times)
        .filter_map(|(e, at)| {
            let i = remote.iter().position(|r| r.0 == e.0)?;
            Some(b_times[i].saturating_duration_since(*at))
        })
        .collect();
    delays.sort();
    eprintln!(
        "cross-host event delay over {} events: p50 {:?}, p99 {:?}",
        delays.len(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99)
    );

    server.push(stream(KIND, &Answer::Text(vec!["second answer"])));
    assert_eq!(a.send("second message").await.0, 202);
    wait_count(&watcher, "agent:session-completed", 2).await;

    // Host A holds the conversation: host B may not drive it.
    let (code, body) = b.post("/agent/start").await;
    assert_eq!(code, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("host-a"), "{message}");

    // Host A dies; host B takes the conversation over, whole.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let took = start_when_free(&b, Duration::from_secs(30)).await;
    eprintln!("lease taken over {took:?} after kill -9 (same machine: the holder is known dead)");
    let (_, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(
        user_texts(&history),
        ["first message", "second message"],
        "{history:#}"
    );
    server.push(stream(KIND, &Answer::Text(vec!["third answer"])));
    let on_b = b.follow(None).await;
    assert_eq!(b.send("third message").await.0, 202);
    on_b.wait_for("agent:session-completed").await;
    let (_, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(user_texts(&history).len(), 3);
    // Host B's request carried the whole conversation.
    let last = server.requests().last().unwrap().body.to_string();
    assert!(last.contains("first message") && last.contains("second answer"));

    // Any host lists it, driven by host B.
    let config = host_config(&scene, "host-c", &url);
    let out = sandcrab_cmd(&scene)
        .env(pg_cluster::PASSWORD_ENV, pg_cluster::PASSWORD)
        .args(["sessions", "list", "--config", &config])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listed.contains("driven by host-b"), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_loses_its_session_within_the_lease_and_cannot_drive_it_after() {
    let scene = Scene::new();
    let url = pg_cluster::database("frozen");
    let server = MockLlm::strict(KIND).await;
    let mut a = host(&scene, &server, "host-a", &url);
    let b = host(&scene, &server, "host-b", &url);
    let watcher = a.follow(None).await;
    assert_eq!(a.post("/agent/start").await.0, 200);
    server.push(stream(KIND, &Answer::Text(vec!["noted"])));
    assert_eq!(a.send("before the freeze").await.0, 202);
    wait_count(&watcher, "agent:session-completed", 1).await;

    // Host A stops answering (a lost machine, a stuck process): its lease
    // runs out (15 s by default) and host B takes the session.
    let pid = a.child.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let took = start_when_free(&b, Duration::from_secs(30)).await;
    eprintln!("lease taken over {took:?} after the holder froze");
    assert!(
        took >= Duration::from_secs(5),
        "taken from a live holder: {took:?}"
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // Its kept connection timed out while it was frozen: a new one.
    a.reconnect();

    // Host A wakes up and is asked to go on: it may not ask the model nor
    // write to the session any more.
    let asked_before = server.requests().len();
    assert_eq!(a.send("after the freeze").await.0, 202);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = watcher.names();
        if names.iter().any(|n| n == "agent:error") || names.len() > 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no error on host A: {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let error = watcher.wait_for("agent:error").await;
    assert!(error.2.to_string().contains("host-b"), "{}", error.2);
    assert_eq!(
        server.requests().len(),
        asked_before,
        "host A asked the model"
    );
    let (_, history) = b.call("GET", "/agent/history", None).await;
    assert_eq!(user_texts(&history), ["before the freeze"], "{history:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_hosts_starting_one_conversation_at_once_exactly_one_wins() {
    let scene = Scene::new();
    let url = pg_cluster::database("race");
    let server = MockLlm::strict(KIND).await;
    let a = host(&scene, &server, "host-a", &url);
    let b = host(&scene, &server, "host-b", &url);
    let watcher = a.follow(None).await;
    assert_eq!(a.post("/agent/start").await.0, 200);
    server.push(stream(KIND, &Answer::Text(vec!["ok"])));
    assert_eq!(a.send("hello").await.0, 202);
    wait_count(&watcher, "agent:session-completed", 1).await;
    // Stopped: the conversation is free again.
    assert_eq!(a.post("/agent/stop").await.0, 200);
    assert_eq!(b.post("/agent/start").await.0, 200);
    assert_eq!(b.post("/agent/stop").await.0, 200);
    for round in 0..3 {
        let (ra, rb) = tokio::join!(a.post("/agent/start"), b.post("/agent/start"));
        let codes = [ra.0, rb.0];
        assert!(
            codes.contains(&200) && codes.contains(&409),
            "round {round}: {ra:?} {rb:?}"
        );
        let winner = if ra.0 == 200 { &a } else { &b };
        assert_eq!(winner.post("/agent/stop").await.0, 200);
    }
}

/// The loopback provider of the load test: OpenAI-compatible chat
/// completions that ask for `read_file` when the user has just spoken and
/// answer in text once the tool's result is in — whatever session asks,
/// in whatever order.
async fn tool_calling_provider() -> String {
    use crate::llm_transcripts::{chat, tool};
    async fn answer(axum::Json(body): axum::Json<Value>) -> axum::response::Response {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let after_tool = messages.last().is_some_and(|m| m["role"] == "tool");
        // A different window each turn: the same call turn after turn is
        // a loop the agent would (rightly) steer away from.
        let turn = messages.iter().filter(|m| m["role"] == "user").count();
        let text = if after_tool {
            chat(&Answer::Text(vec!["read it; ", "done"]))
        } else {
            chat(&Answer::Tools(vec![tool(
                "c1",
                "read_file",
                serde_json::json!({"path": "notes.txt", "limit": 1000 + turn}),
            )]))
        };
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from(text))
            .unwrap()
    }
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

struct NoSummaries;

#[async_trait::async_trait]
impl sandcrab::compaction::Summarizer for NoSummaries {
    async fn summarize(
        &self,
        _: &str,
        m: &[sandcrab::compaction::Entry],
    ) -> Result<String, String> {
        Ok(format!("{} messages", m.len()))
    }
}

/// Two hosts (two stores on one database, as two processes would hold
/// them) × 50 concurrent sessions × 20 turns, each turn a real `read_file`
/// call through the plugin sandbox and two model requests to a loopback
/// provider: every turn of every session is stored once, in order, and
/// every session's chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_of_fifty_sessions_lose_duplicate_and_reorder_no_turn() {
    use sandcrab::agent::{
        Profile, Session, SessionConfig, SessionInfo, SessionMemory, SessionParts,
    };
    use sandcrab::llm::{HttpClient, LlmClient, ProviderConfig};
    use sandcrab::store::{StoreOptions, chain};
    use std::sync::Arc;
    const SESSIONS: usize = 50;
    const TURNS: usize = 20;

    let scene = Scene::new();
    std::fs::write(scene.workspace().join("notes.txt"), "the notes\n").unwrap();
    let url = pg_cluster::database("load");
    let mut config = ProviderConfig::new(KIND);
    config.base_url = tool_calling_provider().await;
    config.api_key = Some("k".into());
    let client: Arc<dyn LlmClient> = Arc::new(HttpClient::new(config).unwrap());
    let mut plugins = scene.host(sandcrab::plugin::Policy::default());
    plugins
        .load_all(&sandcrab::plugin::discovery::bundled())
        .await;
    let registry = sandcrab::tools::ToolRegistry::from_plugins(plugins.plugins());
    let profile = Arc::new(Profile::load(&plugins, "openai-compatible").await.unwrap());

    let mut tasks = Vec::new();
    let mut stores = Vec::new();
    for h in ["host-a", "host-b"] {
        let options = StoreOptions {
            host: Some(h.into()),
            ..StoreOptions::default()
        };
        let store: Arc<dyn sandcrab::store::Store> =
            Arc::new(crate::store_backends_test::pg_store(&url, &options).unwrap());
        stores.push(store.clone());
        for s in 0..SESSIONS {
            let compactor = Arc::new(sandcrab::compaction::Compactor::new(
                Arc::new(NoSummaries),
                store.clone(),
                sandcrab::compaction::SummarizationConfig::default(),
            ));
            let info = SessionInfo {
                workspace: scene.workspace().display().to_string(),
                provider: KIND.id().into(),
                profile: "openai-compatible".into(),
                model: "m".into(),
            };
            let memory = SessionMemory::create(store.clone(), compactor, &info).unwrap();
            let session = Session::new(SessionParts {
                memory: Some(memory),
                ..SessionParts::new(
                    client.clone(),
                    profile.clone(),
                    profile.tools(&registry).into(),
                    SessionConfig::new("m"),
                    scene.workspace(),
                )
            });
            tasks.push(tokio::spawn(async move {
                let mut times = Vec::new();
                for t in 0..TURNS {
                    let started = Instant::now();
                    session
                        .submit(&format!("{h} session {s} turn {t}"))
                        .await
                        .unwrap();
                    times.push(started.elapsed());
                }
                (session.id().to_string(), format!("{h} session {s}"), times)
            }));
        }
    }
    let started = Instant::now();
    let cpu_before = cpu_time();
    let mut times = Vec::new();
    let mut sessions = Vec::new();
    for task in tasks {
        let (id, name, t) = task.await.unwrap();
        times.extend(t);
        sessions.push((id, name));
    }
    let wall = started.elapsed();
    let cpu = cpu_time() - cpu_before;
    times.sort();
    eprintln!(
        "{} turns with a tool call each in {wall:?} ({:.0} turns/s, host CPU {:?} per turn); per turn with {} sessions at once p50 {:?}, p99 {:?} (the provider answers at once: host overhead, two model requests and a sandboxed read_file included)",
        times.len(),
        times.len() as f64 / wall.as_secs_f64(),
        cpu / times.len() as u32,
        2 * SESSIONS,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    let store = &stores[0];
    assert_eq!(store.sessions(None).unwrap().len(), 2 * SESSIONS);
    for (id, name) in &sessions {
        let turns = store.turns(id).unwrap();
        let inputs: Vec<String> = turns
            .iter()
            .filter(|t| t.kind == "user")
            .map(|t| {
                serde_json::from_str::<Value>(&t.body).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let expected: Vec<String> = (0..TURNS).map(|t| format!("{name} turn {t}")).collect();
        assert_eq!(inputs, expected, "session {id}");
        let kinds: Vec<&str> = turns.iter().map(|t| t.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["user", "assistant", "tool_results", "assistant"].repeat(TURNS),
            "session {id}"
        );
        let mut unique: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), turns.len(), "a turn stored twice in {id}");
        let links = store.chain(id).unwrap();
        chain::verify(
            &links,
            &turns,
            &store.records(id).unwrap(),
            Some(&expected[0]),
        )
        .unwrap_or_else(|e| panic!("session {id}: {e}"));
    }
}

/// CPU time this process has used (user and system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
