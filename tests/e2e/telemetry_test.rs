//! OpenTelemetry export through the binary, against a real OTLP/HTTP
//! receiver on loopback that decodes every byte with the official
//! OpenTelemetry protobuf definitions (`tests/otlp/collector.py`): the
//! span tree of a session with tool calls and the GenAI conventions'
//! attributes, sandcrab's own from the receipt, `traceparent` reaching an
//! MCP server, no prompt, argument, output or secret in any byte unless
//! the operator captures it (and a secret not even then), and a collector
//! that hangs slows no turn.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{events, sandcrab};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, bytes_contain};

const KIND: ProviderKind = ProviderKind::Anthropic;
/// The provider key `cli_support::sandcrab` gives every run.
const KEY: &str = "sk-test-secret-4242";

/// A running collector, killed when dropped.
struct Collector {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Collector {
    fn start(hang: bool) -> Collector {
        let python =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/otlp-peers/venv/bin/python");
        assert!(
            python.exists(),
            "the OpenTelemetry protobuf definitions are not installed: run ./scripts/setup-polyglot (./scripts/test does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/otlp/collector.py");
        let mut cmd = Command::new(python);
        cmd.arg(script).arg(dir.path());
        if hang {
            cmd.arg("--hang");
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the collector's port");
        Collector { child, port, dir }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every file the collector wrote whose name ends with `suffix`.
    fn files(&self, suffix: &str) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        files.sort();
        files
    }

    /// Every span exported, decoded.
    fn spans(&self) -> Vec<Value> {
        let mut spans = Vec::new();
        for file in self.files(".traces.json") {
            let decoded: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
            for resource in decoded["resource_spans"].as_array().unwrap() {
                assert_eq!(
                    attribute(&resource["resource"], "service.name"),
                    json!("sandcrab")
                );
                for scope in resource["scope_spans"].as_array().unwrap() {
                    spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
                }
            }
        }
        spans
    }

    /// Every byte sent, traces and metrics.
    fn bytes(&self) -> Vec<u8> {
        self.files(".bin")
            .into_iter()
            .flat_map(|f| std::fs::read(f).unwrap())
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An attribute of a decoded span (or resource), as a plain JSON value.
fn attribute(holder: &Value, key: &str) -> Value {
    let Some(found) = holder["attributes"]
        .as_array()
        .and_then(|attrs| attrs.iter().find(|a| a["key"] == key))
    else {
        return Value::Null;
    };
    let value = &found["value"];
    if let Some(s) = value.get("string_value") {
        return s.clone();
    }
    if let Some(i) = value.get("int_value") {
        // int64 is a string in protobuf's JSON.
        return json!(i.as_str().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0));
    }
    if let Some(values) = value.pointer("/array_value/values") {
        return json!(
            values
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["string_value"].clone())
                .collect::<Vec<_>>()
        );
    }
    value.clone()
}

fn named<'a>(spans: &'a [Value], operation: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| attribute(s, "gen_ai.operation.name") == json!(operation))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_exports_its_span_tree_in_the_genai_conventions_and_no_content() {
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "", "");
    let collector = Collector::start(false);
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![
            tool(
                "c1",
                "shell",
                json!({"command": "echo TOOL-OUTPUT-CANARY-31"}),
            ),
            tool("c2", "probe__trace_context", json!({})),
        ]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["all done"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .args([
            "--json",
            "--approvals",
            "always",
            "--approve",
            "command:echo TOOL-OUTPUT-CANARY-31",
            "--approve",
            "tool:probe__trace_context",
            "PROMPT-CANARY-88 please work",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spans = collector.spans();

    // The tree: one invoke_agent root, two chat calls and two tool calls
    // under it, all of one trace.
    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let root = agents[0];
    assert!(root.get("parent_span_id").is_none(), "{root}");
    assert_eq!(root["name"], "invoke_agent sandcrab");
    let chats = named(&spans, "chat");
    let tools = named(&spans, "execute_tool");
    assert_eq!((chats.len(), tools.len()), (2, 2), "{spans:#?}");
    for child in chats.iter().chain(&tools) {
        assert_eq!(child["parent_span_id"], root["span_id"], "{child}");
        assert_eq!(child["trace_id"], root["trace_id"], "{child}");
    }

    // The conventions' attributes.
    assert_eq!(attribute(root, "gen_ai.provider.name"), json!("anthropic"));
    assert_eq!(attribute(root, "gen_ai.agent.name"), json!("sandcrab"));
    let session_id = events(&out.stdout)[0]["session_id"].clone();
    assert_eq!(attribute(root, "gen_ai.conversation.id"), session_id);
    let chat = chats[0];
    assert_eq!(chat["kind"], "SPAN_KIND_CLIENT", "{chat}");
    assert_eq!(attribute(chat, "gen_ai.request.model"), json!("test-model"));
    assert_eq!(
        attribute(chat, "gen_ai.response.model"),
        json!("claude-test")
    );
    // 8 fresh and 2 read from the cache: the conventions count both.
    assert_eq!(attribute(chat, "gen_ai.usage.input_tokens"), json!(10));
    assert_eq!(attribute(chat, "gen_ai.usage.output_tokens"), json!(5));
    assert_eq!(
        attribute(chat, "gen_ai.response.finish_reasons"),
        json!(["tool_calls"])
    );
    let shell = tools
        .iter()
        .find(|t| attribute(t, "gen_ai.tool.name") == json!("shell"))
        .unwrap();
    assert_eq!(shell["name"], "execute_tool shell");
    assert_eq!(attribute(shell, "gen_ai.tool.call.id"), json!("c1"));
    // sandcrab's own, from the receipt: who ran it, under what, and why
    // it was allowed.
    assert_eq!(attribute(shell, "sandcrab.principal.kind"), json!("plugin"));
    assert_eq!(
        attribute(shell, "sandcrab.principal.name"),
        json!("coding-tools")
    );
    assert_eq!(
        attribute(shell, "sandcrab.sandbox.mode"),
        json!("workspace-write")
    );
    assert_eq!(attribute(shell, "sandcrab.verdict"), json!("allow"));
    // Where the rule is written and its kind; what it matches (here the
    // whole command line) stays in the receipt.
    let rule = attribute(shell, "sandcrab.rule");
    assert!(
        rule.as_str().unwrap().ends_with("(command)") && !rule.to_string().contains("echo"),
        "{rule}"
    );
    assert_eq!(attribute(shell, "sandcrab.programs.started"), json!(1));
    let mcp = tools
        .iter()
        .find(|t| attribute(t, "gen_ai.tool.name") == json!("probe__trace_context"))
        .unwrap();
    assert_eq!(
        attribute(mcp, "sandcrab.principal.kind"),
        json!("mcp-server")
    );

    // The MCP server was told the call's span.
    let said = events(&out.stdout)
        .into_iter()
        .find(|e| e["kind"] == "TOOL_CALL_END" && e["data"]["call_id"] == "c2")
        .unwrap();
    let expected = format!(
        "traceparent: 00-{}-{}-01",
        mcp["trace_id"].as_str().unwrap(),
        mcp["span_id"].as_str().unwrap()
    );
    assert!(
        said["data"]["output"].as_str().unwrap().contains(&expected),
        "the server saw {said} and not {expected}"
    );

    // Metrics for tokens and calls.
    let metrics: Vec<String> = collector
        .files(".metrics.json")
        .iter()
        .flat_map(|f| {
            let decoded: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            decoded
                .pointer("/resource_metrics/0/scope_metrics/0/metrics")
                .and_then(Value::as_array)
                .map(|m| {
                    m.iter()
                        .map(|m| m["name"].as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect();
    for name in [
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "sandcrab.tool.calls",
    ] {
        assert!(
            metrics.iter().any(|m| m == name),
            "no {name} in {metrics:?}"
        );
    }

    // No prompt, argument, output or key in any byte sent.
    let bytes = collector.bytes();
    assert!(!bytes.is_empty());
    for canary in [KEY, "PROMPT-CANARY-88", "TOOL-OUTPUT-CANARY-31"] {
        assert!(!bytes_contain(&bytes, canary), "{canary} was exported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_content_is_exported_as_asked_and_a_secret_is_withheld_even_then() {
    let scene = Scene::new();
    let collector = Collector::start(false);
    // A secret the operator keeps in a file the host's registry names.
    let kept = scene.outside().join("deploy-token");
    std::fs::write(&kept, "KEPT-FILE-SECRET-5150\n").unwrap();
    scene.write_user_config(&format!(
        "[policy]\nkept_paths = [\"{}\"]\n\
         [telemetry]\nendpoint = \"{}\"\ncapture = [\"input_messages\", \"tool_arguments\"]\n",
        kept.display(),
        collector.endpoint()
    ));
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "echo ARGS-CANARY-5"}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["ok"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg(format!(
            "PROMPT-CANARY-88, and my key is {KEY}, the deploy token KEPT-FILE-SECRET-5150"
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bytes = collector.bytes();
    // Captured as the operator asked (the control of the test above).
    assert!(
        bytes_contain(&bytes, "PROMPT-CANARY-88"),
        "the prompt was not captured"
    );
    assert!(
        bytes_contain(&bytes, "ARGS-CANARY-5"),
        "the arguments were not captured"
    );
    // The key the host holds is withheld wherever it would go.
    assert!(!bytes_contain(&bytes, KEY), "the provider key was exported");
    assert!(
        !bytes_contain(&bytes, "KEPT-FILE-SECRET-5150"),
        "a secret of the host's registry was exported"
    );
    assert!(bytes_contain(&bytes, &"*".repeat(KEY.len())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_slows_no_turn() {
    let scene = Scene::new();
    let collector = Collector::start(true);
    let server = MockLlm::strict(KIND).await;
    for i in 0..3 {
        server.push(stream(
            KIND,
            &Answer::Tools(vec![tool(
                &format!("c{i}"),
                "shell",
                json!({"command": "true"}),
            )]),
        ));
    }
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    let started = std::time::Instant::now();
    let out = sandcrab(&scene, KIND, &server, "run")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .args(["--json", "work"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let result = events(&out.stdout).last().cloned().unwrap();
    // The run's own time stays below one request to the collector (3 s):
    // no turn waited for it. Exiting waits for it at most 1.5 s more.
    let took = result["data"]["duration_ms"].as_u64().unwrap();
    assert!(took < 3_000, "the run waited for the collector: {took} ms");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(took / 1000 + 10),
        "exiting waited for the collector: {:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_a_server_asks_for_and_a_subagents_work_hang_under_the_call_that_made_them() {
    // A server's model call (sampling) is told under the call it answers.
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "sampling = true", "");
    let collector = Collector::start(false);
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "s1",
            "probe__ask_model",
            json!({"question": "Capital?"}),
        )]),
    ));
    server.push(crate::mcp_client_test::sampled_answer("Paris"));
    server.push(stream(KIND, &Answer::Text(vec!["Done."])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .arg("Ask it.")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spans = collector.spans();
    let call = named(&spans, "execute_tool")[0];
    let chats = named(&spans, "chat");
    assert_eq!(chats.len(), 3, "{spans:#?}");
    let sampled = chats
        .iter()
        .find(|c| c["parent_span_id"] == call["span_id"])
        .unwrap_or_else(|| panic!("no model call under the tool call: {spans:#?}"));
    assert_eq!(attribute(sampled, "gen_ai.usage.input_tokens"), json!(17));
    assert_eq!(attribute(sampled, "gen_ai.usage.output_tokens"), json!(2));

    // A subagent's input hangs under its parent's spawn_agent call, in
    // the parent's trace and conversation, even as a background job.
    let scene = Scene::new();
    let collector = Collector::start(false);
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "s1",
            "spawn_agent",
            json!({"task": "CHILD-TRACE-TASK look around", "run_in_background": true}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["waiting"])));
    server.push(stream(KIND, &Answer::Text(vec!["all done"])));
    server.push_for(
        "CHILD-TRACE-TASK",
        stream(KIND, &Answer::Text(vec!["looked"])),
    );
    let out = sandcrab(&scene, KIND, &server, "run")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .args(["--wait-jobs", "60", "delegate"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spans = collector.spans();
    let agents = named(&spans, "invoke_agent");
    let spawn = named(&spans, "execute_tool")
        .into_iter()
        .find(|t| attribute(t, "gen_ai.tool.name") == json!("spawn_agent"))
        .expect("the spawn_agent call");
    let child = agents
        .iter()
        .find(|a| attribute(a, "sandcrab.session.depth") == json!(1))
        .unwrap_or_else(|| panic!("no subagent span: {spans:#?}"));
    assert_eq!(child["parent_span_id"], spawn["span_id"], "{child}");
    assert_eq!(child["trace_id"], spawn["trace_id"]);
    let top = agents
        .iter()
        .find(|a| attribute(a, "sandcrab.session.depth") == json!(0))
        .unwrap();
    assert_eq!(
        attribute(child, "gen_ai.conversation.id"),
        attribute(top, "gen_ai.conversation.id")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_file_even_trusted_neither_sends_telemetry_nor_raises_a_cap() {
    let scene = Scene::new();
    let collector = Collector::start(false);
    // The repository asks for every byte of content to go to its own
    // collector, and for a cap far above the operator's.
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        format!(
            "[telemetry]\nendpoint = \"{}\"\ncapture = [\"input_messages\", \"output_messages\", \"tool_arguments\", \"tool_results\"]\n\
             [budget]\nmax_tokens_total = 999999999\n",
            collector.endpoint()
        ),
    )
    .unwrap();
    scene.write_user_config("[budget]\nmax_tokens_total = 50\n");
    let trusted = crate::support::sandcrab_cmd(&scene)
        .arg("trust")
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{trusted:?}");
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["never"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("PROMPT-CANARY-88")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The operator's cap holds: the request does not fit 50 tokens.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(server.requests().is_empty());
    assert!(
        stderr.contains("telemetry") && stderr.contains("budget"),
        "{stderr}"
    );
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(
        collector.files("").is_empty(),
        "the project's collector was sent {:?}",
        collector.files("")
    );

    // The control: the operator's own file naming the same collector is
    // obeyed.
    scene.write_user_config(&format!(
        "[telemetry]\nendpoint = \"{}\"\n",
        collector.endpoint()
    ));
    server.push(stream(KIND, &Answer::Text(vec!["fine"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("hi")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!collector.spans().is_empty());
}
