//! The ACP methods: `initialize`, `authenticate`, `session/new`,
//! `session/load`, `session/list`, `session/prompt`, `session/set_mode`,
//! `session/cancel`;
//! anything else is answered "method not found" (a notification is
//! ignored, as JSON-RPC says).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_stream::StreamExt;

use super::updates::Next;
use super::wire::{Incoming, Outbox, code};
use crate::agent::{AgentKit, EventData, Session, SessionError};
use crate::approvals::{Mode, PermissionQueue, QueueEvent};

/// The protocol version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

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
struct Failure {
    code: i64,
    message: String,
}

fn invalid(message: impl Into<String>) -> Failure {
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

/// One session the editor drives.
struct Driven {
    session: Arc<Session>,
    /// Inputs whose events were all sent.
    /// Asks the forwarder to say when every update so far went out.
    flush: mpsc::Sender<oneshot::Sender<()>>,
    cancelled: AtomicBool,
}

/// The agent: its sessions, kits and the requests it waits on.
struct Agent {
    out: Outbox,
    kits: Box<dyn Kits>,
    queue: Arc<PermissionQueue>,
    built: Mutex<HashMap<PathBuf, Arc<AgentKit>>>,
    sessions: Mutex<HashMap<String, Arc<Driven>>>,
    /// The session the editor last prompted (or opened).
    latest: Mutex<Option<String>>,
    asked: std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>,
    next_id: AtomicU64,
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
        latest: Mutex::new(None),
        asked: std::sync::Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
    });
    let asking = tokio::spawn(agent.clone().ask_editor());
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
                let agent = agent.clone();
                tokio::spawn(async move {
                    match agent.handle(&method, params).await {
                        Ok(result) => agent.out.result(id, result).await,
                        Err(f) => agent.out.error(id, f.code, &f.message).await,
                    };
                });
            }
        }
    }
    // The editor is gone: nothing it was asked can be answered, and every
    // session ends as the terminal's would.
    asking.abort();
    agent.asked.lock().map(|mut a| a.clear()).ok();
    let sessions: Vec<Arc<Driven>> = agent
        .sessions
        .lock()
        .await
        .drain()
        .map(|(_, d)| d)
        .collect();
    for driven in sessions {
        driven.session.interrupt();
        driven.session.end(crate::agent::EndReason::Completed).await;
    }
    drop(agent);
    let _ = writer.await;
    Ok(())
}

impl Agent {
    async fn handle(self: &Arc<Self>, method: &str, params: Value) -> Result<Value, Failure> {
        match method {
            "initialize" => Ok(initialize(&params)),
            "authenticate" => Ok(json!({})),
            "session/new" => self.new_session(&params).await,
            "session/load" => self.load_session(&params).await,
            "session/list" => self.list_sessions(&params).await,
            "session/prompt" => self.prompt(&params).await,
            "session/set_mode" => self.set_mode(&params).await,
            _ => Err(Failure {
                code: code::METHOD_NOT_FOUND,
                message: format!("sandcrab does not implement the ACP method '{method}'"),
            }),
        }
    }

    /// The kit for `cwd` (an absolute path, as ACP requires).
    async fn kit(&self, params: &Value) -> Result<Arc<AgentKit>, Failure> {
        let cwd = params["cwd"]
            .as_str()
            .ok_or_else(|| invalid("cwd is missing: give the workspace's absolute path"))?;
        let cwd = PathBuf::from(cwd);
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(invalid(format!(
                "cwd '{}' is not an absolute path of a directory",
                cwd.display()
            )));
        }
        let mut built = self.built.lock().await;
        if let Some(kit) = built.get(&cwd) {
            return Ok(kit.clone());
        }
        let kit = self.kits.kit(&cwd, self.queue.clone()).await?;
        built.insert(cwd, kit.clone());
        Ok(kit)
    }

    async fn new_session(self: &Arc<Self>, params: &Value) -> Result<Value, Failure> {
        let kit = self.kit(params).await?;
        let session = kit.session().await;
        let id = session.id().to_string();
        let modes = modes(&session);
        self.drive(session, params).await;
        Ok(json!({"sessionId": id, "modes": modes}))
    }

    async fn load_session(self: &Arc<Self>, params: &Value) -> Result<Value, Failure> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| invalid("sessionId is missing"))?;
        let kit = self.kit(params).await?;
        let session = kit.resume(id).await.map_err(|e| Failure {
            code: code::NOT_FOUND,
            message: e.to_string(),
        })?;
        for update in super::updates::for_history(&session.history()) {
            self.update(session.id(), update).await;
        }
        let modes = modes(&session);
        self.drive(session, params).await;
        Ok(json!({"modes": modes}))
    }

    async fn list_sessions(&self, params: &Value) -> Result<Value, Failure> {
        let kit = self.kit(params).await?;
        let Some(store) = &kit.store else {
            return Ok(json!({"sessions": []}));
        };
        let workspace = kit.workspace.display().to_string();
        let records = store
            .sessions(Some(&workspace))
            .map_err(|e| Failure::from(anyhow::Error::from(e)))?;
        let sessions: Vec<Value> = records
            .iter()
            .map(|r| {
                json!({"sessionId": r.id, "cwd": r.workspace, "title": r.title, "updatedAt": r.updated_at})
            })
            .collect();
        Ok(json!({"sessions": sessions}))
    }

    /// Keep `session` for prompts, and send what it shows as updates;
    /// tell the editor the slash commands it takes.
    async fn drive(self: &Arc<Self>, session: Arc<Session>, params: &Value) {
        if params["mcpServers"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
        {
            session.warn(
                "the editor's MCP servers are not started: sandcrab runs MCP servers only from [mcp.servers] in its own configuration, where they are confined and their calls approved (see docs/bridge-and-mcp.md)",
            );
        }
        let (flush, flushes) = mpsc::channel(4);
        let driven = Arc::new(Driven {
            session: session.clone(),
            flush,
            cancelled: AtomicBool::new(false),
        });
        let id = session.id().to_string();
        self.sessions.lock().await.insert(id.clone(), driven);
        let agent = self.clone();
        self.update(
            &id,
            json!({"sessionUpdate": "available_commands_update", "availableCommands": super::commands::advertised()}),
        )
        .await;
        *self.latest.lock().await = Some(id.clone());
        let events = session.events();
        let workspace = session.workspace().to_path_buf();
        tokio::spawn(async move { agent.forward(&id, events, &workspace, flushes).await });
    }

    /// Send what session `id` shows, in order, draining its events all the
    /// while: an editor that does not read holds back updates, never the
    /// session's events (what it does not see is dropped as it comes, and
    /// its text waits joined into one chunk). A flush is answered once
    /// every event emitted before it was asked for went out.
    async fn forward(
        &self,
        id: &str,
        mut events: crate::agent::EventStream,
        workspace: &Path,
        mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
        use futures::FutureExt;
        let mut waiting = super::updates::Waiting::default();
        let mut barriers: HashMap<u64, oneshot::Sender<()>> = HashMap::new();
        let mut next_barrier = 0;
        let take = |waiting: &mut super::updates::Waiting, data: &EventData| {
            if let Some(update) = super::updates::for_event(data, workspace) {
                waiting.push(update);
            }
        };
        loop {
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { break };
                    take(&mut waiting, &event.data);
                }
                Some(done) = flushes.recv() => {
                    // Everything emitted so far is in the stream already.
                    while let Some(Some(event)) = events.next().now_or_never() {
                        take(&mut waiting, &event.data);
                    }
                    next_barrier += 1;
                    barriers.insert(next_barrier, done);
                    waiting.barrier(next_barrier);
                }
                permit = self.out.reserve(), if !waiting.is_empty() => {
                    let Some(permit) = permit else { break };
                    match waiting.pop() {
                        Some(Next::Update(update)) => permit.send(notification(id, update)),
                        Some(Next::Barrier(n)) => {
                            if let Some(done) = barriers.remove(&n) {
                                let _ = done.send(());
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        // The session ended: what waits still goes out.
        while let Some(next) = waiting.pop() {
            if let Next::Update(update) = next {
                self.out.send(notification(id, update)).await;
            }
        }
    }

    async fn update(&self, session_id: &str, update: Value) {
        self.out.send(notification(session_id, update)).await;
    }

    async fn driven(&self, params: &Value) -> Result<Arc<Driven>, Failure> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| invalid("sessionId is missing"))?;
        self.sessions.lock().await.get(id).cloned().ok_or(Failure {
            code: code::NOT_FOUND,
            message: format!(
                "no session {id} here: create it with session/new or load it with session/load"
            ),
        })
    }

    async fn prompt(&self, params: &Value) -> Result<Value, Failure> {
        let driven = self.driven(params).await?;
        let text = prompt_text(&params["prompt"])?;
        *self.latest.lock().await = Some(driven.session.id().to_string());
        if let Some(command) = super::commands::Command::parse(&text) {
            let said = command.run(&driven.session).await;
            self.update(
                driven.session.id(),
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}),
            )
            .await;
            return Ok(json!({"stopReason": "end_turn"}));
        }
        driven.cancelled.store(false, Ordering::SeqCst);
        let result = driven.session.submit(&text).await;
        // Every update of this input goes out before its answer.
        let (done, flushed) = oneshot::channel();
        if driven.flush.send(done).await.is_ok() {
            let _ = flushed.await;
        }
        if driven.cancelled.load(Ordering::SeqCst) {
            return Ok(json!({"stopReason": "cancelled"}));
        }
        match result {
            Ok(()) => Ok(json!({"stopReason": "end_turn"})),
            Err(SessionError::Llm(err)) => Err(Failure {
                code: code::INTERNAL,
                message: err.to_string(),
            }),
            Err(err) => Err(Failure {
                code: code::INTERNAL,
                message: err.to_string(),
            }),
        }
    }

    async fn set_mode(&self, params: &Value) -> Result<Value, Failure> {
        let driven = self.driven(params).await?;
        let id = params["modeId"].as_str().unwrap_or_default();
        let mode: Mode = id.parse().map_err(|_| {
            invalid(format!(
                "no mode '{id}': the modes are {}",
                Mode::ALL.map(Mode::as_str).join(", ")
            ))
        })?;
        driven.session.set_approval_mode(mode);
        Ok(json!({}))
    }

    async fn cancel(&self, params: &Value) {
        if let Ok(driven) = self.driven(params).await {
            driven.cancelled.store(true, Ordering::SeqCst);
            driven.session.interrupt();
        }
    }

    /// Put every call that waits for approval to the editor, one task each.
    async fn ask_editor(self: Arc<Self>) {
        let mut events = self.queue.subscribe();
        loop {
            let request = match events.recv().await {
                Ok(QueueEvent::Required(request)) => request,
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            };
            let agent = self.clone();
            tokio::spawn(async move {
                // A subagent asks under its own id, which the editor never
                // saw: the question goes to the session that is working.
                let session_id = if agent
                    .sessions
                    .lock()
                    .await
                    .contains_key(&request.session_id)
                {
                    request.session_id.clone()
                } else {
                    agent
                        .latest
                        .lock()
                        .await
                        .clone()
                        .unwrap_or_else(|| request.session_id.clone())
                };
                let params = super::permission::params(&session_id, &request);
                let outcome = agent.ask("session/request_permission", params).await;
                let answer =
                    super::permission::answer(outcome.as_ref().map_err(Clone::clone), &request);
                let _ = agent.queue.answer(&request.id, answer);
            });
        }
    }

    /// Send a request to the editor and wait for its answer (an error
    /// when it answers with one or goes away).
    async fn ask(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = format!("sandcrab-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(id.clone(), tx);
        }
        let sent = self
            .out
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        if !sent {
            return Err("the editor is gone".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the editor is gone".into()))
    }

    /// The editor answered request `id` (an answer to nothing asked, or
    /// a second answer, is dropped).
    fn answered(&self, id: &Value, outcome: Result<Value, Value>) {
        let Some(id) = id.as_str() else { return };
        let waiting = self.asked.lock().ok().and_then(|mut a| a.remove(id));
        if let Some(tx) = waiting {
            let _ = tx.send(outcome.map_err(|e| e.to_string()));
        }
    }
}

/// A `session/update` notification.
fn notification(session_id: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})
}

/// The session modes: the approvals modes, the one in force current.
fn modes(session: &Session) -> Value {
    let described = |mode: Mode| match mode {
        Mode::Never => (
            "Run what is granted",
            "Nothing asks: calls the rules and the plugins' grants allow run, in the sandbox; the rest are refused",
        ),
        Mode::OnRisk => (
            "Ask before risky calls",
            "Shell commands no rule allows, and anything beyond a plugin's grants, are asked about",
        ),
        Mode::Always => (
            "Ask before every call",
            "Every tool call no rule allows is asked about",
        ),
    };
    let available: Vec<Value> = Mode::ALL
        .iter()
        .map(|mode| {
            let (name, description) = described(*mode);
            json!({"id": mode.as_str(), "name": name, "description": description})
        })
        .collect();
    json!({"currentModeId": session.approval_mode().as_str(), "availableModes": available})
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

/// The prompt's content blocks as one input: text as it is, an embedded
/// resource's text after its URI, a link as its URI.
fn prompt_text(blocks: &Value) -> Result<String, Failure> {
    let blocks = blocks
        .as_array()
        .ok_or_else(|| invalid("prompt must be an array of content blocks"))?;
    let mut text = String::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("resource") => {
                let resource = &block["resource"];
                text.push_str(&format!(
                    "\n<file uri=\"{}\">\n{}\n</file>\n",
                    resource["uri"].as_str().unwrap_or_default(),
                    resource["text"].as_str().unwrap_or_default()
                ));
            }
            Some("resource_link") => {
                text.push_str(&format!(" {} ", block["uri"].as_str().unwrap_or_default()));
            }
            other => {
                return Err(invalid(format!(
                    "a content block of type {other:?} is not supported (sandcrab takes text, resource and resource_link)"
                )));
            }
        }
    }
    if text.trim().is_empty() {
        return Err(invalid("the prompt has no text"));
    }
    Ok(text)
}
