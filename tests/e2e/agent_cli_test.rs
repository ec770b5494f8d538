//! `sandcrab run` and `sandcrab chat` end to end: the real binary, the real
//! WASM tools on a temp workspace, and a loopback server speaking each
//! provider's wire format.

use std::io::Write;
use std::process::{Command, Stdio};

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{chat, events, kinds, sandcrab, tool_result};
use crate::llm_transcripts::{Answer, error_body, stream, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::support::{Scene, gone_soon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_step_conversation_works_with_every_provider() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        let server = MockLlm::start().await;
        // The openai profile edits with apply_patch but also has write_file.
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool(
                "call_w",
                "write_file",
                json!({"file_path": "hello.txt", "content": "Hello World"}),
            )]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["Created ", "hello.txt."])));
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool(
                "call_r",
                "read_file",
                json!({"file_path": "hello.txt"}),
            )]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["It says Hello World."])));
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool("call_s", "shell", json!({"command": "ls -la"}))]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["Listed the directory."])));

        let out = chat(
            &scene,
            kind,
            &server,
            &[
                "Create a file called hello.txt with the content 'Hello World'",
                "Read hello.txt and tell me what it says",
                "Run the command 'ls -la' in the current directory",
                "/exit",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: {stderr}");
        assert_eq!(
            std::fs::read_to_string(scene.workspace().join("hello.txt")).unwrap(),
            "Hello World",
            "{kind}"
        );

        let reqs = server.requests();
        assert_eq!(reqs.len(), 6, "{kind}: {stderr}");
        assert!(
            tool_result(kind, &reqs[1], "call_w", "write_file").contains("hello.txt (11 bytes)"),
            "{kind}"
        );
        assert!(
            tool_result(kind, &reqs[3], "call_r", "read_file").contains("     1\tHello World"),
            "{kind}"
        );
        assert!(
            tool_result(kind, &reqs[5], "call_s", "shell").contains("hello.txt"),
            "{kind}"
        );

        let events = events(&out.stdout);
        let k = kinds(&events);
        assert_eq!(k.first(), Some(&"SESSION_START"), "{kind}");
        assert_eq!(k.last(), Some(&"SESSION_END"), "{kind}");
        let first_input: Vec<&str> = k
            .iter()
            .copied()
            .skip_while(|x| *x != "USER_INPUT")
            .take_while(|x| *x != "PROCESSING_END")
            .collect();
        assert_eq!(
            first_input,
            vec![
                "USER_INPUT",
                "TOOL_CALL_START",
                "TOOL_CALL_END",
                "ASSISTANT_TEXT_START",
                "ASSISTANT_TEXT_DELTA",
                "ASSISTANT_TEXT_DELTA",
                "ASSISTANT_TEXT_END"
            ],
            "{kind}"
        );
        let starts: Vec<&str> = events
            .iter()
            .filter(|e| e["kind"] == "TOOL_CALL_START")
            .map(|e| e["data"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(starts, vec!["write_file", "read_file", "shell"], "{kind}");
        assert_eq!(
            k.iter().filter(|x| **x == "PROCESSING_END").count(),
            3,
            "{kind}"
        );
        let session_id = events[0]["session_id"].as_str().unwrap();
        assert!(
            events
                .iter()
                .all(|e| e["session_id"] == session_id && e["timestamp"].is_string()),
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_text_on_stdout_and_tool_activity_on_stderr() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::Anthropic;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "echo from-the-tool"}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["The tool said hi."])));
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["say hi"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "The tool said hi.\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("● shell(") && stderr.contains("from-the-tool"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_under_load_keeps_the_full_output_in_events_only() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::OpenAiCompatible;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "seq 1 100000"}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["done"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["--json", "count"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(&out.stdout);
    let end = events
        .iter()
        .find(|e| e["kind"] == "TOOL_CALL_END")
        .unwrap();
    let full = end["data"]["output"].as_str().unwrap();
    assert!(
        full.len() > 50_000 && full.starts_with("1\n2\n3\n") && full.contains("\n100000\n"),
        "{}",
        full.len()
    );
    assert_eq!(end["data"]["truncated"], true);
    let sent = tool_result(kind, &server.requests()[1], "c1", "shell");
    assert!(sent.chars().count() <= 31_000, "{}", sent.len());
    assert!(sent.lines().count() <= 257, "{}", sent.lines().count());
    assert!(
        sent.contains("[WARNING: Tool output was truncated."),
        "{sent}"
    );
    assert!(
        sent.starts_with("1\n2\n") && sent.contains("[exit code 0"),
        "head and tail kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_with_a_one_line_reason() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    // No key at all.
    let out = sandcrab(&scene, ProviderKind::Anthropic, &server, "run")
        .env_remove("ANTHROPIC_API_KEY")
        .args(["hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "sandcrab: LLM provider not configured: set ANTHROPIC_API_KEY (or choose another provider with --provider)"
    );
    assert!(server.requests().is_empty());
    // Authentication failure.
    server.push(Reply::json(
        401,
        error_body(ProviderKind::Anthropic, 401, "invalid x-api-key"),
    ));
    let out = sandcrab(&scene, ProviderKind::Anthropic, &server, "run")
        .args(["hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.trim().lines().last().unwrap();
    assert_eq!(
        last,
        "error: anthropic: authentication failed (HTTP 401): invalid x-api-key"
    );
    // Said once, not twice.
    assert_eq!(stderr.matches("invalid x-api-key").count(), 1, "{stderr}");
    // A bad flag.
    let out = sandcrab(&scene, ProviderKind::Anthropic, &server, "run")
        .args(["--max-turns", "lots", "hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-turns"));
    let out = Command::new(env!("CARGO_BIN_EXE_sandcrab"))
        .args(["run", "--provider", "bogus", "hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown provider 'bogus'"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_never_printed() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    server.push(stream(ProviderKind::Gemini, &Answer::Text(vec!["ok"])));
    let out = sandcrab(&scene, ProviderKind::Gemini, &server, "run")
        .args(["-vvv", "--json", "hi"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("sk-test-secret-4242"));
    assert_eq!(
        server.requests()[0].headers["x-goog-api-key"],
        "sk-test-secret-4242",
        "but it is sent to the provider"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_reports_back_in_a_later_turn() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::Anthropic;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "sleep 2 && echo done", "run_in_background": true}),
        )]),
    ));
    server.push(stream(
        kind,
        &Answer::Text(vec!["Started it; I'll keep going."]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["The job printed done."])));
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["--json", "start the slow command"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let started: Value = serde_json::from_str(&tool_result(kind, &reqs[1], "c1", "shell")).unwrap();
    assert_eq!(
        (started["mode"].as_str(), started["status"].as_str()),
        (Some("background"), Some("running"))
    );
    let job_id = started["job_id"].as_str().unwrap();
    assert!(
        reqs[1].at - reqs[0].at < std::time::Duration::from_millis(1500),
        "the job id came back at once"
    );
    let third = reqs[2].body.to_string();
    assert!(
        third.contains(&format!("[job {job_id} shell completed]")),
        "{third}"
    );
    assert!(third.contains("done\\n[exit code 0"), "{third}");

    let events = events(&out.stdout);
    let k = kinds(&events);
    let started_at = k
        .iter()
        .position(|x| *x == "JOB_STARTED")
        .expect("JOB_STARTED");
    let finished_at = k
        .iter()
        .position(|x| *x == "JOB_FINISHED")
        .expect("JOB_FINISHED");
    assert!(started_at < finished_at);
    assert_eq!(events[finished_at]["data"]["job_id"], job_id);
    assert_eq!(events[finished_at]["data"]["status"], "completed");
    assert_eq!(k[k.len() - 2..], ["SESSION_END", "RESULT"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_chat_interrupts_the_turn_not_the_program() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::OpenAi;
    // A slow answer: one SSE line every 200 ms.
    let slow = stream(kind, &Answer::Text(vec!["a", "b", "c"]));
    let chunks: Vec<bytes::Bytes> = slow.chunks[0]
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    server.push(Reply { chunks, ..slow }.delayed(std::time::Duration::from_millis(200)));
    server.push(stream(kind, &Answer::Text(vec!["second answer"])));
    // A scripted chat: nobody at the terminal answers approvals.
    let mut child = sandcrab(&scene, kind, &server, "chat")
        .args(["--json", "--approvals", "never"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "take your time").unwrap();
    let started = std::time::Instant::now();
    while server.requests().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no request arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    writeln!(stdin, "are you still there?").unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the program survived Ctrl-C: {stderr}"
    );
    assert!(stderr.contains("(interrupted)"), "{stderr}");
    let events = events(&out.stdout);
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "PROCESSING_END")
        .collect();
    assert_eq!(ends.len(), 2, "both inputs were processed");
    assert_eq!(ends[0]["data"]["interrupted"], true);
    assert_eq!(ends[1]["data"]["interrupted"], false);
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "ASSISTANT_TEXT_END" && e["data"]["text"] == "second answer")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_lists_and_cancels_background_jobs() {
    use std::io::BufRead;
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::Anthropic;
    let marker = format!("sleep 30.{}", std::process::id());
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": marker, "run_in_background": true}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["Started."])));
    server.push(stream(
        kind,
        &Answer::Text(vec!["Noted: it was cancelled."]),
    ));
    // A scripted chat: nobody at the terminal answers approvals.
    let mut child = sandcrab(&scene, kind, &server, "chat")
        .args(["--json", "--approvals", "never"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "start a long job").unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let job_id = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "chat ended early: {seen:?}"
        );
        let event: Value = serde_json::from_str(&line).unwrap();
        seen.push(event["kind"].as_str().unwrap().to_string());
        if event["kind"] == "JOB_STARTED" {
            break event["data"]["job_id"].as_str().unwrap().to_string();
        }
    };
    // Wait for the turn to end before typing commands.
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
        if serde_json::from_str::<Value>(&line).unwrap()["kind"] == "PROCESSING_END" {
            break;
        }
    }
    writeln!(stdin, "/jobs").unwrap();
    writeln!(stdin, "/cancel {job_id}").unwrap();
    let finished = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["kind"] == "JOB_FINISHED" {
            break event;
        }
    };
    assert_eq!(finished["data"]["status"], "cancelled");
    assert!(gone_soon(&marker), "cancelling killed the command");
    writeln!(stdin, "/jobs all").unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{job_id}  running")),
        "/jobs lists it: {stderr}"
    );
    assert!(
        stderr.contains(&format!("job {job_id} is now pending_cancel")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{job_id}  cancelled")),
        "/jobs all shows the end: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_file_sets_provider_base_url_model_and_retries() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    scene.write_user_config(&format!(
        "provider = \"openai-compatible\"\n[providers.openai-compatible]\nbase_url = \"{}/v1\"\nmodel = \"local-model\"\n[llm]\nmax_retries = 0\n",
        server.base_url()
    ));
    server.push(Reply::json(
        500,
        error_body(ProviderKind::OpenAiCompatible, 500, "down"),
    ));
    let out = crate::support::sandcrab_cmd(&scene)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .args(["run", "-w"])
        .arg(scene.workspace())
        .arg("hi")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server error (HTTP 500): down"), "{stderr}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "max_retries = 0 means no retry");
    assert_eq!(reqs[0].path_and_query, "/v1/chat/completions");
    assert_eq!(reqs[0].body["model"], "local-model");
}

/// A provider on loopback that answers a small request with `first` (an
/// SSE body) and, for a request over 1 MiB, reads only its headers,
/// answers 413 and closes the connection while the client is still sending
/// the body, as a server or proxy with a body limit does. Its address.
fn provider_closing_on_large_bodies(first: Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            let (mut request_line, mut length) = (String::new(), 0usize);
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            if length > 1 << 20 {
                // Refuse it without reading it, as a body limit does: the
                // answer, the end of sending (FIN), then closing with the
                // body unread, which resets the connection.
                let mut stream = reader.into_inner();
                let _ = stream.write_all(
                    b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                let _ = stream.shutdown(std::net::Shutdown::Write);
                std::thread::sleep(std::time::Duration::from_millis(200));
                drop(stream);
                continue;
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let mut stream = reader.into_inner();
            if !request_line.starts_with("POST") {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                continue;
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            );
            let _ = stream.write_all(&first);
        }
    });
    format!("http://{addr}")
}

/// The provider cuts the connection while a large request is still being
/// sent (a body limit, a proxy). The host says so and ends with an error
/// of its own; before, the write to the closed socket raised SIGPIPE,
/// which killed sandcrab without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_closing_mid_upload_is_an_error_not_a_silent_death() {
    let kind = ProviderKind::OpenAiCompatible;
    let scene = Scene::new();
    // A window that takes the whole upload (a smaller one would cut the
    // huge argument out of the request, which then is not large).
    scene.write_user_config("[providers.openai-compatible]\ncontext_window = 10000000\n");
    let huge = "x".repeat(12 << 20);
    let first: Vec<u8> = stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "write_file",
            json!({"file_path": "big.txt", "content": huge}),
        )]),
    )
    .chunks
    .iter()
    .flat_map(|c| c.to_vec())
    .collect();
    let base_url = provider_closing_on_large_bodies(first);
    let out = crate::support::sandcrab_cmd(&scene)
        .env(kind.key_vars()[0], "sk-test-secret-4242")
        .args(["run", "--provider", kind.id(), "--model", "test-model"])
        .args(["--base-url", &base_url, "-w"])
        .arg(scene.workspace())
        .arg("fill big.txt")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "sandcrab was killed by a signal ({:?}); stderr:\n{stderr}",
        out.status
    );
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("openai-compatible"), "{stderr}");
}

/// When the reader of sandcrab's output goes away (`sandcrab … | true`),
/// it ends as other Unix tools do: by SIGPIPE, without a panic or a word.
#[test]
fn a_reader_that_goes_away_ends_sandcrab_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let scene = Scene::new();
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe(2).
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fresh descriptors we own; the reading end is closed at once.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end);
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["plugins", "list"])
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Output that cannot be written (a full disk) is an error with a non-zero
/// status, not a success with nothing written.
#[test]
fn output_that_cannot_be_written_is_an_error() {
    let scene = Scene::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["plugins", "list"])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
}

/// A shell call that moves to the background (it took longer than
/// `background_after_ms`) runs to its own long limit: it is not stopped at
/// the short default meant for a call somebody waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_call_moved_to_the_background_runs_past_the_short_default() {
    let scene = Scene::new();
    scene.write_user_config("[jobs]\nbackground_after_ms = 300\n");
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "sleep 10.5; echo finished-after-the-default"}),
        )]),
    ));
    server.push(stream(
        kind,
        &Answer::Text(vec!["It runs in the background."]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["It is done."])));
    let out = sandcrab(&scene, kind, &server, "run")
        .arg("Wait for it.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let reqs = server.requests();
    let first: Value = serde_json::from_str(&tool_result(kind, &reqs[1], "c1", "shell")).unwrap();
    assert_eq!(first["mode"], "background", "it moved: {first}");
    let later = serde_json::to_string(&reqs.last().unwrap().body).unwrap();
    assert!(later.contains("finished-after-the-default"), "{later}");
    assert!(!later.contains("timed out"), "{later}");
}
