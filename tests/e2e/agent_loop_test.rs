//! The agent loop under real use (issue: interrupts, provider errors,
//! cut-off answers, thinking models, local servers, jobs, subagents): each
//! test drives the real binary or library against a loopback provider in
//! strict mode, which rejects what the real API rejects.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::{MockLlm, Recorded, Reply};
use crate::support::{Scene, gone_soon, process_running, sandcrab_cmd};

/// `sandcrab SUBCOMMAND --json` against `server` as `kind`.
fn sandcrab(scene: &Scene, kind: ProviderKind, server: &MockLlm, subcommand: &str) -> Command {
    let mut cmd = sandcrab_cmd(scene);
    cmd.env(kind.key_vars()[0], "sk-test-key")
        .args([
            subcommand,
            "--json",
            "--provider",
            kind.id(),
            "--model",
            "test-model",
        ])
        .arg("--base-url")
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace());
    cmd
}

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A running `sandcrab chat --json`, fed line by line.
struct Chat {
    child: Child,
    stdin: std::process::ChildStdin,
}

impl Chat {
    fn start(scene: &Scene, kind: ProviderKind, server: &MockLlm) -> Chat {
        let mut child = sandcrab(scene, kind, server, "chat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        Chat { child, stdin }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    fn interrupt(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
    }

    fn finish(mut self) -> (bool, Vec<Value>, String) {
        self.say("/exit");
        drop(self.stdin);
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.success(),
            events(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The tool result for `call_id` in a request, in each provider's shape.
fn tool_result(kind: ProviderKind, request: &Recorded, call_id: &str) -> Option<String> {
    let b = &request.body;
    let found = match kind {
        ProviderKind::Anthropic => b["messages"]
            .as_array()?
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|c| c["type"] == "tool_result" && c["tool_use_id"] == call_id)
            .map(|c| c["content"].clone()),
        ProviderKind::OpenAi => b["input"]
            .as_array()?
            .iter()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
            .map(|i| i["output"].clone()),
        ProviderKind::OpenAiCompatible => b["messages"]
            .as_array()?
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
            .map(|m| m["content"].clone()),
        ProviderKind::Gemini => b["contents"]
            .as_array()?
            .iter()
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .find(|p| p.get("functionResponse").is_some())
            .map(|p| p["functionResponse"]["response"].clone()),
    };
    found.map(|v| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_1_an_interrupt_mid_tool_keeps_the_history_valid_for_every_provider() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        let server = MockLlm::strict(kind).await;
        let marker = format!("sleep 31.{}{}", std::process::id(), kind.id().len());
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool(
                "c1",
                "shell",
                json!({"command": marker, "timeout_ms": 60000}),
            )]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["still here"])));
        let mut chat = Chat::start(&scene, kind, &server);
        chat.say("run the long command");
        wait_until("the command runs", || process_running(&marker)).await;
        chat.interrupt();
        wait_until("the command is stopped", || !process_running(&marker)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        chat.say("never mind, answer me");
        wait_until("the second request", || server.requests().len() >= 2).await;
        let (ok, events, stderr) = chat.finish();
        assert!(ok, "{kind}: chat ended badly: {stderr}");
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
        let second = &server.requests()[1];
        let result = tool_result(kind, second, "c1").unwrap_or_else(|| {
            panic!(
                "{kind}: no result for the interrupted call: {:#}",
                second.body
            )
        });
        assert!(result.contains("interrupted"), "{kind}: {result}");
        assert!(
            events
                .iter()
                .any(|e| e["kind"] == "ASSISTANT_TEXT_END" && e["data"]["text"] == "still here"),
            "{kind}"
        );
        assert!(gone_soon(&marker));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_2_provider_errors_keep_the_conversation_and_retry_works() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        scene.write_user_config("[llm]\nmax_retries = 0\n");
        let server = MockLlm::strict(kind).await;
        server.push(Reply::json(
            503,
            crate::llm_transcripts::error_body(kind, 503, "overloaded"),
        ));
        server.push(stream(kind, &Answer::Text(vec!["recovered"])));
        server.push(Reply::json(
            400,
            crate::llm_transcripts::error_body(kind, 400, "some field is wrong"),
        ));
        server.push(stream(kind, &Answer::Text(vec!["second"])));
        let mut chat = Chat::start(&scene, kind, &server);
        chat.say("first question");
        wait_until("the failing request", || !server.requests().is_empty()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        chat.say("/retry");
        wait_until("the retry", || server.requests().len() >= 2).await;
        chat.say("another question");
        wait_until("the third request", || server.requests().len() >= 3).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        chat.say("and again");
        wait_until("the fourth request", || server.requests().len() >= 4).await;
        let (ok, events, stderr) = chat.finish();
        assert!(ok, "{kind}: {stderr}");
        let errors: Vec<&Value> = events.iter().filter(|e| e["kind"] == "ERROR").collect();
        assert_eq!(errors.len(), 2, "{kind}");
        assert!(errors.iter().all(|e| e["data"]["closes_session"] == false));
        let last = server.requests()[3].body.to_string();
        for said in [
            "first question",
            "another question",
            "and again",
            "recovered",
        ] {
            assert!(
                last.contains(said),
                "{kind}: the history lost '{said}': {last}"
            );
        }
        assert_eq!(
            last.matches("first question").count(),
            1,
            "{kind}: retry re-sent, not re-added"
        );
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_2_an_authentication_error_still_closes_the_session() {
    let scene = Scene::new();
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::start().await;
    server.push(Reply::json(
        401,
        crate::llm_transcripts::error_body(kind, 401, "invalid x-api-key"),
    ));
    let mut chat = Chat::start(&scene, kind, &server);
    chat.say("hello");
    let (ok, events, _) = chat.finish();
    assert!(!ok, "the chat ends with an error status");
    let error = events.iter().find(|e| e["kind"] == "ERROR").unwrap();
    assert_eq!(error["data"]["closes_session"], true);
    assert_eq!(events.last().unwrap()["kind"], "SESSION_END");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_3_a_tool_call_cut_off_by_the_output_limit_is_never_run() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        let server = MockLlm::strict(kind).await;
        let cut = (
            "c1".to_string(),
            "write_file".to_string(),
            vec!["{\"file_path\": \"big.txt\", \"content\": \"the beginning of".to_string()],
        );
        server.push(stream(kind, &Answer::CutOff(vec![cut])));
        server.push(stream(
            kind,
            &Answer::Text(vec!["I will write it in parts"]),
        ));
        let out = sandcrab(&scene, kind, &server, "run")
            .arg("write a big file")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !scene.workspace().join("big.txt").exists(),
            "{kind}: a cut-off call ran"
        );
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
        let events = events(&out.stdout);
        assert!(
            events.iter().any(|e| e["kind"] == "WARNING"
                && e["data"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("output token limit")),
            "{kind}"
        );
        if kind == ProviderKind::Gemini {
            // Gemini stops before emitting a call it cannot finish: the
            // answer is cut-off text, and the turn ends there.
            assert_eq!(server.requests().len(), 1, "{kind}");
            continue;
        }
        let second = &server.requests()[1];
        let result = tool_result(kind, second, "c1").expect("the cut-off call was answered");
        assert!(result.contains("Not executed"), "{kind}: {result}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_4_reasoning_state_goes_back_verbatim_across_a_tool_round() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        scene.write_user_config("[agent]\nreasoning_effort = \"low\"\n");
        std::fs::write(scene.workspace().join("a.txt"), "hello\n").unwrap();
        let server = MockLlm::strict(kind).await;
        server.push(stream(
            kind,
            &Answer::ThinkingTools(vec![
                tool("c1", "read_file", json!({"file_path": "a.txt"})),
                tool("c2", "glob", json!({"pattern": "*.txt"})),
            ]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["read it"])));
        let out = sandcrab(&scene, kind, &server, "run")
            .arg("read a.txt")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
        assert_eq!(server.requests().len(), 2, "{kind}");
        if kind == ProviderKind::OpenAi {
            assert_eq!(
                server.requests()[0].body["include"],
                json!(["reasoning.encrypted_content"])
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_6_chat_completions_calls_without_ids_get_unique_ids() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    let no_ids = |args: &str| {
        let chunk = |delta: Value, finish: Value| json!({"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
        let body = crate::mock_llm::sse(&[
            (
                "",
                chunk(
                    json!({"tool_calls":[{"index":0,"type":"function","function":{"name":"glob","arguments":args}}]}),
                    Value::Null,
                ),
            ),
            ("", chunk(json!({}), json!("tool_calls"))),
        ]);
        Reply::sse(format!("{body}data: [DONE]\n\n"))
    };
    server.push(no_ids("{\"pattern\": \"*.md\"}"));
    server.push(no_ids("{\"pattern\": \"*.rs\"}"));
    server.push(stream(kind, &Answer::Text(vec!["done"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .arg("look around")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.rejections(), Vec::<String>::new());
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_7_local_servers_get_their_own_profile_model_and_window() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.describe(
        "/v1/models",
        json!({"data": [{"id": "qwen-local", "object": "model"}]}),
    );
    server.describe(
        "/props",
        json!({"default_generation_settings": {"n_ctx": 2048}}),
    );
    server.push(stream(kind, &Answer::Text(vec!["hi"])));
    let out = sandcrab_cmd(&scene)
        .args([
            "run",
            "--json",
            "--provider",
            "openai-compatible",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace())
        .arg(format!("hello {}", "and more ".repeat(900)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let request = &server.requests()[0].body;
    assert_eq!(
        request["model"], "qwen-local",
        "the model the server serves"
    );
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"edit_file") && !tools.contains(&"apply_patch"),
        "{tools:?}"
    );
    let events = events(&out.stdout);
    let warning = events
        .iter()
        .find(|e| e["kind"] == "CONTEXT_WARNING")
        .expect("about 2,000 tokens of prompt in a 2048-token window");
    assert_eq!(warning["data"]["context_window"], 2048);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_8_run_waits_for_background_jobs_at_most_wait_jobs() {
    let scene = Scene::new();
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::strict(kind).await;
    let marker = format!("sleep 32.{}", std::process::id());
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": marker, "run_in_background": true}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["started it"])));
    let started = Instant::now();
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["--wait-jobs", "1"])
        .arg("start the server")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let events = events(&out.stdout);
    assert!(
        events.iter().any(|e| e["kind"] == "WARNING"
            && e["data"]["message"]
                .as_str()
                .unwrap()
                .contains("were cancelled")),
        "{events:?}"
    );
    assert!(gone_soon(&marker), "the job's process was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_12_loader_diagnostics_are_warning_events() {
    let scene = Scene::new();
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::strict(kind).await;
    let plugins = scene.plugins();
    crate::support::install_plugin(&plugins, "test-fixtures/hostile-tool", "hostile", |m| m);
    server.push(stream(kind, &Answer::Text(vec!["ok"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .arg("--plugins")
        .arg(&plugins)
        .arg("hi")
        .output()
        .unwrap();
    assert!(out.status.success());
    let events = events(&out.stdout);
    let warnings: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "WARNING")
        .map(|e| e["data"]["message"].as_str().unwrap())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("not granted: programs: sh")),
        "{warnings:?}"
    );
    // The human renderer shows them too.
    server.push(stream(kind, &Answer::Text(vec!["ok"])));
    let human = sandcrab_cmd(&scene)
        .env("ANTHROPIC_API_KEY", "k")
        .args([
            "run",
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace())
        .arg("--plugins")
        .arg(&plugins)
        .arg("hi")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("warning:") && l.contains("programs: sh")),
        "{stderr}"
    );
}
