//! `sandcrab chat` while it starts (plugins loading, MCP servers starting):
//! Ctrl-C quits cleanly with a message instead of killing the process, and
//! what was typed meanwhile is the first prompt's input, not lost.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;

use crate::cli_support::sandcrab;
use crate::llm_transcripts::{Answer, stream};
use crate::mock_llm::MockLlm;
use crate::support::Scene;

/// A chat whose start waits on an MCP server that never answers (for
/// `startup_timeout_ms`).
fn slow_start(scene: &Scene, startup_timeout_ms: u64) {
    scene.write_user_config(&format!(
        "[mcp.servers.slow]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_ms = {startup_timeout_ms}\n"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_before_the_first_prompt_quits_cleanly_with_a_message() {
    let scene = Scene::new();
    slow_start(&scene, 30_000);
    let server = MockLlm::start().await;
    let mut child = sandcrab(&scene, ProviderKind::Anthropic, &server, "chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Well inside the start (the MCP server holds it for 30 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(child.try_wait().unwrap().is_none(), "still starting");
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(10), "it quit promptly");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted while starting; nothing was sent"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_typed_while_chat_starts_is_the_first_prompts_input() {
    let scene = Scene::new();
    slow_start(&scene, 2_000);
    let server = MockLlm::start().await;
    let kind = ProviderKind::Anthropic;
    server.push(stream(kind, &Answer::Text(vec!["Hello back."])));
    let mut child = sandcrab(&scene, kind, &server, "chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Typed at once, long before the first prompt.
    writeln!(stdin, "typed while starting").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        server.requests().is_empty(),
        "not sent before the start ends"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{stderr}");
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("typed while starting"),
        "{}",
        requests[0].body
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hello back."));
}
