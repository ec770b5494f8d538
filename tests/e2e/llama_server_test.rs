//! Long sessions against a real llama.cpp server started with `-c 4096`
//! (fetched by `scripts/setup-llama-server`, which the test command runs):
//! through its OpenAI-compatible API the window is asked of the server;
//! through its Anthropic-format API it is learned from the server's own
//! refusal, kept, and the next session starts from it. Every input of a
//! conversation that outgrows the window several times answers, nothing
//! is refused after the window is known, and the session goes on.

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli_support::{events, of_kind, with_lines};
use crate::support::{Scene, sandcrab_cmd};

/// The server's window.
const WINDOW: u64 = 4096;

/// The binary and the model: from the environment, else where the setup
/// script puts them.
fn llama() -> Option<(PathBuf, PathBuf)> {
    let fetched = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/llama-server");
    let server = std::env::var_os("SANDCRAB_LLAMA_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| fetched.join("bin/llama-server"));
    let model = std::env::var_os("SANDCRAB_LLAMA_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| fetched.join("gemma-3-270m-q4_k_m.gguf"));
    if server.exists() && model.exists() {
        return Some((server, model));
    }
    assert!(
        std::env::var_os("SANDCRAB_REQUIRE_LLAMA").is_none(),
        "llama-server or its model is missing ({} / {}): run scripts/setup-llama-server",
        server.display(),
        model.display()
    );
    None
}

/// A running llama-server; stopped when dropped.
struct Llama {
    child: Child,
    port: u16,
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Llama {
    /// Start it and wait until it answers; Err when this machine's CPU
    /// cannot run the build (it died of an illegal instruction: a
    /// prebuilt llama.cpp is compiled for a CPU family).
    fn start(server: &PathBuf, model: &PathBuf) -> Result<Llama, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(server)
            .env("LD_LIBRARY_PATH", server.parent().unwrap())
            .args(["-c", &WINDOW.to_string(), "-np", "1", "-t", "2"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "-m"])
            .arg(model)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut llama = Llama { child, port };
        let started = Instant::now();
        while !llama.healthy() {
            if let Ok(Some(status)) = llama.child.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                if status.signal() == Some(libc::SIGILL) {
                    return Err(format!(
                        "{} died of an illegal instruction: it was built for CPU features this machine lacks",
                        server.display()
                    ));
                }
                panic!("llama-server ended before it answered: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "llama-server did not come up"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(llama)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn healthy(&self) -> bool {
        use std::io::Read;
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
    }
}

/// An input of about 900 tokens.
fn input(n: usize) -> String {
    format!(
        "Turn {n}: the code word is FACT-{n:02}. {}",
        "Some context about the task at hand, to be weighed. ".repeat(50)
    )
}

/// `sandcrab chat --json` as `provider` against `llama`, with `inputs`.
fn chat(scene: &Scene, llama: &Llama, provider: &str, extra: &[&str], inputs: &[String]) -> Output {
    let mut cmd = sandcrab_cmd(scene);
    cmd.env("ANTHROPIC_API_KEY", "sk-local")
        .args([
            "chat",
            "--json",
            "--approvals",
            "never",
            "--provider",
            provider,
        ])
        .args(["--model", "gemma-3-270m", "--base-url"])
        .arg(llama.url())
        .arg("-w")
        .arg(scene.workspace())
        .args(extra);
    with_lines(cmd, inputs)
}

/// Every input answered, nothing refused, the window known and the
/// conversation compacted; the events.
fn answered_all(out: &Output, inputs: usize, what: &str) -> Vec<Value> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stderr}");
    let all = events(&out.stdout);
    assert!(of_kind(&all, "ERROR").is_empty(), "{what}: {stderr}");
    let ends = of_kind(&all, "PROCESSING_END");
    assert_eq!(ends.len(), inputs, "{what}: {stderr}");
    let last = &ends[ends.len() - 1]["data"];
    assert_eq!(last["context_window"], WINDOW, "{what}: {last}");
    let largest = last["largest_request"].as_u64().unwrap();
    assert!(largest <= WINDOW, "{what}: {last}");
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_llama_server_with_4096_tokens_carries_a_long_conversation() {
    let Some((server, model)) = llama() else {
        eprintln!("skipped: no llama-server here (scripts/setup-llama-server fetches one)");
        return;
    };
    let llama = match Llama::start(&server, &model) {
        Ok(llama) => llama,
        // Not this code's failure, and no model of ours can stand in for
        // it: said loudly, not failed (scripts/setup-llama-server builds
        // one from source where it can).
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let scene = Scene::new();
    // A base model rambles: short answers and summaries keep it quick.
    scene.write_user_config(
        "[providers.openai-compatible]\nmax_tokens = 24\n\
         [providers.anthropic]\nmax_tokens = 24\n\
         [summarization]\nmax_summary_tokens = 48\n",
    );
    let inputs: Vec<String> = (1..=6).map(input).collect();

    // Chat Completions: the server is asked its window.
    let out = chat(&scene, &llama, "openai-compatible", &[], &inputs);
    let all = answered_all(&out, inputs.len(), "openai-compatible");
    let start = &of_kind(&all, "SESSION_START")[0]["data"];
    assert_eq!(start["context_window"], WINDOW, "{start}");
    assert_eq!(start["window_source"], "server", "{start}");
    assert!(!of_kind(&all, "COMPACTION_END").is_empty());
    let largest = |all: &[Value]| {
        of_kind(all, "PROCESSING_END").last().unwrap()["data"]["largest_request"].clone()
    };
    eprintln!(
        "openai-compatible: window {} (server), {} compactions, largest request {}",
        start["context_window"],
        of_kind(&all, "COMPACTION_END").len(),
        largest(&all)
    );

    // Anthropic Messages: nothing to ask, so the first request the window
    // cannot hold is refused by the server, in its words; the window is
    // learned from them and the input answered all the same.
    let scene = Scene::new();
    scene.write_user_config(
        "[providers.anthropic]\nmax_tokens = 24\n[summarization]\nmax_summary_tokens = 48\n",
    );
    let out = chat(&scene, &llama, "anthropic", &[], &inputs[..4]);
    let all = answered_all(&out, 4, "anthropic");
    let notices = of_kind(&all, "NOTICE");
    assert!(
        notices.iter().any(|n| n["data"]["text"]
            .as_str()
            .unwrap()
            .contains("context window is 4096 tokens")),
        "{notices:#?}"
    );
    eprintln!(
        "anthropic: window learned {}, {} compactions, largest request {}",
        of_kind(&all, "PROCESSING_END").last().unwrap()["data"]["context_window"],
        of_kind(&all, "COMPACTION_END").len(),
        largest(&all)
    );

    // The next session starts from what was learned, and goes on.
    let out = chat(&scene, &llama, "anthropic", &["--continue"], &[input(5)]);
    let all = answered_all(&out, 1, "anthropic, continued");
    let start = &of_kind(&all, "SESSION_START")[0]["data"];
    assert_eq!(start["window_source"], "learned", "{start}");
    assert!(of_kind(&all, "NOTICE").is_empty(), "refused again");
}
