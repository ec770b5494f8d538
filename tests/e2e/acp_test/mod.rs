//! `sandcrab acp` driven by the official Agent Client Protocol TypeScript
//! SDK (`tests/acp/client.mjs`, installed by `scripts/setup-polyglot`): a
//! scripted editor session — a call that needs approval allowed for the
//! conversation, the same call again not asked, a long call cancelled —,
//! the session loaded in a new process and continued in the terminal, and
//! the protocol attacks: garbage, unknown methods, a forged or cancelled
//! permission answer, an editor that vanishes mid-question.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::sandcrab;
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::support::Scene;

mod cancel;
mod mcp;

const KIND: ProviderKind = ProviderKind::Anthropic;

/// The last content block of a request body, as text (a tool result
/// and the next input travel in one user message).
fn last_entry(body: &Value) -> String {
    let last = body["messages"].as_array().and_then(|a| a.last());
    last.and_then(|m| m["content"].as_array().and_then(|c| c.last()).or(Some(m)))
        .map(Value::to_string)
        .unwrap_or_default()
}

/// The scripted model: a shell call for "run the tests" and "again", a
/// long one for "wait", a short answer after any tool result and for
/// anything else.
fn model() -> impl Fn(&str, &Value) -> Reply + Send + 'static {
    |_path, body| {
        let last = last_entry(body);
        if last.contains("tool_result") {
            return stream(KIND, &Answer::Text(vec!["The call is done."]));
        }
        let id = format!("call-{}", body.to_string().len());
        let call = if last.contains("run the tests") || last.contains("again") {
            tool(&id, "shell", json!({"command": "echo tests-pass"}))
        } else if last.contains("wait") {
            tool(&id, "shell", json!({"command": "sleep 30"}))
        } else if last.contains("list the files") {
            tool(&id, "shell", json!({"command": "echo listed"}))
        } else if last.contains("read the notes") {
            tool(&id, "read_file", json!({"file_path": "notes.txt"}))
        } else if last.contains("think aloud") {
            return stream(
                KIND,
                &Answer::Reasoned("The user wants to see me think.", "Thought through."),
            );
        } else {
            return stream(KIND, &Answer::Text(vec!["Hello from the model."]));
        };
        stream(KIND, &Answer::Tools(vec![call]))
    }
}

/// An official ACP SDK's client, in the language of the editors that
/// embed it.
#[derive(Debug, Clone, Copy)]
enum Peer {
    TypeScript,
    Python,
}

/// `peer` running `steps` against `sandcrab acp`; its report.
fn editor(peer: Peer, scene: &Scene, server: &MockLlm, steps: Value) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/acp");
    let mut cmd = match peer {
        Peer::TypeScript => {
            assert!(
                dir.join("node_modules/@agentclientprotocol/sdk").exists(),
                "the ACP TypeScript SDK is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
            );
            let mut cmd = Command::new("node");
            cmd.arg(dir.join("client.mjs"));
            cmd
        }
        Peer::Python => {
            let python = dir.join("../../target/acp-peers/venv/bin/python");
            assert!(
                python.exists(),
                "the ACP Python SDK is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
            );
            let mut cmd = Command::new(python);
            cmd.arg(dir.join("client.py"));
            cmd
        }
    };
    let agent = sandcrab(scene, KIND, server, "acp");
    cmd.arg(steps.to_string())
        .arg(scene.workspace())
        .arg("--")
        .arg(agent.get_program())
        .args(agent.get_args());
    for (k, v) in agent.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{peer:?} client failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_else(|| panic!("{stderr}"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

fn kinds(step: &Value) -> Vec<String> {
    step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_string())
        .collect()
}

/// A workspace and the scripted model of [`model`] behind a strict mock.
async fn scripted() -> (Scene, MockLlm) {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.fallback(model());
    (scene, server)
}

/// The text of the `kind` chunks of `step`, joined.
fn chunks(step: &Value, kind: &str) -> String {
    step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// What the agent said in `step`.
fn said(step: &Value) -> String {
    chunks(step, "agent_message_chunk")
}

/// The end of the tool call of `step`.
fn ended(step: &Value) -> Value {
    step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .cloned()
        .unwrap_or_else(|| panic!("no tool call ended: {step:#}"))
}

/// The receipt of the tool call of `step`.
fn receipt(step: &Value) -> Value {
    ended(step)["rawOutput"]["receipt"].clone()
}

/// Whether the program of the tool call of `step` ran (its output is
/// the line `tests-pass`, which only `echo` writes).
fn ran(step: &Value) -> bool {
    let end = ended(step);
    end["status"] == "completed"
        && end["content"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.lines().any(|l| l.trim() == "tests-pass"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_drives_a_session_whose_approvals_the_host_enforces() {
    for peer in [Peer::TypeScript, Peer::Python] {
        drive_a_session(peer).await;
    }
}

async fn drive_a_session(peer: Peer) {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("notes.txt"), "the notes\n").unwrap();
    let server = MockLlm::strict(KIND).await;
    server.fallback(model());
    // Started in the terminal.
    let run = sandcrab(&scene, KIND, &server, "run")
        .arg("hello from the terminal")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let terminal_session = crate::sessions_test::only_session(&scene);

    let report = editor(
        peer,
        &scene,
        &server,
        json!([
            {"new": true},
            {"prompt": "run the tests", "answers": ["allow-conversation"]},
            {"prompt": "again"},
            {"prompt": "wait", "answers": ["allow-once"], "cancel_on": "tool_call"},
            {"list": true},
            {"prompt": "hello"},
            {"prompt": "read the notes"},
            {"mode": "always"},
            {"prompt": "read the notes", "answers": ["allow-once"]},
            {"mode": "never"},
            {"prompt": "list the files"},
            {"mode": "no-such-mode"},
            {"prompt": "/compact"},
        ]),
    );
    let init = &report["initialize"];
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    let steps = report["steps"].as_array().unwrap();
    let session = steps[0]["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    // The first call was asked about, with sandcrab's own options and
    // facts apart from the model's words; the answer is in the receipt.
    let first = &steps[1];
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first:#}");
    let asked = first["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{first:#}");
    let options: Vec<&str> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert!(
        options.contains(&"allow-conversation") && options.contains(&"deny"),
        "{options:?}"
    );
    assert_eq!(asked[0]["_meta"]["sandcrab"]["tool"], "shell");
    assert!(kinds(first).contains(&"tool_call".to_string()), "{first:#}");
    let approvals = receipt(first)["approvals"].to_string();
    assert!(approvals.contains("\"via\":\"acp\""), "{approvals}");
    assert!(said(first).contains("The call is done."));
    assert!(ran(first), "the call ran: {:#}", ended(first));

    // The same call again: allowed for the conversation, not asked.
    let again = &steps[2];
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again:#}");
    assert_eq!(again["asked"], json!([]), "{again:#}");
    assert!(ran(again), "{again:#}");

    // A long call cancelled as it started: the turn ends cancelled, fast.
    let wait = &steps[3];
    assert_eq!(wait["result"]["stopReason"], "cancelled", "{wait:#}");

    // The editor lists this workspace's sessions: the terminal's too.
    let listed = steps[4]["result"]["sessions"].to_string();
    assert!(
        listed.contains(&session) && listed.contains(&terminal_session),
        "{listed}"
    );

    // The session's modes are the approvals modes, on-risk in force; the
    // slash commands are advertised.
    let new = &steps[0];
    assert_eq!(
        new["result"]["modes"]["currentModeId"], "on-risk",
        "{new:#}"
    );
    // (sent once the editor knows the session: after the answer)
    assert!(
        kinds(&steps[1]).contains(&"available_commands_update".to_string()),
        "{:#}",
        steps[1]
    );
    let hello = &steps[5];
    assert!(said(hello).contains("Hello from the model."), "{hello:#}");
    // A file read is not asked about on-risk (the control), but is once
    // the editor switches to asking before every call; in "never" nothing
    // asks and the sandbox alone holds.
    assert_eq!(steps[6]["asked"], json!([]), "{:#}", steps[6]);
    assert_eq!(
        steps[8]["asked"].as_array().unwrap().len(),
        1,
        "{:#}",
        steps[8]
    );
    assert_eq!(
        steps[8]["asked"][0]["_meta"]["sandcrab"]["tool"],
        "read_file"
    );
    let listed_files = &steps[10];
    assert_eq!(listed_files["asked"], json!([]), "{listed_files:#}");
    assert_eq!(
        ended(listed_files)["status"],
        "completed",
        "{listed_files:#}"
    );
    assert!(
        steps[11]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("on-risk"),
        "{:#}",
        steps[11]
    );
    // A slash command runs as one.
    assert!(said(&steps[12]).contains("ompact"), "{:#}", steps[12]);

    // A new editor process loads the terminal's session, sees its
    // history, and goes on; the terminal then continues it.
    let report = editor(
        peer,
        &scene,
        &server,
        json!([{"load": terminal_session}, {"prompt": "hello from the editor"}]),
    );
    let steps = report["steps"].as_array().unwrap();
    let replayed = steps[0]["updates"].to_string();
    assert!(
        replayed.contains("hello from the terminal"),
        "{:#}",
        steps[0]
    );
    assert_eq!(
        steps[1]["result"]["stopReason"], "end_turn",
        "{:#}",
        steps[1]
    );
    let back = sandcrab(&scene, KIND, &server, "run")
        .args(["--resume", &terminal_session, "and back in the terminal"])
        .output()
        .unwrap();
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    let shown = crate::support::sandcrab_cmd(&scene)
        .args(["sessions", "show", &terminal_session, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let history = String::from_utf8_lossy(&shown.stdout);
    for input in [
        "hello from the terminal",
        "hello from the editor",
        "and back in the terminal",
    ] {
        assert!(history.contains(input), "{input}: {history}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_reasoning_shows_as_thought() {
    // A server of its own: the strict mock wants the signed thinking it
    // hands out in every later request, of any session.
    let (scene, server) = scripted().await;
    let report = editor(
        Peer::TypeScript,
        &scene,
        &server,
        json!([{"new": true}, {"prompt": "think aloud"}]),
    );
    let step = &report["steps"][1];
    assert_eq!(
        chunks(step, "agent_thought_chunk"),
        "The user wants to see me think.",
        "{step:#}"
    );
    assert!(said(step).contains("Thought through."), "{step:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_cancelled_answer_denies_and_garbage_gets_errors() {
    let (scene, server) = scripted().await;
    let report = editor(
        Peer::TypeScript,
        &scene,
        &server,
        json!([
            {"raw": "{not json"},
            {"raw": "{\"jsonrpc\":\"2.0\",\"id\":\"raw-1\",\"method\":\"session/teleport\",\"params\":{}}"},
            {"new": true},
            // An option never offered (the model's text cannot make one).
            {"prompt": "run the tests", "answers": ["allow"]},
            {"prompt": "run the tests", "answers": ["cancelled"]},
            // The control: an offered option allows.
            {"prompt": "run the tests", "answers": ["allow-once"]},
            {"prompt": "again"},
        ]),
    );
    let raw = report["raw"].as_array().unwrap();
    assert!(
        raw.iter().any(|r| r["error"]["code"] == -32700),
        "garbage is a parse error: {raw:?}"
    );
    assert!(
        raw.iter()
            .any(|r| r["id"] == "raw-1" && r["error"]["code"] == -32601),
        "an unknown method is not found: {raw:?}"
    );
    let steps = report["steps"].as_array().unwrap();
    for (i, step) in steps[3..5].iter().enumerate() {
        assert_eq!(step["asked"].as_array().unwrap().len(), 1, "{i}: {step:#}");
        let approvals = receipt(step)["approvals"].to_string();
        assert!(approvals.contains("denied"), "{i}: {approvals}");
        assert!(!ran(step), "{i}: it ran: {:#}", ended(step));
    }
    let allowed = &steps[5];
    assert!(ran(allowed), "{allowed:#}");
    // A yes for one call does not reach the next.
    assert_eq!(
        steps[6]["asked"].as_array().unwrap().len(),
        1,
        "{:#}",
        steps[6]
    );
    assert_eq!(report["agentExit"], 0);
}

/// Prompt `id` with `text` in `session`.
fn prompt_message(session: &str, id: u64, text: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId": session, "prompt": [{"type":"text","text": text}]}}).to_string()
}

/// Cancel what `session` answers.
fn cancel_message(session: &str) -> String {
    json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": session}}).to_string()
}

/// `sandcrab acp` with piped stdio, spoken to line by line.
struct RawAgent {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<Value>,
    /// While set, the reader reads nothing (an editor that stops reading).
    held: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RawAgent {
    fn start(scene: &Scene, server: &MockLlm) -> Self {
        Self::start_with(scene, server, &[])
    }

    fn start_with(scene: &Scene, server: &MockLlm, args: &[&str]) -> Self {
        use std::io::BufRead;
        use std::process::Stdio;
        let held = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let holding = held.clone();
        let mut child = sandcrab(scene, KIND, server, "acp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = stdout;
            loop {
                while holding.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let mut line = String::new();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end();
                let value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("stdout carries protocol only: {e}: {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        RawAgent {
            child,
            input,
            lines,
            held,
        }
    }

    fn hold(&self) {
        self.held.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn resume(&self) {
        self.held.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    fn send(&mut self, message: &[u8]) {
        use std::io::Write;
        let input = self.input.as_mut().unwrap();
        input.write_all(message).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    }

    /// A new session on the scene's workspace, asked with request id 1.
    fn new_session(&mut self, scene: &Scene) -> String {
        let cwd = scene.workspace().display().to_string();
        self.send(
            json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": cwd, "mcpServers": []}})
                .to_string()
                .as_bytes(),
        );
        self.until(|m| m["id"] == 1)["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The answer to prompt `id`, and whether a call of it printed
    /// `tests-pass` (only `echo tests-pass` does).
    fn answer_and_ran(&self, id: u64) -> (Value, bool) {
        let mut ran = false;
        let answer = self.until(|m| {
            if m["params"]["update"]["sessionUpdate"] == "tool_call_update" {
                ran |= m.to_string().contains("tests-pass\\n");
            }
            m["id"] == id
        });
        (answer, ran)
    }

    /// The next message that satisfies `wanted`.
    fn until(&self, mut wanted: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let message = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("the agent answered");
            if wanted(&message) {
                return message;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_and_an_editor_that_vanishes_mid_question_gets_no_yes() {
    let (scene, server) = scripted().await;
    let mut agent = RawAgent::start(&scene, &server);
    let cwd = scene.workspace().display().to_string();
    // 17 MiB on one line: skipped whole, answered, and the next read.
    agent.send(&vec![b'x'; 17 * 1024 * 1024]);
    let refused = agent.until(|m| m.get("error").is_some());
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("skipped"),
        "{refused}"
    );
    agent.send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    let init = agent.until(|m| m["id"] == 1);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    agent.send(
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd": cwd, "mcpServers": []}})
            .to_string()
            .as_bytes(),
    );
    let session = agent.until(|m| m["id"] == 2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    agent.send(
        json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId": session, "prompt": [{"type":"text","text":"run the tests"}]}})
            .to_string()
            .as_bytes(),
    );
    let question = agent.until(|m| m["method"] == "session/request_permission");
    assert_eq!(
        question["params"]["sessionId"],
        session.as_str(),
        "{question}"
    );
    // The editor goes away without answering.
    drop(agent.input.take());
    drop(agent.lines);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = agent.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "sandcrab acp did not exit after its editor left"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // The session was saved, and the call it asked about never ran.
    let shown = crate::support::sandcrab_cmd(&scene)
        .args(["sessions", "show", &session, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let history = String::from_utf8_lossy(&shown.stdout);
    assert!(history.contains("run the tests"), "{history}");
    assert!(
        !history.lines().any(|l| l.trim() == "tests-pass"),
        "{history}"
    );
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// How much `sandcrab acp` grows, in KiB, while the model streams an
/// answer in 300,000 small pieces and the editor reads (or, with `hold`,
/// does not read until the answer is whole); every piece arrives.
async fn growth_while_streaming(hold: bool) -> u64 {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let pieces: Vec<&'static str> = vec!["word "; 300_000];
    server.push(stream(KIND, &Answer::Text(pieces)));
    let mut agent = RawAgent::start(&scene, &server);
    let cwd = scene.workspace().display().to_string();
    agent.send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    agent.until(|m| m["id"] == 1);
    agent.send(
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd": cwd, "mcpServers": []}})
            .to_string()
            .as_bytes(),
    );
    let session = agent.until(|m| m["id"] == 2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let before = rss_kib(agent.child.id());
    if hold {
        agent.hold();
    }
    agent.send(
        json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId": session, "prompt": [{"type":"text","text":"talk"}]}})
            .to_string()
            .as_bytes(),
    );
    let mut peak = 0;
    let mut text = 0;
    let mut done = None;
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(60) && done.is_none() {
        peak = peak.max(rss_kib(agent.child.id()));
        if hold && started.elapsed() > std::time::Duration::from_secs(8) {
            agent.resume();
        }
        while let Ok(m) = agent
            .lines
            .recv_timeout(std::time::Duration::from_millis(50))
        {
            if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                text += m["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap()
                    .len();
            }
            if m["id"] == 3 {
                done = Some(m);
                break;
            }
        }
    }
    let done = done.expect("the prompt was answered");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(text, 300_000 * "word ".len(), "every piece arrived");
    peak.saturating_sub(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_that_stops_reading_does_not_make_the_agent_grow() {
    let reading = growth_while_streaming(false).await;
    let not_reading = growth_while_streaming(true).await;
    eprintln!(
        "sandcrab acp grew {} MiB while its editor read, {} MiB while it did not",
        reading / 1024,
        not_reading / 1024
    );
    assert!(
        not_reading < reading + 32 * 1024,
        "an editor that stops reading made the agent grow {} MiB more",
        (not_reading - reading) / 1024
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_projects_allow_rule_does_not_allow_in_the_editor() {
    let scene = Scene::new();
    // The project the editor opens tries to allow its own commands.
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        "[[approvals.rules]]\nshell = [\"echo\"]\ndecision = \"allow\"\n",
    )
    .unwrap();
    let server = MockLlm::strict(KIND).await;
    server.fallback(model());
    let report = editor(
        Peer::TypeScript,
        &scene,
        &server,
        json!([{"new": true}, {"prompt": "run the tests", "answers": ["deny"]}]),
    );
    let step = &report["steps"][1];
    assert_eq!(step["asked"].as_array().unwrap().len(), 1, "{step:#}");
    assert!(!ran(step), "{step:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_question_is_asked_in_its_own_conversation() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.fallback(|_path, body| {
        let last = last_entry(body);
        if last.contains("tool_result") {
            return stream(KIND, &Answer::Text(vec!["Done."]));
        }
        if last.contains("CHILD-TASK") {
            // The subagent asks late: after the editor opened another
            // session and prompted it.
            let call = tool("child-call", "shell", json!({"command": "echo tests-pass"}));
            return stream(KIND, &Answer::Tools(vec![call])).delayed(Duration::from_millis(300));
        }
        if last.contains("delegate") {
            let call = tool(
                "spawn",
                "spawn_agent",
                json!({"task": "CHILD-TASK: run the tests", "run_in_background": true}),
            );
            return stream(KIND, &Answer::Tools(vec![call]));
        }
        stream(KIND, &Answer::Text(vec!["Hello."]))
    });
    let mut agent = RawAgent::start(&scene, &server);
    let cwd = scene.workspace().display().to_string();
    let open = |agent: &mut RawAgent, id: u64| {
        agent.send(json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd": cwd, "mcpServers": []}}).to_string().as_bytes());
        agent.until(|m| m["id"] == id)["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let prompt = |agent: &mut RawAgent, id: u64, session: &str, text: &str| {
        agent.send(json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId": session, "prompt": [{"type":"text","text": text}]}}).to_string().as_bytes());
    };
    let a = open(&mut agent, 1);
    prompt(&mut agent, 2, &a, "delegate the tests");
    agent.until(|m| m["id"] == 2);
    let b = open(&mut agent, 3);
    prompt(&mut agent, 4, &b, "hello");
    let question = agent.until(|m| m["method"] == "session/request_permission");
    assert_eq!(question["params"]["sessionId"], a.as_str(), "{question}");
    assert!(
        question["params"]["_meta"]["sandcrab"]["from"]
            .as_str()
            .unwrap()
            .starts_with("subagent"),
        "{question}"
    );
}

/// A configured MCP server's question reaches the editor as a permission
/// request, the server named as the asker and the form in `_meta`; a yes
/// accepts it with the defaults, and a yes to a form the defaults cannot
/// fill (an editor gives no values) is declined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_question_is_asked_in_the_editor() {
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "", "");
    let server = MockLlm::strict(KIND).await;
    server.fallback(|_path, body| {
        let last = last_entry(body);
        let id = format!("call-{}", body.to_string().len());
        if last.contains("tool_result") {
            return stream(KIND, &Answer::Text(vec!["Done."]));
        }
        let tool_name = if last.contains("settings") {
            "probe__ask_settings"
        } else {
            "probe__ask_profile"
        };
        stream(KIND, &Answer::Tools(vec![tool(&id, tool_name, json!({}))]))
    });
    let allow = json!(["allow-once", "allow-once"]);
    let report = editor(
        Peer::TypeScript,
        &scene,
        &server,
        json!([{"new": true},
               {"prompt": "settings please", "answers": allow},
               {"prompt": "profile please", "answers": allow}]),
    );
    let question = |step: &Value| {
        step["asked"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["_meta"]["sandcrab"]["tool"] == "elicitation")
            .cloned()
            .unwrap_or_else(|| panic!("no question from the server: {step:#}"))
    };
    let settings = &report["steps"][1];
    let asked = question(settings);
    assert_eq!(asked["_meta"]["sandcrab"]["from"], "MCP server probe");
    assert_eq!(
        asked["_meta"]["sandcrab"]["form"]["message"],
        "Which settings?"
    );
    assert!(
        settings.to_string().contains("accepted: level=3 mode=fast"),
        "{settings:#}"
    );
    let profile = &report["steps"][2];
    question(profile);
    assert!(
        profile.to_string().contains("answered: decline"),
        "{profile:#}"
    );
}
