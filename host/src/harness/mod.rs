//! The lifecycle harness (SPEC §8): one agent per workspace that a program
//! drives — start, stop, send a message (fire-and-forget: results arrive
//! as events), interrupt, status, clear, history. The HTTP bridge
//! (`server/`) and `sandcrab agent …` are its front ends.
//!
//! Unlike the seed, history persists (the session store) and clear starts
//! a new stored session.

pub mod events;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::agent::{AgentKit, Session, Turn};
use crate::approvals::{Answer, AnswerError, PermissionQueue, PermissionRequest};
pub use events::{BridgeEvent, EventLog};

/// Where the harness is in its life. Unit variants serialize as bare
/// strings, `Error` as `{"Error": "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifecycle {
    Stopped,
    Starting,
    Running,
    Suspended,
    Error(String),
}

/// `{lifecycle, is_streaming}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub lifecycle: Lifecycle,
    pub is_streaming: bool,
}

/// Why an operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    #[error("Agent manager not initialized for current workspace (initialize a workspace first)")]
    NotInitialized,
    #[error("the agent is already running (stop it first)")]
    AlreadyRunning,
    #[error("Agent harness is not running (start it first)")]
    NotRunning,
    #[error("{0}")]
    Workspace(String),
    /// The operator did not allow this workspace.
    #[error("{0}")]
    NotAllowed(String),
    #[error("the agent could not start: {0}")]
    Start(String),
    #[error("the conversation could not be read: {0}")]
    History(String),
    /// The workspace's conversation is driven by another host.
    #[error("{0}")]
    Leased(String),
}

impl HarnessError {
    /// A stable code for clients.
    pub fn code(&self) -> &'static str {
        match self {
            HarnessError::NotInitialized => "not_initialized",
            HarnessError::AlreadyRunning => "already_running",
            HarnessError::NotRunning => "not_running",
            HarnessError::Workspace(_) => "bad_workspace",
            HarnessError::NotAllowed(_) => "workspace_not_allowed",
            HarnessError::Start(_) => "start_failed",
            HarnessError::History(_) => "history_unavailable",
            HarnessError::Leased(_) => "session_leased",
        }
    }
}

/// The workspaces a client may open: chosen by the operator when the
/// harness is made, never widened by a client. Paths are canonical, so a
/// link cannot lead a client out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspaces {
    /// Exactly these directories.
    exact: Vec<PathBuf>,
    /// These directories and every directory inside them.
    under: Vec<PathBuf>,
}

impl Workspaces {
    /// Exactly `dir` (what `serve --workspace DIR` allows).
    pub fn only(dir: &Path) -> Self {
        Workspaces {
            exact: vec![dir.to_path_buf()],
            under: Vec::new(),
        }
    }

    /// Also allow `dir` and everything inside it (canonical).
    pub fn and_under(mut self, dir: &Path) -> Self {
        self.under.push(dir.to_path_buf());
        self
    }

    /// Whether a client may open `dir` (canonical).
    pub fn allows(&self, dir: &Path) -> bool {
        self.exact.iter().any(|d| d == dir) || self.under.iter().any(|d| dir.starts_with(d))
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self.exact.iter().map(|d| d.display().to_string()).collect();
        parts.extend(
            self.under
                .iter()
                .map(|d| format!("{} and below", d.display())),
        );
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What the harness needs to start an agent in a workspace: the same
/// configuration, plugins and provider a `chat` would have.
#[async_trait::async_trait]
pub trait AgentFactory: Send + Sync {
    /// Load plugins and build the agent for `workspace`; the second value
    /// keeps alive what the agent's plugins need (their host).
    async fn build(
        &self,
        workspace: &Path,
    ) -> anyhow::Result<(AgentKit, Box<dyn std::any::Any + Send + Sync>)>;
}

/// The workspace's latest stored conversation, resumed (None: there is
/// none, or no store).
async fn continued(kit: &AgentKit) -> Result<Option<Arc<Session>>, HarnessError> {
    let latest = kit
        .latest_session()
        .map_err(|e| HarnessError::History(e.to_string()))?;
    let Some(id) = latest else {
        return Ok(None);
    };
    match kit.resume(&id).await {
        Ok(session) => Ok(Some(session)),
        Err(err @ crate::store::StoreError::Leased { .. }) => Err(HarnessError::Leased(format!(
            "{err}; or clear, then start, to begin a new conversation here"
        ))),
        Err(err) => Err(HarnessError::History(err.to_string())),
    }
}

struct Running {
    kit: Arc<AgentKit>,
    session: Arc<Session>,
    _keep: Box<dyn std::any::Any + Send + Sync>,
    pump: tokio::task::JoinHandle<()>,
    /// Reports `Suspended` while a call waits for the operator.
    suspense: tokio::task::JoinHandle<()>,
    /// Publishes every permission request and its end, whoever asked.
    requests: tokio::task::JoinHandle<()>,
}

/// How long a permission request waits for an answer by default.
pub const PERMISSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

struct State {
    workspace: Option<PathBuf>,
    /// The next start begins a new conversation (cleared while stopped).
    fresh: bool,
    lifecycle: Lifecycle,
    running: Option<Running>,
}

/// One workspace's agent.
pub struct Harness {
    factory: Arc<dyn AgentFactory>,
    /// What a client may open with [`Harness::initialize`].
    allowed: Workspaces,
    state: tokio::sync::Mutex<State>,
    /// Messages being processed (sent and not finished).
    streaming: Arc<AtomicUsize>,
    log: Arc<EventLog>,
    /// Calls waiting for the operator (answered through the bridge).
    permissions: Arc<PermissionQueue>,
}

impl Harness {
    /// A harness for `workspace` (None: initialize one before starting);
    /// a client may open only what `allowed` allows.
    pub fn new(
        factory: Arc<dyn AgentFactory>,
        workspace: Option<PathBuf>,
        allowed: Workspaces,
    ) -> Self {
        Self::with_log(factory, workspace, allowed, EventLog::default())
    }

    /// Like [`Harness::new`], its events also kept by `log` (see
    /// [`EventLog::stored`]).
    pub fn with_log(
        factory: Arc<dyn AgentFactory>,
        workspace: Option<PathBuf>,
        allowed: Workspaces,
        log: EventLog,
    ) -> Self {
        if let Some(dir) = &workspace
            && let Err(err) = log.switch_to(dir)
        {
            tracing::warn!("bridge events of {} not replayed: {err}", dir.display());
        }
        Harness {
            factory,
            allowed,
            state: tokio::sync::Mutex::new(State {
                workspace,
                fresh: false,
                lifecycle: Lifecycle::Stopped,
                running: None,
            }),
            streaming: Arc::new(AtomicUsize::new(0)),
            log: {
                let log = Arc::new(log);
                log.follow_other_hosts();
                log
            },
            permissions: PermissionQueue::new(PERMISSION_TIMEOUT),
        }
    }

    /// Deny a permission request nobody answers within `timeout`.
    pub fn with_permission_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.permissions = PermissionQueue::new(timeout);
        self
    }

    /// The calls waiting for the operator, oldest first.
    pub fn pending_permissions(&self) -> Vec<PermissionRequest> {
        self.permissions.pending()
    }

    /// The operator's answer to request `id` (only the bridge's token
    /// holder gets here).
    pub fn answer_permission(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        self.permissions.answer(id, answer)
    }

    /// The event stream.
    pub fn events(&self) -> &Arc<EventLog> {
        &self.log
    }

    /// Open `path` as the workspace (stops a running agent of another one).
    pub async fn initialize(&self, path: &Path) -> Result<PathBuf, HarnessError> {
        let dir = path.canonicalize().map_err(|e| {
            HarnessError::Workspace(format!("workspace {} is not usable: {e}", path.display()))
        })?;
        if !dir.is_dir() {
            return Err(HarnessError::Workspace(format!(
                "workspace {} is not a directory",
                dir.display()
            )));
        }
        if !self.allowed.allows(&dir) {
            return Err(HarnessError::NotAllowed(format!(
                "workspace {} was not allowed by the operator (allowed: {}); the operator chooses workspaces when starting the bridge (`sandcrab serve --workspace DIR` or `--allow-workspace DIR`)",
                dir.display(),
                self.allowed.describe()
            )));
        }
        let mut state = self.state.lock().await;
        if state.workspace.as_deref() != Some(&dir) {
            self.stop_locked(&mut state).await;
            self.log
                .switch_to(&dir)
                .map_err(|e| HarnessError::Workspace(format!("its events cannot be kept: {e}")))?;
            state.workspace = Some(dir.clone());
        }
        Ok(dir)
    }

    /// `{lifecycle, is_streaming}` now.
    pub async fn status(&self) -> Status {
        let state = self.state.lock().await;
        Status {
            lifecycle: self.shown(&state.lifecycle),
            is_streaming: state.running.is_some() && self.streaming.load(Ordering::SeqCst) > 0,
        }
    }

    /// Start the agent, continuing the workspace's latest conversation
    /// (as `chat --continue` does; [`Harness::clear`] starts a new one).
    /// Without a key the provider is a stub: start succeeds and each
    /// message reports the missing configuration. Refused while another
    /// host drives that conversation.
    pub async fn start(&self) -> Result<(), HarnessError> {
        let mut state = self.state.lock().await;
        let Some(workspace) = state.workspace.clone() else {
            return Err(HarnessError::NotInitialized);
        };
        if state.running.is_some() {
            return Err(HarnessError::AlreadyRunning);
        }
        self.set(&mut state, Lifecycle::Starting);
        match self.factory.build(&workspace).await {
            Ok((mut kit, keep)) => {
                // Calls that need the operator wait in the bridge's queue.
                kit.ask_through(self.permissions.clone());
                let kit = Arc::new(kit);
                let fresh = std::mem::take(&mut state.fresh);
                let resumed = if fresh {
                    Ok(None)
                } else {
                    continued(&kit).await
                };
                let session = match resumed {
                    Ok(Some(session)) => session,
                    Ok(None) => kit.session().await,
                    Err(err) => {
                        self.set(&mut state, Lifecycle::Stopped);
                        return Err(err);
                    }
                };
                let pump = self.pump(&session);
                let suspense = self.report_suspense();
                let requests = self.report_requests();
                state.running = Some(Running {
                    kit,
                    session,
                    _keep: keep,
                    pump,
                    suspense,
                    requests,
                });
                self.set(&mut state, Lifecycle::Running);
                Ok(())
            }
            Err(err) => {
                let message = format!("{err:#}");
                self.set(&mut state, Lifecycle::Error(message.clone()));
                Err(HarnessError::Start(message))
            }
        }
    }

    /// Stop the agent: the turn in flight is interrupted, its programs and
    /// jobs stopped. Nothing to do when stopped.
    pub async fn stop(&self) {
        let mut state = self.state.lock().await;
        self.stop_locked(&mut state).await;
    }

    async fn stop_locked(&self, state: &mut State) {
        let Some(running) = state.running.take() else {
            if !matches!(state.lifecycle, Lifecycle::Stopped) {
                self.set(state, Lifecycle::Stopped);
            }
            return;
        };
        running.session.stop_inputs();
        running
            .session
            .stop_jobs(std::time::Duration::from_secs(3))
            .await;
        running.session.abort().await;
        running.pump.abort();
        running.suspense.abort();
        running.requests.abort();
        self.streaming.store(0, Ordering::SeqCst);
        self.set(state, Lifecycle::Stopped);
    }

    /// Send a message; returns at once (the answer arrives as events).
    pub async fn send(&self, message: &str) -> Result<(), HarnessError> {
        let mut state = self.state.lock().await;
        let Some(running) = state.running.as_mut() else {
            return Err(HarnessError::NotRunning);
        };
        if running.session.state() == crate::agent::SessionState::Closed {
            // An error closed the last session: go on in a new one.
            self.renew(running).await;
        }
        let session = running.session.clone();
        // Taken now: an interrupt before its turn begins stops it too.
        let stop = session.input_stop();
        let streaming = self.streaming.clone();
        let log = self.log.clone();
        let status = |s: bool| json!({"lifecycle": Lifecycle::Running, "is_streaming": s});
        if streaming.fetch_add(1, Ordering::SeqCst) == 0 {
            log.publish("agent:status-changed", status(true));
        }
        let message = message.to_string();
        tokio::spawn(async move {
            // A turn already running: this one waits for it.
            let _ = session.submit_until(&message, &stop).await;
            let before = streaming
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    Some(n.saturating_sub(1))
                })
                .unwrap_or(0);
            if before == 1 {
                log.publish("agent:status-changed", status(false));
            }
        });
        Ok(())
    }

    /// Interrupt the turn in flight and the messages sent that wait for
    /// their turn; nothing when idle or stopped.
    pub async fn interrupt(&self) {
        if let Ok(state) = self.state.try_lock()
            && let Some(running) = &state.running
        {
            running.session.stop_inputs();
            return;
        }
        // Busy (starting or stopping): wait for the lock, then interrupt.
        let state = self.state.lock().await;
        if let Some(running) = &state.running {
            running.session.stop_inputs();
        }
    }

    /// Start a new conversation (the old one stays in the store); when
    /// stopped, the next start begins one.
    pub async fn clear(&self) -> Result<(), HarnessError> {
        let mut state = self.state.lock().await;
        let Some(running) = state.running.as_mut() else {
            state.fresh = true;
            return Ok(());
        };
        running.session.stop_inputs();
        running.session.abort().await;
        self.renew(running).await;
        Ok(())
    }

    /// Go on in a new session of the running agent (events of the old one
    /// are no longer forwarded).
    async fn renew(&self, running: &mut Running) {
        running.pump.abort();
        running.session = running.kit.session().await;
        running.pump = self.pump(&running.session);
    }

    /// The conversation so far: the stored turns of the current session
    /// (empty when stopped or fresh).
    pub async fn history(&self) -> Result<Vec<Turn>, HarnessError> {
        let state = self.state.lock().await;
        let Some(running) = &state.running else {
            return Ok(Vec::new());
        };
        let Some(store) = &running.kit.store else {
            return Ok(running.session.history());
        };
        store
            .turns(running.session.id())
            .map_err(|e| HarnessError::History(e.to_string()))?
            .into_iter()
            .map(|t| {
                serde_json::from_str(&t.body).map_err(|e| HarnessError::History(e.to_string()))
            })
            .collect()
    }

    /// `lifecycle` as clients see it: `Suspended` while a call waits for
    /// the operator.
    fn shown(&self, lifecycle: &Lifecycle) -> Lifecycle {
        if *lifecycle == Lifecycle::Running && *self.permissions.waiting().borrow() > 0 {
            Lifecycle::Suspended
        } else {
            lifecycle.clone()
        }
    }

    /// Publish `agent:permission-required` and `agent:permission-resolved`
    /// from the queue itself, so a subagent's or a background job's
    /// request (whose session events reach nobody) is seen like the
    /// agent's own.
    fn report_requests(&self) -> tokio::task::JoinHandle<()> {
        let mut events = self.permissions.subscribe();
        let log = self.log.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let (name, data) = match events.recv().await {
                    Ok(crate::approvals::QueueEvent::Required(request)) => (
                        "agent:permission-required",
                        serde_json::to_value(&request).unwrap_or_default(),
                    ),
                    Ok(crate::approvals::QueueEvent::Resolved {
                        id,
                        session_id,
                        call_id,
                        allow,
                        scope,
                        by,
                    }) => {
                        // The session event's payload, as a session would
                        // have sent it.
                        let decision = if allow {
                            crate::approvals::Decision::Allow
                        } else {
                            crate::approvals::Decision::Deny
                        };
                        let payload = crate::agent::event_data::PermissionResolved {
                            id,
                            call_id,
                            decision,
                            scope,
                            by,
                        };
                        let mut data = serde_json::to_value(&payload).unwrap_or_default();
                        data["session_id"] = json!(session_id);
                        ("agent:permission-resolved", data)
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                log.publish(name, data);
            }
        })
    }

    /// Publish a status change whenever calls start or stop waiting for
    /// the operator.
    fn report_suspense(&self) -> tokio::task::JoinHandle<()> {
        let mut waiting = self.permissions.waiting();
        let (log, streaming) = (self.log.clone(), self.streaming.clone());
        tokio::spawn(async move {
            let mut was = *waiting.borrow_and_update() > 0;
            while waiting.changed().await.is_ok() {
                let now = *waiting.borrow_and_update() > 0;
                if now != was {
                    was = now;
                    let lifecycle = if now {
                        Lifecycle::Suspended
                    } else {
                        Lifecycle::Running
                    };
                    log.publish(
                        "agent:status-changed",
                        json!({"lifecycle": lifecycle, "is_streaming": streaming.load(Ordering::SeqCst) > 0}),
                    );
                }
            }
        })
    }

    fn set(&self, state: &mut State, lifecycle: Lifecycle) {
        state.lifecycle = lifecycle.clone();
        let streaming = state.running.is_some() && self.streaming.load(Ordering::SeqCst) > 0;
        self.log.publish(
            "agent:status-changed",
            json!({"lifecycle": lifecycle, "is_streaming": streaming}),
        );
    }

    /// Forward `session`'s events to the log.
    fn pump(&self, session: &Arc<Session>) -> tokio::task::JoinHandle<()> {
        // From SESSION_START on (the session is new and nobody else reads
        // its first stream).
        let mut events = session.events();
        let log = self.log.clone();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if let Some((name, data)) = events::translate(&event) {
                    log.publish(name, data);
                }
            }
        })
    }
}
