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
        // Scripted: nobody at the terminal answers approvals.
        let mut child = sandcrab(scene, kind, server, "chat")
            .args(["--approvals", "never"])
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

async fn wait_until(what: &str, done: impl FnMut() -> bool) {
    crate::support::eventually(what, Duration::from_secs(30), done).await;
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
async fn an_interrupt_mid_tool_keeps_the_history_valid_for_every_provider() {
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
async fn provider_errors_keep_the_conversation_and_retry_works() {
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
async fn an_authentication_error_still_closes_the_session() {
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
async fn a_tool_call_cut_off_by_the_output_limit_is_never_run() {
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
async fn reasoning_state_goes_back_verbatim_across_a_tool_round() {
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
        // Usage, cached input included, is reported for the input (the
        // transcripts report 2 cached tokens per answer).
        let end = events(&out.stdout)
            .into_iter()
            .find(|e| e["kind"] == "PROCESSING_END")
            .unwrap();
        assert_eq!(end["data"]["usage"]["cached_tokens"], 4, "{kind}: {end}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_calls_without_ids_get_unique_ids() {
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
async fn local_servers_get_their_own_profile_model_and_window() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.describe(
        "/v1/models",
        json!({"data": [{"id": "qwen-local", "object": "model"}]}),
    );
    server.describe(
        "/props",
        json!({"default_generation_settings": {"n_ctx": 4096}}),
    );
    server.push(stream(kind, &Answer::Text(vec!["hi"])));
    let out = crate::cli_support::local_server(&scene, &server, "run")
        .arg("--json")
        .arg(format!("hello {}", "and more ".repeat(90)))
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
    let start = events
        .iter()
        .find(|e| e["kind"] == "SESSION_START")
        .unwrap();
    assert_eq!(start["data"]["context_window"], 4096, "{start}");
    assert_eq!(start["data"]["window_source"], "server", "{start}");
    let end = events
        .iter()
        .find(|e| e["kind"] == "PROCESSING_END")
        .unwrap();
    assert_eq!(end["data"]["context_window"], 4096, "{end}");
    let largest = end["data"]["largest_request"].as_u64().unwrap();
    assert!(largest > 500 && largest < 3072, "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_for_background_jobs_at_most_wait_jobs() {
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
async fn loader_diagnostics_are_warning_events() {
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

use std::sync::Arc;

use sandcrab::agent::{Profile, Session, SessionConfig, SessionJobs, SessionParts, Subagents};
use sandcrab::jobs::{BackgroundSettings, JobRegistry, JobStatus};
use sandcrab::llm::{HttpClient, LlmClient, ProviderConfig, RetryPolicy};
use sandcrab::plugin::{Policy, ProfileInfo};
use sandcrab::tools::{ToolCallRequest, ToolContext, ToolRegistry, TruncationPolicy, dispatch};

fn test_profile(tools: &[&str]) -> Arc<Profile> {
    Arc::new(Profile {
        info: ProfileInfo {
            id: "openai-compatible".into(),
            default_model: "m".into(),
            context_window: 100_000,
            parallel_tool_calls: false,
            tool_names: tools.iter().map(|t| t.to_string()).collect(),
            project_doc_files: vec![],
            max_output_tokens: 0,
        },
        base_instructions: "You are a test agent.".into(),
    })
}

/// A top-level session with jobs and subagents over `client` and `tools`.
fn session_with(
    scene: &Scene,
    client: Arc<dyn LlmClient>,
    tools: ToolRegistry,
    jobs: &Arc<JobRegistry>,
) -> (Arc<Session>, Arc<Subagents>) {
    let children = Subagents::new();
    let session = Session::new(SessionParts {
        jobs: Some(SessionJobs {
            registry: jobs.clone(),
            settings: BackgroundSettings::default(),
        }),
        children: Some(children.clone()),
        ..SessionParts::new(
            client,
            test_profile(&[]),
            tools.into(),
            SessionConfig::new("m"),
            scene.workspace(),
        )
    });
    (session, children)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_subagent_is_an_llm_calling_job_whose_retries_stay_internal() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    let mut config = ProviderConfig::new(kind);
    config.base_url = server.base_url();
    config.retry = RetryPolicy {
        base_delay: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    };
    let client: Arc<dyn LlmClient> = Arc::new(HttpClient::new(config).unwrap());
    // The parent spawns a background subagent, then says it waits.
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "p1",
            "spawn_agent",
            json!({"task": "CHILD-TASK: say hi", "run_in_background": true}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["spawned it"])));
    server.push(stream(kind, &Answer::Text(vec!["the child said hi"])));
    // The child's provider is overloaded once: a retryable 503.
    server.push_for(
        "CHILD-TASK",
        Reply::json(
            503,
            crate::llm_transcripts::error_body(kind, 503, "overloaded"),
        ),
    );
    server.push_for(
        "CHILD-TASK",
        stream(kind, &Answer::Text(vec!["hi from the child"])),
    );
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let (session, _) = session_with(&scene, client, ToolRegistry::new(), &jobs);
    session.submit("delegate the greeting").await.unwrap();
    assert!(session.settle(Duration::from_secs(30)).await.unwrap());
    let all = jobs.list(session.id(), Some(&JobStatus::ALL[..]));
    assert_eq!(all.len(), 1);
    let job = &all[0];
    assert_eq!(job.status, JobStatus::Completed, "{job:?}");
    assert_eq!(job.internal_errors.len(), 1, "{:?}", job.internal_errors);
    assert!(job.internal_errors[0].contains("503"));
    let history = session.history();
    let injected: Vec<_> = history
        .iter()
        .filter_map(|t| t.text())
        .filter(|t| t.contains(&format!("[job {}", job.job_id)))
        .collect();
    assert_eq!(injected.len(), 1, "exactly one message for the job");
    // The retried 503 stays internal. (Not a bare "503": the job and agent
    // ids are random UUIDs, which may contain it.)
    assert!(
        injected[0].contains("hi from the child")
            && !injected[0].contains(&job.internal_errors[0])
            && !injected[0].contains("HTTP 503")
            && !injected[0].contains("overloaded"),
        "{injected:?}"
    );
    assert_eq!(server.rejections(), Vec::<String>::new());
}

#[tokio::test]
async fn a_subagent_works_in_its_working_dir() {
    let scene = Scene::new();
    std::fs::create_dir_all(scene.workspace().join("sub")).unwrap();
    let (_host, tools) = crate::support::coding_tools(&scene, Policy::default()).await;
    let child_script = sandcrab::llm::scripted::ScriptedClient::new(vec![
        sandcrab::llm::scripted::tool_calls(&[
            ("c1", "shell", json!({"command": "pwd > where.txt"})),
            (
                "c2",
                "write_file",
                json!({"file_path": "made.txt", "content": "x"}),
            ),
        ]),
        sandcrab::llm::scripted::text("done in sub"),
    ]);
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let (parent, children) = session_with(&scene, Arc::new(child_script), tools, &jobs);
    let call = |name: &str, args: Value| {
        let request = ToolCallRequest {
            id: format!("{name}-1"),
            name: name.into(),
            arguments: args,
        };
        let tools = parent.tools();
        async move { dispatch(&tools, &request, &ToolContext::default()).await }
    };
    let spawned = call(
        "spawn_agent",
        json!({"task": "work here", "working_dir": "sub"}),
    )
    .await;
    assert!(!spawned.is_error(), "{}", spawned.content);
    let id = serde_json::from_str::<Value>(&spawned.content).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = call("wait", json!({"agent_id": id})).await;
    let second = call("wait", json!({"agent_id": id})).await;
    assert_eq!(
        first.content, second.content,
        "wait returns the same result again"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&first.content).unwrap()["output"],
        "done in sub"
    );
    let sub = scene.workspace().join("sub");
    assert_eq!(
        std::fs::read_to_string(sub.join("where.txt"))
            .unwrap()
            .trim(),
        sub.display().to_string(),
        "the shell ran in the working dir"
    );
    assert!(
        sub.join("made.txt").exists(),
        "relative paths resolve there"
    );
    assert!(!scene.workspace().join("made.txt").exists());
    let child = children.get(&id).await.unwrap();
    assert!(
        child
            .system_prompt()
            .contains(&format!("Working directory: {}", sub.display()))
    );

    let refused = call(
        "spawn_agent",
        json!({"task": "t", "model": "expensive-model"}),
    )
    .await;
    assert!(
        refused.is_error() && refused.content.contains("not allowed"),
        "{}",
        refused.content
    );
}

#[tokio::test]
async fn plugins_built_against_abi_0_1_0_still_load_and_work() {
    let scene = Scene::new();
    std::fs::create_dir_all(scene.workspace().join("sub")).unwrap();
    let dir = crate::support::install_plugin(
        &scene.plugins(),
        "test-fixtures/legacy-tool",
        "legacy",
        |m| m,
    );
    let mut host = scene.host(crate::support::grant(
        "legacy-tool",
        sandcrab::plugin::policy::PluginGrant {
            programs: vec!["sh".into()],
            ..Default::default()
        },
    ));
    let plugin = host
        .load(&sandcrab::plugin::PluginSource::Dir(dir))
        .await
        .unwrap();
    assert_eq!(plugin.version.to_string(), "0.1.0");
    let ctx = sandcrab::plugin::ToolCallContext {
        session_id: "s".into(),
        call_id: "c".into(),
        working_dir: Some(scene.workspace().join("sub")),
        detach: None,
        programs: None,
        background: false,
        network: false,
    };
    let out = plugin.call_tool("where", "{}", &ctx, None).await.unwrap();
    assert!(
        out.text.starts_with("root=/workspace host="),
        "{}",
        out.text
    );
    let out = plugin.call_tool("pwd", "{}", &ctx, None).await.unwrap();
    assert_eq!(
        out.text,
        scene.workspace().display().to_string(),
        "0.1.0 semantics: no working directory, programs run at the root"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_calls_free_their_instance_slot() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "hello\n").unwrap();
    let (_host, tools) = crate::support::coding_tools(&scene, Policy::default()).await;
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let marker = format!("sleep 33.{}", std::process::id());
    let settings = BackgroundSettings::default();
    // More background shells than coding-tools has instances (16).
    for i in 0..20 {
        let request = ToolCallRequest {
            id: format!("bg{i}"),
            name: "shell".into(),
            arguments: json!({"command": marker, "run_in_background": true}),
        };
        let ctx = ToolContext {
            session_id: "t".into(),
            call_id: format!("bg{i}"),
            ..ToolContext::default()
        };
        let mode = sandcrab::jobs::run_call(&jobs, tools.clone(), request, ctx, settings)
            .await
            .unwrap();
        assert!(matches!(mode, sandcrab::jobs::CallMode::Background(_)));
    }
    wait_until("the background shells run", || process_running(&marker)).await;
    let started = Instant::now();
    let read = crate::support::run_tool(&tools, "read_file", json!({"file_path": "a.txt"})).await;
    assert!(!read.is_error(), "{}", read.content);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    for job in jobs.list("t", None) {
        jobs.cancel("t", &job.job_id, sandcrab::jobs::Actor::User)
            .unwrap();
    }
    assert!(gone_soon(&marker));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_the_sessions_jobs_and_kills_their_processes() {
    let scene = Scene::new();
    let (_host, tools) = crate::support::coding_tools(&scene, Policy::default()).await;
    let marker = format!("sleep 34.{}", std::process::id());
    let script = sandcrab::llm::scripted::ScriptedClient::new(vec![
        sandcrab::llm::scripted::tool_calls(&[(
            "c1",
            "shell",
            json!({"command": marker, "run_in_background": true}),
        )]),
        sandcrab::llm::scripted::text("started"),
    ]);
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let (session, _) = session_with(&scene, Arc::new(script), tools, &jobs);
    session.submit("start it").await.unwrap();
    wait_until("the job runs", || process_running(&marker)).await;
    session.abort().await;
    assert!(gone_soon(&marker), "the job's process was killed");
    let job = &jobs.list(session.id(), Some(&JobStatus::ALL[..]))[0];
    assert!(
        matches!(job.status, JobStatus::Cancelled | JobStatus::PendingCancel),
        "{:?}",
        job.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_turn_chat_survives_two_interrupts_and_a_provider_outage() {
    let scene = Scene::new();
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::strict(kind).await;
    let marker = |n: usize| format!("sleep 35.{}{n}", std::process::id());
    let mut expected_requests = 0;
    let mut chat = Chat::start(&scene, kind, &server);
    let started = Instant::now();
    for n in 1..=30 {
        if n == 5 || n == 15 {
            server.push(stream(
                kind,
                &Answer::Tools(vec![tool(
                    &format!("c{n}"),
                    "shell",
                    json!({"command": marker(n), "timeout_ms": 60000}),
                )]),
            ));
            chat.say(&format!("question {n}: run something long"));
            expected_requests += 1;
            wait_until("the command runs", || process_running(&marker(n))).await;
            chat.interrupt();
            wait_until("the command stops", || !process_running(&marker(n))).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if n == 22 {
            // An outage: the first try and both retries fail.
            for _ in 0..3 {
                server.push(Reply::json(
                    503,
                    crate::llm_transcripts::error_body(kind, 503, "overloaded"),
                ));
            }
            chat.say(&format!("question {n}"));
            expected_requests += 3;
            wait_until("the outage", || {
                server.requests().len() >= expected_requests
            })
            .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            server.push(stream(kind, &Answer::Text(vec!["answer after the outage"])));
            chat.say("/retry");
            expected_requests += 1;
            wait_until("the retry", || server.requests().len() >= expected_requests).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        server.push(stream(kind, &Answer::Text(vec!["answer ", "text"])));
        chat.say(&format!("question {n}"));
        expected_requests += 1;
        wait_until("the answer", || {
            server.requests().len() >= expected_requests
        })
        .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ok, events, stderr) = chat.finish();
    let took = started.elapsed();
    assert!(ok, "{stderr}");
    assert_eq!(server.rejections(), Vec::<String>::new());
    let count = |k: &str| events.iter().filter(|e| e["kind"] == k).count();
    let interrupted = events
        .iter()
        .filter(|e| e["kind"] == "PROCESSING_END" && e["data"]["interrupted"] == true)
        .count();
    let last = server.requests().last().unwrap().body.to_string();
    for n in 1..30 {
        assert!(last.contains(&format!("question {n}")), "turn {n} was lost");
    }
    assert_eq!(interrupted, 2);
    assert_eq!(count("ERROR"), 1);
    assert_eq!(count("USER_INPUT"), 30);
    eprintln!(
        "30-turn chat: {} requests, {} events ({} USER_INPUT, {} PROCESSING_END of which {interrupted} interrupted, {} ERROR, {} TOOL_CALL_END), every request accepted by the strict server, {:.1} s",
        server.requests().len(),
        events.len(),
        count("USER_INPUT"),
        count("PROCESSING_END"),
        count("ERROR"),
        count("TOOL_CALL_END"),
        took.as_secs_f64()
    );
}

/// A local server that serves several models, with none named: the error
/// says which it serves, so the operator can pick one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_error_names_what_the_local_server_serves() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    server.describe(
        "/v1/models",
        json!({"data": [{"id": "qwen2.5-coder:7b"}, {"id": "llama3.2:3b"}]}),
    );
    let out = crate::cli_support::local_server(&scene, &server, "run")
        .arg("hi")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("serves: qwen2.5-coder:7b, llama3.2:3b") && stderr.contains("--model"),
        "{stderr}"
    );
    assert!(server.requests().is_empty(), "no model call was made");
}
