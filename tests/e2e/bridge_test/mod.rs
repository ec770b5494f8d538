//! The lifecycle harness through its HTTP bridge: `sandcrab serve` as a
//! process on a free port, driven with real HTTP, one test per scenario of
//! the agent-lifecycle seed (history and clear assert the persistent
//! behaviour), then the bridge's guards, reconnection, the OpenAPI document
//! and the `sandcrab agent` client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::support::{Scene, sandcrab_cmd};

pub(crate) const KIND: ProviderKind = ProviderKind::OpenAiCompatible;
const KEY: &str = "sk-test-secret-4242";

/// A running `sandcrab serve`.
pub(crate) struct Bridge {
    pub(crate) child: Child,
    pub(crate) url: String,
    token: String,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the bridge: with `provider`, against that loopback server (with a
/// key); without, no key at all (the stub provider). With `workspace`, on
/// the scene's workspace; without, none is open.
fn bridge(scene: &Scene, provider: Option<&MockLlm>, workspace: bool) -> Bridge {
    bridge_with(scene, provider, workspace, &[])
}

/// Like [`bridge`], with more `serve` arguments.
fn bridge_with(
    scene: &Scene,
    provider: Option<&MockLlm>,
    workspace: bool,
    extra: &[&str],
) -> Bridge {
    bridge_named(scene, provider, workspace, "serve", extra, &[])
}

/// Like [`bridge_with`], its token in `NAME.token` (several bridges in
/// one scene).
pub(crate) fn bridge_named(
    scene: &Scene,
    provider: Option<&MockLlm>,
    workspace: bool,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Bridge {
    let token_file = scene.root.path().join(format!("{name}.token"));
    let mut cmd = sandcrab_cmd(scene);
    cmd.args(["serve", "--port", "0", "--token-file"])
        .arg(&token_file)
        .args(extra)
        .envs(env.iter().copied());
    if workspace {
        cmd.arg("-w").arg(scene.workspace());
    } else {
        // No workspace open; a client may initialize the scene's.
        cmd.arg("--allow-workspace").arg(scene.workspace());
    }
    if let Some(server) = provider {
        cmd.env(KIND.key_vars()[0], KEY)
            .args([
                "--provider",
                KIND.id(),
                "--model",
                "test-model",
                "--base-url",
            ])
            .arg(server.base_url());
    }
    let (child, url, stderr) =
        spawn_serve(cmd).unwrap_or_else(|err| panic!("the bridge did not start: {err}"));
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    Bridge {
        child,
        url,
        token,
        stderr,
        http: reqwest::Client::new(),
    }
}

/// Start `cmd` (a `sandcrab serve`) and wait for the address it listens
/// on; the child, its URL and its stderr as it comes (or, if it never
/// listens, what it printed).
pub(crate) fn spawn_serve(
    mut cmd: std::process::Command,
) -> Result<(Child, String, Arc<Mutex<String>>), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = stderr.clone();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let _ = tx.send(
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(url) => Ok((child, url, stderr)),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
            Err(stderr.lock().unwrap().clone())
        }
    }
}

impl Bridge {
    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.url);
        let request = match method {
            "GET" => self.http.get(url),
            _ => self.http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let response = request.bearer_auth(&self.token).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Drop the kept connections: the next request opens a new one (as a
    /// client does after a long pause, when the server may be closing
    /// the old one at the very moment it is reused).
    pub(crate) fn reconnect(&mut self) {
        self.http = reqwest::Client::new();
    }

    pub(crate) async fn post(&self, path: &str) -> (u16, Value) {
        self.call("POST", path, None).await
    }

    pub(crate) async fn status(&self) -> Value {
        let (code, body) = self.call("GET", "/agent/status", None).await;
        assert_eq!(code, 200, "{body}");
        body
    }

    pub(crate) async fn send(&self, message: &str) -> (u16, Value) {
        self.call("POST", "/agent/messages", Some(json!({"message": message})))
            .await
    }

    /// Follow `/events` (after `last`, if given) into a shared list;
    /// returns once the stream is open (nothing published later is missed).
    pub(crate) async fn follow(&self, last: Option<u64>) -> Events {
        let events = Events::default();
        let sink = events.clone();
        let mut request = self
            .http
            .get(format!("{}/events", self.url))
            .bearer_auth(&self.token);
        if let Some(id) = last {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let task = tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    let mut e = (0u64, String::new(), Value::Null);
                    for line in frame.lines() {
                        match line.split_once(':') {
                            Some(("id", v)) => e.0 = v.trim().parse().unwrap(),
                            Some(("event", v)) => e.1 = v.trim().to_string(),
                            Some(("data", v)) => e.2 = serde_json::from_str(v.trim()).unwrap(),
                            _ => {}
                        }
                    }
                    if !e.1.is_empty() {
                        sink.list.lock().unwrap().push(e);
                        sink.arrived.lock().unwrap().push(Instant::now());
                    }
                }
            }
        });
        *events.task.lock().unwrap() = Some(task);
        events
    }
}

#[derive(Clone, Default)]
pub(crate) struct Events {
    pub(crate) list: Arc<Mutex<Vec<(u64, String, Value)>>>,
    /// When each event of `list` arrived.
    pub(crate) arrived: Arc<Mutex<Vec<Instant>>>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Events {
    pub(crate) fn names(&self) -> Vec<String> {
        self.list
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.1.clone())
            .collect()
    }

    pub(crate) fn ids(&self) -> Vec<u64> {
        self.list.lock().unwrap().iter().map(|e| e.0).collect()
    }

    pub(crate) async fn wait_for(&self, name: &str) -> (u64, String, Value) {
        self.wait_for_nth(name, 0).await
    }

    /// The `n`th event called `name` (from 0), once it came.
    pub(crate) async fn wait_for_nth(&self, name: &str, n: usize) -> (u64, String, Value) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(e) = self
                .list
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e.1 == name)
                .nth(n)
            {
                return e.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {name} event; got {:?}",
                self.names()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap().take() {
            task.abort();
        }
    }
}

fn stopped() -> Value {
    json!({"lifecycle": "Stopped", "is_streaming": false})
}

fn running(streaming: bool) -> Value {
    json!({"lifecycle": "Running", "is_streaming": streaming})
}

/// A reply that streams `n` one-character chunks, one SSE event per
/// network write, `gap` apart.
fn slow(n: usize, gap: Duration) -> Reply {
    let chunks: Vec<&'static str> = std::iter::repeat_n("x", n).collect();
    let mut reply = stream(KIND, &Answer::Text(chunks));
    let all: Vec<u8> = reply.chunks.iter().flat_map(|c| c.to_vec()).collect();
    let text = String::from_utf8(all).unwrap();
    reply.chunks = text
        .split_inclusive("\n\n")
        .map(|frame| bytes::Bytes::from(frame.to_string()))
        .collect();
    reply.delayed(gap)
}

mod asking;
mod guards;
mod lifecycle;
