//! Running the `sandcrab` binary against a loopback provider, and reading
//! what it sent: shared by the end-to-end tests of `run` and `chat`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStderr, ChildStdin, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;
use serde_json::Value;

use crate::mock_llm::{MockLlm, Recorded};
use crate::support::{Scene, sandcrab_cmd};

/// `sandcrab SUBCOMMAND` with the provider options for `server`.
pub fn sandcrab(scene: &Scene, kind: ProviderKind, server: &MockLlm, subcommand: &str) -> Command {
    let mut cmd = sandcrab_cmd(scene);
    cmd.env(kind.key_vars()[0], "sk-test-secret-4242")
        .arg(subcommand)
        .args([
            "--provider",
            kind.id(),
            "--model",
            "test-model",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace());
    cmd
}

/// `sandcrab SUBCOMMAND` against `server` as a local OpenAI-compatible
/// server, with no model named (the server is asked what it serves).
pub fn local_server(scene: &Scene, server: &MockLlm, subcommand: &str) -> Command {
    let mut cmd = sandcrab_cmd(scene);
    cmd.arg(subcommand)
        .args(["--provider", "openai-compatible", "--base-url"])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace());
    cmd
}

pub fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event line ({e}): {l}"))
        })
        .collect()
}

pub fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

pub fn chat(scene: &Scene, kind: ProviderKind, server: &MockLlm, lines: &[&str]) -> Output {
    let mut cmd = sandcrab(scene, kind, server, "chat");
    // Scripted: nobody at the terminal answers approvals.
    let mut child = cmd
        .args(["--json", "--approvals", "never"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Run `cmd` (a `chat`) with `lines` on its stdin and wait for it.
pub fn with_lines(cmd: Command, lines: &[String]) -> Output {
    let mut input = String::new();
    for line in lines {
        input.push_str(line);
        input.push('\n');
    }
    crate::support::with_stdin(cmd, input.as_bytes())
}

/// The events of `kind` among `events`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The tool result (content) for `call_id`/`name` in a recorded request, in
/// the provider's own shape.
pub fn tool_result(kind: ProviderKind, request: &Recorded, call_id: &str, name: &str) -> String {
    let b = &request.body;
    let found = match kind {
        ProviderKind::Anthropic => b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|c| c["type"] == "tool_result" && c["tool_use_id"] == call_id)
            .map(|c| c["content"].clone()),
        ProviderKind::OpenAi => b["input"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
            .map(|i| i["output"].clone()),
        ProviderKind::OpenAiCompatible => b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
            .map(|m| m["content"].clone()),
        ProviderKind::Gemini => b["contents"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .rfind(|p| p["functionResponse"]["name"] == name)
            .map(|p| {
                // Error results travel as `error`, the others as `output`.
                let response = &p["functionResponse"]["response"];
                match response.get("output") {
                    Some(output) => output.clone(),
                    None => response["error"].clone(),
                }
            }),
    };
    found
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{kind}: no tool result for {call_id} in {b:#}"))
}

/// The names of the tools `request` offers the model, in the provider's
/// own shape.
pub fn offered_tools(kind: ProviderKind, request: &Recorded) -> Vec<String> {
    let b = &request.body;
    let tools: Vec<Value> = match kind {
        ProviderKind::Gemini => b["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect(),
        _ => b["tools"].as_array().cloned().unwrap_or_default(),
    };
    tools
        .iter()
        .filter_map(|t| {
            t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// `sandcrab chat ARGS` reading lines from a pipe: the child, its stdin, and
/// its stderr as it comes (assistant text, on stdout, is dropped).
pub fn piped_chat(
    scene: &Scene,
    kind: ProviderKind,
    server: &MockLlm,
    args: &[&std::ffi::OsStr],
) -> (Child, ChildStdin, Arc<Mutex<String>>) {
    let mut child = sandcrab(scene, kind, server, "chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    (child, stdin, stderr)
}

/// Lines of the child's stderr, read on a thread into a shared buffer.
pub fn collect(stderr: ChildStderr) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut t = sink.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    text
}

/// Wait until `text` contains `needle` (or fail after `limit`).
pub fn wait_for(text: &Mutex<String>, needle: &str, limit: Duration) {
    let start = Instant::now();
    while !text.lock().unwrap().contains(needle) {
        assert!(
            start.elapsed() < limit,
            "waited {limit:?} for {needle:?}; stderr so far:\n{}",
            text.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The new id `sessions import` gave the session it took in (its output:
/// "imported session ORIGIN as ID in …").
pub fn imported_id(said: &str) -> String {
    said.split(" as ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no imported id in: {said}"))
        .to_string()
}
