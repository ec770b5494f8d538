//! The sessions an editor drives: opening one (new, or loaded from the
//! store with its history shown again), sending what it shows, prompting
//! it, switching its mode, cancelling its turn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt;

use super::agent::{Agent, Failure, MAX_SESSIONS, invalid, notification};
use super::updates::Next;
use super::wire::code;
use crate::agent::{AgentKit, EventData, Session, SessionError};
use crate::approvals::Mode;

/// One session the editor drives.
pub(super) struct Driven {
    pub session: Arc<Session>,
    /// The MCP servers of its kit (their prompts are slash commands).
    mcp: crate::mcp::McpServers,
    /// Asks the forwarder to say when every update so far went out.
    flush: mpsc::Sender<oneshot::Sender<()>>,
    /// A prompt is being answered (one at a time).
    busy: AtomicBool,
}

/// A prompt's session, claimed as the prompt was read, and what stops the
/// prompt (taken then: a cancel read after it reaches it, however long it
/// waits for its turn).
pub(super) struct Claimed {
    driven: Arc<Driven>,
    stop: tokio_util::sync::CancellationToken,
}

impl Driven {
    /// Wait until every update the session showed so far went out.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.flush.send(done).await.is_ok() {
            let _ = flushed.await;
        }
    }
}

impl Agent {
    /// The kit for the `cwd` of `params` (an absolute path of a folder,
    /// as ACP requires; symlinks and `..` resolved, so one folder is one
    /// workspace however it is named).
    async fn kit(&self, params: &Value) -> Result<Arc<AgentKit>, Failure> {
        let given = params["cwd"]
            .as_str()
            .ok_or_else(|| invalid("cwd is missing: give the workspace's absolute path"))?;
        let path = PathBuf::from(given);
        let cwd = path
            .is_absolute()
            .then(|| std::fs::canonicalize(&path).ok())
            .flatten()
            .filter(|p| p.is_dir())
            .ok_or_else(|| invalid(format!("cwd '{given}' is not an absolute path of a folder")))?;
        let mut built = self.built.lock().await;
        if let Some(kit) = built.get(&cwd) {
            return Ok(kit.clone());
        }
        let kit = self.kits.kit(&cwd, self.queue.clone()).await?;
        built.insert(cwd, kit.clone());
        Ok(kit)
    }

    pub(super) async fn new_session(self: &Arc<Self>, params: &Value) -> Result<Value, Failure> {
        self.room_for_a_session().await?;
        let kit = self.kit(params).await?;
        let session = kit.session().await;
        let id = session.id().to_string();
        let modes = modes(&session);
        self.drive(session, kit.mcp.clone(), params).await;
        Ok(json!({"sessionId": id, "modes": modes}))
    }

    /// Open a stored session by its exact id, its history shown again
    /// first; one already open is shown again, not opened twice.
    pub(super) async fn load_session(self: &Arc<Self>, params: &Value) -> Result<Value, Failure> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| invalid("sessionId is missing"))?;
        let open = self.sessions.lock().await.get(id).cloned();
        let (session, mcp) = match &open {
            Some(driven) => (driven.session.clone(), driven.mcp.clone()),
            None => {
                self.room_for_a_session().await?;
                let kit = self.kit(params).await?;
                let not_found = || Failure {
                    code: code::NOT_FOUND,
                    message: format!(
                        "no stored session {id} in this workspace (session/list names them)"
                    ),
                };
                // Only an exact id opens a session (no prefixes from outside).
                let stored = kit
                    .store
                    .as_ref()
                    .and_then(|s| s.session(id).ok().flatten());
                if stored.is_none() {
                    return Err(not_found());
                }
                let session = kit.resume(id).await.map_err(|e| Failure {
                    code: code::NOT_FOUND,
                    message: e.to_string(),
                })?;
                (session, kit.mcp.clone())
            }
        };
        for update in super::updates::for_history(&session.history()) {
            self.update(session.id(), update).await;
        }
        let modes = modes(&session);
        if open.is_none() {
            self.drive(session, mcp, params).await;
        }
        Ok(json!({"modes": modes}))
    }

    async fn room_for_a_session(&self) -> Result<(), Failure> {
        if self.sessions.lock().await.len() >= MAX_SESSIONS {
            return Err(Failure {
                code: code::INTERNAL,
                message: format!(
                    "{MAX_SESSIONS} sessions are open here already; restart the agent to open more"
                ),
            });
        }
        Ok(())
    }

    /// This workspace's stored sessions (without `cwd`: every workspace's,
    /// from the store the first opened workspace uses).
    pub(super) async fn list_sessions(&self, params: &Value) -> Result<Value, Failure> {
        let (kit, workspace) = if params["cwd"].is_string() {
            let kit = self.kit(params).await?;
            let workspace = kit.workspace.display().to_string();
            (kit, Some(workspace))
        } else {
            let any = self.built.lock().await.values().next().cloned();
            let kit = any
                .ok_or_else(|| invalid("cwd is missing and no workspace is open yet: give cwd"))?;
            (kit, None)
        };
        let Some(store) = &kit.store else {
            return Ok(json!({"sessions": []}));
        };
        let records = store
            .sessions(workspace.as_deref())
            .map_err(|e| Failure::from(anyhow::Error::from(e)))?;
        let sessions: Vec<Value> = records
            .iter()
            .map(|r| {
                json!({"sessionId": r.id, "cwd": r.workspace, "title": r.title, "updatedAt": r.updated_at})
            })
            .collect();
        Ok(json!({"sessions": sessions}))
    }

    /// Keep `session` for prompts, and send what it shows as updates.
    async fn drive(
        self: &Arc<Self>,
        session: Arc<Session>,
        mcp: crate::mcp::McpServers,
        params: &Value,
    ) {
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
            mcp,
            flush,
            busy: AtomicBool::new(false),
        });
        let id = session.id().to_string();
        self.sessions.lock().await.insert(id.clone(), driven);
        let agent = self.clone();
        let events = session.events();
        let workspace = session.workspace().to_path_buf();
        tokio::spawn(async move { agent.forward(&id, events, &workspace, flushes).await });
    }

    /// After the editor learned of a session: the slash commands it takes
    /// — sandcrab's at once, then with its MCP servers' prompts once they
    /// are listed (a slow server holds back only its own).
    pub(super) async fn after_open(&self, session_id: &str) {
        let advertise = |prompts: &[crate::mcp::PromptCommand]| json!({"sessionUpdate": "available_commands_update", "availableCommands": super::commands::advertised(prompts)});
        self.update(session_id, advertise(&[])).await;
        let driven = self.sessions.lock().await.get(session_id).cloned();
        let Some(driven) = driven else { return };
        let (prompts, _) = driven.mcp.prompts().await;
        if !prompts.is_empty() {
            self.update(session_id, advertise(&prompts)).await;
        }
    }

    /// Send what session `id` shows, in order, draining its events all the
    /// while: an editor that does not read holds back updates, never the
    /// session's events (what it does not see is dropped as it comes, and
    /// its text waits joined into chunks). A flush is answered once every
    /// event emitted before it was asked for went out.
    async fn forward(
        &self,
        id: &str,
        mut events: crate::agent::EventStream,
        workspace: &Path,
        mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
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
                    while let Some(event) = crate::agent::next_ready(&mut events) {
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

    pub(super) async fn driven(&self, params: &Value) -> Result<Arc<Driven>, Failure> {
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

    /// Take the session of a prompt for it, as the prompt is read: one
    /// prompt per session at a time, and a cancel from now on is its.
    pub(super) async fn claim_prompt(&self, params: &Value) -> Result<Claimed, Failure> {
        let driven = self.driven(params).await?;
        if driven.busy.swap(true, Ordering::SeqCst) {
            return Err(invalid(
                "a prompt is being answered in this session: wait for it or cancel it (session/cancel) first",
            ));
        }
        let stop = driven.session.input_stop();
        Ok(Claimed { driven, stop })
    }

    /// Answer a prompt on the session [`Agent::claim_prompt`] took.
    pub(super) async fn prompt(&self, claimed: Claimed, params: &Value) -> Result<Value, Failure> {
        let Claimed { driven, stop } = claimed;
        let outcome = self.answer_prompt(&driven, &stop, params).await;
        driven.busy.store(false, Ordering::SeqCst);
        outcome
    }

    /// Why a turn that ended without an error ended, as ACP names it: a
    /// spend cap (told to the editor too) is `max_tokens`, a turn limit
    /// `max_turn_requests`.
    async fn stop_reason(&self, driven: &Driven) -> &'static str {
        if let Some(reached) = driven.session.spend_stopped() {
            self.update(
                driven.session.id(),
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": format!("Stopped before the next model call: {}", reached.message)}}),
            )
            .await;
            return "max_tokens";
        }
        if driven.session.stopped_by().is_some() {
            return "max_turn_requests";
        }
        "end_turn"
    }

    async fn answer_prompt(
        &self,
        driven: &Driven,
        stop: &tokio_util::sync::CancellationToken,
        params: &Value,
    ) -> Result<Value, Failure> {
        let typed = prompt_text(&params["prompt"])?;
        // An MCP server's prompt is rendered into the message sent — as a
        // message only: what a server wrote is never run as a command.
        let rendered = tokio::select! {
            rendered = driven.mcp.render_prompt(&typed) => rendered,
            _ = stop.cancelled() => return Ok(json!({"stopReason": "cancelled"})),
        };
        let (text, command) = match rendered {
            Some(Ok(message)) => (message, None),
            Some(Err(e)) => {
                self.update(
                    driven.session.id(),
                    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": e.to_string()}}),
                )
                .await;
                return Ok(json!({"stopReason": "end_turn"}));
            }
            None => {
                let command = super::commands::Command::parse(&typed);
                (typed, command)
            }
        };
        if let Some(command) = command {
            let said = command.run(&driven.session).await;
            driven.flush().await;
            self.update(
                driven.session.id(),
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}),
            )
            .await;
            return Ok(json!({"stopReason": "end_turn"}));
        }
        // Stopped by a cancel whenever it came: before the turn began
        // (it waited for a turn a job woke), or in it.
        let result = driven.session.submit_until(&text, stop).await;
        // Every update of this input goes out before its answer.
        driven.flush().await;
        if stop.is_cancelled() {
            return Ok(json!({"stopReason": "cancelled"}));
        }
        match result {
            Ok(()) => Ok(json!({"stopReason": self.stop_reason(driven).await})),
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

    pub(super) async fn set_mode(&self, params: &Value) -> Result<Value, Failure> {
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

    /// Cancel the prompt being answered in the session (nothing when none
    /// is: a cancel never reaches a later prompt).
    pub(super) async fn cancel(&self, params: &Value) {
        if let Ok(driven) = self.driven(params).await
            && driven.busy.load(Ordering::SeqCst)
        {
            // The prompt, and the turn it may wait behind (one a job woke).
            driven.session.stop_inputs();
        }
    }
}

/// The session modes: the approvals modes, the one in force current.
fn modes(session: &Session) -> Value {
    let described = |mode: Mode| match mode {
        Mode::Never => (
            "Ask nothing",
            "Nothing asks: every call no rule denies runs, confined by the sandbox and the plugins' grants (the network only where a grant gives it)",
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
