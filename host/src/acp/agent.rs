//! The agent side of the protocol: the read loop, the methods, and what
//! happens when the editor goes away. Sessions are in [`super::driven`],
//! questions to the editor in [`super::asking`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{Mutex, Semaphore, oneshot};

use super::driven::Driven;
use super::wire::{Incoming, Outbox, code};
use crate::agent::AgentKit;
use crate::approvals::PermissionQueue;

/// The protocol version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

/// Requests handled at once; the next is read when one ends (a client
/// that sends without end slows down, it does not pile up work).
const IN_FLIGHT: usize = 32;

/// Sessions one editor may keep open at once.
pub(super) const MAX_SESSIONS: usize = 64;

/// Where sessions come from: one kit per workspace (the CLI builds them
/// as `chat` would, with `queue` as the operator's channel).
#[async_trait::async_trait]
pub trait Kits: Send + Sync {
    async fn kit(
        &self,
        workspace: &Path,
        queue: Arc<PermissionQueue>,
    ) -> anyhow::Result<Arc<AgentKit>>;
}

/// An error a method answers with.
pub(super) struct Failure {
    pub code: i64,
    pub message: String,
}

pub(super) fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        code: code::INVALID_PARAMS,
        message: message.into(),
    }
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Self {
        Failure {
            code: code::INTERNAL,
            message: format!("{err:#}"),
        }
    }
}

/// The agent: its sessions, kits and the questions it waits on.
pub(super) struct Agent {
    pub out: Outbox,
    pub kits: Box<dyn Kits>,
    pub queue: Arc<PermissionQueue>,
    /// A kit per workspace (its canonical path).
    pub built: Mutex<HashMap<PathBuf, Arc<AgentKit>>>,
    pub sessions: Mutex<HashMap<String, Arc<Driven>>>,
    /// Questions put to the editor, by their JSON-RPC id.
    pub asked: std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>,
    pub next_id: AtomicU64,
}

/// Serve ACP on `input`/`output` until the client closes its end; then
/// every session ends (saved, its programs stopped).
pub async fn serve<R, W>(input: R, output: W, kits: Box<dyn Kits>) -> anyhow::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, writer) = Outbox::new(output);
    let agent = Arc::new(Agent {
        out,
        kits,
        queue: PermissionQueue::new(std::time::Duration::from_secs(1800)),
        built: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
        asked: std::sync::Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
    });
    let asking = tokio::spawn(agent.clone().ask_editor());
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut input = input;
    loop {
        let message = match super::wire::read(&mut input).await {
            Ok(Some(message)) => message,
            Ok(None) | Err(_) => break,
        };
        match message {
            Err(bad) => {
                agent.out.error(bad.id, bad.code, &bad.message).await;
            }
            Ok(Incoming::Response { id, outcome }) => agent.answered(&id, outcome),
            Ok(Incoming::Notification { method, params }) => {
                if method == "session/cancel" {
                    agent.cancel(&params).await;
                }
            }
            Ok(Incoming::Request { id, method, params }) => {
                // A prompt is claimed here, in the order read, so a cancel
                // read after it finds it.
                let claimed = if method == "session/prompt" {
                    match agent.claim_prompt(&params).await {
                        Ok(claimed) => Some(claimed),
                        Err(f) => {
                            agent.out.error(id, f.code, &f.message).await;
                            continue;
                        }
                    }
                } else {
                    None
                };
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let agent = agent.clone();
                tokio::spawn(async move {
                    let outcome = match claimed {
                        Some(claimed) => agent.prompt(claimed, &params).await,
                        None => agent.handle(&method, &params).await,
                    };
                    match outcome {
                        Ok(result) => {
                            let opened = opened_session(&method, &params, &result);
                            agent.out.result(id, result).await;
                            if let Some(session) = opened {
                                agent.after_open(&session).await;
                            }
                        }
                        Err(f) => {
                            agent.out.error(id, f.code, &f.message).await;
                        }
                    }
                    drop(permit);
                });
            }
        }
    }
    // The editor is gone: every session ends as the terminal's would —
    // what runs is stopped first, then nothing it was asked can be
    // answered (a denial), then the session is saved and closed.
    let sessions: Vec<Arc<Driven>> = agent
        .sessions
        .lock()
        .await
        .drain()
        .map(|(_, d)| d)
        .collect();
    for driven in &sessions {
        driven.session.interrupt();
    }
    asking.abort();
    if let Ok(mut asked) = agent.asked.lock() {
        asked.clear();
    }
    for driven in sessions {
        driven.session.end(crate::agent::EndReason::Completed).await;
    }
    drop(agent);
    let _ = writer.await;
    Ok(())
}

/// The session a successful `session/new` or `session/load` opened.
fn opened_session(method: &str, params: &Value, result: &Value) -> Option<String> {
    let id = match method {
        "session/new" => result["sessionId"].as_str(),
        "session/load" => params["sessionId"].as_str(),
        _ => None,
    };
    id.map(str::to_string)
}

impl Agent {
    async fn handle(self: &Arc<Self>, method: &str, params: &Value) -> Result<Value, Failure> {
        match method {
            "initialize" => Ok(initialize(params)),
            "authenticate" => Ok(json!({})),
            "session/new" => self.new_session(params).await,
            "session/load" => self.load_session(params).await,
            "session/list" => self.list_sessions(params).await,
            "session/set_mode" => self.set_mode(params).await,
            _ => Err(Failure {
                code: code::METHOD_NOT_FOUND,
                message: format!("sandcrab does not implement the ACP method '{method}'"),
            }),
        }
    }

    /// Send an update for `session_id` now (outside its stream).
    pub(super) async fn update(&self, session_id: &str, update: Value) {
        self.out.send(notification(session_id, update)).await;
    }
}

/// A `session/update` notification.
pub(super) fn notification(session_id: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})
}

/// What `initialize` answers: the protocol version both speak and what
/// this agent can do.
fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"]
        .as_u64()
        .unwrap_or(PROTOCOL_VERSION);
    json!({
        "protocolVersion": asked.min(PROTOCOL_VERSION),
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false},
            "sessionCapabilities": {"list": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "sandcrab", "title": "sandcrab", "version": env!("CARGO_PKG_VERSION")},
    })
}
