//! [`Session`]: one conversation with a model in a workspace. States IDLE →
//! PROCESSING → IDLE, and CLOSED after abort or an unrecoverable error.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::config::SessionConfig;
use super::event_data::{self as ed, EventData};
use super::events::{EventBus, EventStream};
use super::loop_detection::LoopDetector;
use super::profile::Profile;
use super::prompt::{self, PromptInputs};
use super::turns::{Turn, TurnKind};
use crate::jobs::{BackgroundSettings, JobRegistry};
use crate::llm::{LlmClient, LlmError};
use crate::plugin::ToolSpec;
use crate::tools::{ToolCatalog, ToolExecutor, ToolRegistry};

/// sandcrab's own tools that act on a session — its jobs, its subagents,
/// its memory: each source registers its tools with a handle to the
/// session. The session knows only this interface, one shape for all.
pub trait HostTools: Send + Sync {
    /// Register the tools for `session` into `tools`.
    fn register(self: Arc<Self>, tools: &mut ToolRegistry, session: Weak<Session>);
}

/// What manages a session's child agents: the tools that act on them and a
/// way to stop them all (the subagents module implements it).
pub trait SessionChildren: HostTools {
    /// Stop every child (the session is closing).
    fn close_all(&self) -> BoxFuture<'_, ()>;
}

impl HostTools for SessionJobs {
    fn register(self: Arc<Self>, tools: &mut ToolRegistry, _session: Weak<Session>) {
        crate::jobs::register_tools(tools, &self.registry);
    }
}

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionState {
    Idle,
    Processing,
    Closed,
}

/// Why a submit failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    #[error("the session is closed")]
    Closed,
    #[error("nothing to retry: the model already answered the last input")]
    NothingToRetry,
    #[error(transparent)]
    Llm(#[from] LlmError),
}

/// Background jobs for a session: the shared registry and when calls move
/// to the background.
#[derive(Clone)]
pub struct SessionJobs {
    pub registry: Arc<JobRegistry>,
    pub settings: BackgroundSettings,
}

/// What a session is made of.
pub struct SessionParts {
    pub client: Arc<dyn LlmClient>,
    pub profile: Arc<Profile>,
    /// The plugin tools the model gets, shared with subagents and replaced
    /// as a whole when plugins reload (the session adds its own job and
    /// subagent tools).
    pub tools: ToolCatalog,
    pub config: SessionConfig,
    /// The workspace (shared with subagents).
    pub workspace: PathBuf,
    /// Where the agent works inside the workspace (default: the workspace).
    pub working_dir: Option<PathBuf>,
    /// Subagent nesting depth (0 for a top-level session).
    pub depth: usize,
    /// The top-level session a subagent belongs to (None: this is one).
    pub root: Option<String>,
    /// Repository facts for the prompt ([`super::repo_facts::read`]).
    pub repo: Option<super::repo_facts::RepoFacts>,
    /// Background jobs (None: every call runs inline).
    pub jobs: Option<SessionJobs>,
    /// Child agents (None: this session cannot start any).
    pub children: Option<Arc<dyn SessionChildren>>,
    /// The store the session is kept in, and its compactor (None: the
    /// session lives in memory only). A resumed session takes its id and
    /// history from here.
    pub memory: Option<Arc<super::memory::SessionMemory>>,
    /// More of sandcrab's own tools the session offers (its memory tools,
    /// when it has a store): the builder chooses them, so this file knows
    /// none of them.
    pub host_tools: Vec<Arc<dyn HostTools>>,
    /// What the prompt shows of the machine (None: read it now).
    pub world: Option<super::world::World>,
    /// A replay: the recording stands in for the world (None: live).
    pub playback: Option<Arc<dyn super::playback::Playback>>,
    /// The model's window (None: the profile's; subagents share their
    /// parent's, so what one refusal teaches serves all).
    pub window: Option<Arc<super::window::Window>>,
    /// Where the session's spend is counted (None: a ledger of its own
    /// under the configuration's caps; a subagent's is its parent's
    /// child).
    pub spend: Option<Arc<crate::llm::spend::Ledger>>,
}

impl SessionParts {
    /// The parts of a top-level session talking to `client` under
    /// `profile`, offering `tools`, in `workspace`: no subagents, jobs,
    /// store, extra host tools or playback, the world read when it
    /// starts. Set what differs with struct update syntax.
    pub fn new(
        client: Arc<dyn LlmClient>,
        profile: Arc<Profile>,
        tools: ToolCatalog,
        config: SessionConfig,
        workspace: PathBuf,
    ) -> Self {
        SessionParts {
            client,
            profile,
            tools,
            config,
            workspace,
            working_dir: None,
            depth: 0,
            root: None,
            repo: None,
            jobs: None,
            children: None,
            memory: None,
            host_tools: Vec::new(),
            world: None,
            playback: None,
            window: None,
            spend: None,
        }
    }
}

pub(super) struct Inner {
    pub state: SessionState,
    pub history: Vec<Turn>,
    pub steering: VecDeque<String>,
    pub follow_ups: VecDeque<String>,
    pub model_turns: u32,
    pub loops: LoopDetector,
    /// Cancels the input being processed (interrupt).
    pub current: Option<CancellationToken>,
    /// The limit that stopped the last input, if one did.
    pub stopped_by: Option<super::event_data::TurnLimitKind>,
    /// The spend cap that stopped the last input, if one did.
    pub spend_stop: Option<crate::llm::spend::CapReached>,
    /// Tokens used by the model answers of this process.
    pub used: crate::llm::Usage,
}

/// A conversation.
pub struct Session {
    pub(super) id: String,
    /// The top-level session's id (its own, when it is one).
    pub(super) root_id: String,
    pub(super) depth: usize,
    pub(super) client: Arc<dyn LlmClient>,
    pub(super) profile: Arc<Profile>,
    /// Plugin tools (shared, replaceable).
    pub(super) catalog: ToolCatalog,
    /// This session's own tools (jobs, subagents, registered ones); they
    /// win over a plugin tool of the same name.
    local: Mutex<ToolRegistry>,
    pub(super) config: SessionConfig,
    pub(super) workspace: PathBuf,
    pub(super) working_dir: PathBuf,
    /// The system prompt and the catalog generation it lists the tools of.
    prompt: Mutex<(u64, String)>,
    pub(super) bus: EventBus,
    primary_events: Mutex<Option<EventStream>>,
    pub(super) inner: Mutex<Inner>,
    pub(super) cancel: CancellationToken,
    /// Stops the inputs taken since the last [`Session::stop_inputs`].
    inputs: Mutex<CancellationToken>,
    run_lock: tokio::sync::Mutex<()>,
    pub(super) children: Option<Arc<dyn SessionChildren>>,
    pub(super) jobs: Option<SessionJobs>,
    pub(super) memory: Option<Arc<super::memory::SessionMemory>>,
    /// Allow rules the operator added for the rest of this conversation.
    pub(super) granted: Mutex<crate::approvals::Rules>,
    /// Receipts of calls that started and were interrupted before they
    /// ended, by call id, until the interrupted round answers them.
    pub(super) unfinished: Mutex<std::collections::HashMap<String, crate::tools::Receipt>>,
    /// What the prompt shows of the machine, read at start.
    world: super::world::World,
    /// Set when replaying a recording.
    pub(super) playback: Option<Arc<dyn super::playback::Playback>>,
    /// The files this conversation changed, as they were (see
    /// [`Session::keep_checkpoints`]).
    pub(super) checkpoints: std::sync::OnceLock<Arc<crate::checkpoint::Checkpoints>>,
    /// The model the operator switched to (`/model`), if any.
    model_override: Mutex<Option<String>>,
    /// The approvals mode the operator switched to (an editor's session
    /// mode), if any.
    approval_mode: Mutex<Option<crate::approvals::Mode>>,
    /// What the session knows of the model's window.
    pub(super) window: Arc<super::window::Window>,
    /// What the session (with its subagents) spent, against its caps.
    pub(super) spend: Arc<crate::llm::spend::Ledger>,
    /// The span that started this session (a subagent's: its parent's
    /// `spawn_agent` call), where its input spans hang.
    pub(super) trace_parent: Mutex<Option<crate::telemetry::SpanContext>>,
    /// The largest request the provider answered, in its tokens.
    pub(super) largest_request: Mutex<u64>,
    /// SessionStart hooks have run in this process.
    pub(super) hooks_started: std::sync::atomic::AtomicBool,
    /// A hook said `continue: false` during this round: why.
    pub(super) hook_stop: Mutex<Option<String>>,
}

impl Session {
    /// The model the next call asks.
    pub fn model(&self) -> String {
        self.model_override
            .lock()
            .ok()
            .and_then(|m| m.clone())
            .unwrap_or_else(|| self.config.model.clone())
    }

    /// Whether `name` can be a model's name: one word of printable
    /// ASCII, at most 200 bytes (it goes into requests and the store).
    pub fn valid_model_name(name: &str) -> bool {
        !name.is_empty() && name.len() <= 200 && name.chars().all(|c| c.is_ascii_graphic())
    }

    /// Ask `model` from the next call on (same provider and profile).
    pub fn set_model(&self, model: &str) {
        if let Ok(mut m) = self.model_override.lock() {
            *m = Some(model.to_string());
        }
        // Another model has another window, and its own lessons.
        self.window.replace_with(
            self.window
                .for_model(model, self.profile.info.context_window),
        );
    }

    /// The approvals mode in force: the one the operator switched to,
    /// else the configured one.
    pub fn approval_mode(&self) -> crate::approvals::Mode {
        self.approval_mode
            .lock()
            .ok()
            .and_then(|m| *m)
            .unwrap_or(self.config.approvals.mode)
    }

    /// Decide calls no rule speaks to in `mode` from now on (the operator
    /// chose it, as `--approvals` would).
    pub fn set_approval_mode(&self, mode: crate::approvals::Mode) {
        if let Ok(mut m) = self.approval_mode.lock() {
            *m = Some(mode);
        }
    }

    /// The allow rules the operator added for this conversation.
    pub fn granted_rules(&self) -> Vec<crate::approvals::Rule> {
        self.granted
            .lock()
            .map(|rules| rules.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The model's context window, in tokens, as far as the session knows.
    pub fn context_window(&self) -> u64 {
        self.window.facts().tokens
    }

    /// The model's window and where its size came from.
    pub fn window_facts(&self) -> super::window::WindowFacts {
        self.window.facts()
    }

    /// Start a session: builds the system prompt and emits SESSION_START.
    pub fn new(parts: SessionParts) -> Arc<Session> {
        let (id, history) = match &parts.memory {
            Some(memory) => (memory.id().to_string(), memory.take_loaded()),
            None => (uuid::Uuid::new_v4().to_string(), Vec::new()),
        };
        let working_dir = parts
            .working_dir
            .clone()
            .unwrap_or_else(|| parts.workspace.clone());
        let world = parts.world.clone().unwrap_or_else(|| {
            super::world::World::observe(
                &parts.profile,
                &parts.workspace,
                &working_dir,
                parts.repo.clone(),
                &parts.config.docs,
            )
        });
        let window = parts.window.clone().unwrap_or_else(|| {
            Arc::new(super::window::Window::new(
                parts.profile.info.context_window,
                super::window::WindowSource::Profile,
            ))
        });
        let spend = parts.spend.clone().unwrap_or_else(|| {
            crate::llm::spend::Ledger::new(
                parts.config.budget.session,
                Arc::new(parts.config.budget.prices.clone()),
            )
        });
        let session = Arc::new_cyclic(|weak| {
            let mut local = ToolRegistry::new();
            if parts.depth < parts.config.max_subagent_depth
                && let Some(children) = &parts.children
            {
                children.clone().register(&mut local, weak.clone());
            }
            if let Some(jobs) = &parts.jobs {
                Arc::new(jobs.clone()).register(&mut local, weak.clone());
                spawn_wake_listener(&jobs.registry, weak.clone());
            }
            for source in &parts.host_tools {
                source.clone().register(&mut local, weak.clone());
            }
            for name in local.names() {
                if parts.config.tools.excludes(&name, None) {
                    local.remove(&name);
                }
            }
            let bus = EventBus::new(&id);
            // A top-level session's first watcher sees everything from
            // SESSION_START; a subagent's events are only kept for someone
            // who subscribes (nobody drains a buffer nobody reads).
            let primary = (parts.depth == 0).then(|| bus.subscribe());
            bus.emit(EventData::SessionStart(ed::SessionStarted {
                session_id: id.clone(),
                profile: parts.profile.info.id.clone(),
                model: parts.config.model.clone(),
                depth: parts.depth,
                working_dir: working_dir.clone(),
                context_window: window.facts().tokens,
                window_source: window.facts().source,
            }));
            let cancel = CancellationToken::new();
            Session {
                root_id: parts.root.clone().unwrap_or_else(|| id.clone()),
                id,
                depth: parts.depth,
                client: parts.client,
                profile: parts.profile,
                catalog: parts.tools,
                local: Mutex::new(local),
                prompt: Mutex::new((u64::MAX, String::new())),
                inner: Mutex::new(Inner {
                    state: SessionState::Idle,
                    history,
                    steering: VecDeque::new(),
                    follow_ups: VecDeque::new(),
                    model_turns: 0,
                    stopped_by: None,
                    spend_stop: None,
                    used: Default::default(),
                    loops: LoopDetector::new(parts.config.loop_detection_window),
                    current: None,
                }),
                config: parts.config,
                workspace: parts.workspace,
                working_dir,
                bus,
                primary_events: Mutex::new(primary),
                inputs: Mutex::new(cancel.child_token()),
                cancel,
                run_lock: tokio::sync::Mutex::new(()),
                children: parts.children,
                jobs: parts.jobs,
                memory: parts.memory,
                granted: Mutex::new(Default::default()),
                unfinished: Mutex::new(Default::default()),
                world,
                playback: parts.playback,
                checkpoints: std::sync::OnceLock::new(),
                model_override: Mutex::new(None),
                approval_mode: Mutex::new(None),
                window,
                spend,
                trace_parent: Mutex::new(None),
                largest_request: Mutex::new(0),
                hooks_started: Default::default(),
                hook_stop: Mutex::new(None),
            }
        });
        session.record_start();
        for why in &session.world.left_out {
            session.warn(why);
        }
        session
    }

    /// What the prompt shows of the machine.
    pub fn world(&self) -> super::world::World {
        self.world.clone()
    }

    /// The names of the session's own tools.
    pub(super) fn own_tool_names(&self) -> Vec<String> {
        self.local.lock().expect("tools lock").names()
    }

    /// Keep only the own tools named in `keep` (a replay offers what the
    /// recorded session offered).
    pub fn retain_own_tools(&self, keep: &[String]) {
        let mut local = self.local.lock().expect("tools lock");
        for name in local.names() {
            if !keep.contains(&name) {
                local.remove(&name);
            }
        }
        drop(local);
        self.prompt.lock().expect("prompt lock").0 = u64::MAX;
    }

    /// Whether `name` is one of the session's own tools (jobs, subagents,
    /// memory), not a plugin's.
    pub(super) fn is_own_tool(&self, name: &str) -> bool {
        self.local.lock().expect("tools lock").get(name).is_some()
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The top-level conversation a subagent's questions are asked in
    /// (empty for a top-level session: it is its own).
    pub(super) fn asking_root(&self) -> String {
        if self.depth == 0 {
            String::new()
        } else {
            self.root_id.clone()
        }
    }

    /// The workspace it works in.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// Subagent depth (0 at the top).
    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn state(&self) -> SessionState {
        self.lock().state
    }

    /// A copy of the history.
    pub fn history(&self) -> Vec<Turn> {
        self.lock().history.clone()
    }

    /// The operator's inputs in the history (a turn, as `sessions list`
    /// counts them).
    pub fn inputs(&self) -> usize {
        super::turns::inputs(&self.lock().history)
    }

    /// The events: the first call gets every event since SESSION_START,
    /// later calls get events from then on.
    pub fn events(&self) -> EventStream {
        let primary = self.primary_events.lock().expect("events lock").take();
        primary.unwrap_or_else(|| self.bus.subscribe())
    }

    /// A new subscription from now on.
    pub fn subscribe(&self) -> EventStream {
        self.bus.subscribe()
    }

    /// The system prompt for the tools offered now (rebuilt when the
    /// plugin tools change).
    pub fn system_prompt(&self) -> String {
        let generation = self.catalog.generation();
        let mut prompt = self.prompt.lock().expect("prompt lock");
        if prompt.0 != generation {
            let specs: Vec<ToolSpec> = self.tools().definitions();
            prompt.1 = prompt::build(&PromptInputs {
                profile: &self.profile,
                tools: &specs,
                world: &self.world,
                model: &self.config.model,
                user_instructions: self.config.user_instructions.as_deref(),
            });
            prompt.0 = generation;
        }
        prompt.1.clone()
    }

    /// The system prompt for a small window (see [`prompt::build_brief`]).
    pub(super) fn brief_system_prompt(&self) -> String {
        let specs: Vec<ToolSpec> = self.tools().definitions();
        prompt::build_brief(&PromptInputs {
            profile: &self.profile,
            tools: &specs,
            world: &self.world,
            model: &self.config.model,
            user_instructions: self.config.user_instructions.as_deref(),
        })
    }

    /// The profile in use.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The session's settings.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The tools the model gets now: the plugin tools, then the session's
    /// own over them.
    pub fn tools(&self) -> ToolRegistry {
        let mut tools = self.catalog.snapshot();
        tools.overlay(&self.local.lock().expect("tools lock"));
        tools
    }

    /// Add or replace a tool (latest registration wins).
    pub fn register_tool(&self, spec: ToolSpec, executor: Arc<dyn ToolExecutor>) {
        self.local
            .lock()
            .expect("tools lock")
            .register(spec, executor);
        // The prompt lists the tools: build it again.
        self.prompt.lock().expect("prompt lock").0 = u64::MAX;
    }

    /// Model turns taken so far.
    pub fn model_turns(&self) -> u32 {
        self.lock().model_turns
    }

    /// The limit (`max_turns`, `max_tool_rounds`) that stopped the last
    /// input before the model was done, if one did.
    pub fn stopped_by(&self) -> Option<super::event_data::TurnLimitKind> {
        self.lock().stopped_by
    }

    /// The text of the last assistant turn.
    pub fn last_assistant_text(&self) -> Option<String> {
        self.lock()
            .history
            .iter()
            .rev()
            .find_map(|t| match &t.kind {
                TurnKind::Assistant { text, .. } if !text.is_empty() => Some(text.clone()),
                _ => None,
            })
    }

    /// Queue a message to inject before the next model call.
    pub fn steer(&self, message: &str) {
        self.lock().steering.push_back(message.to_string());
    }

    /// Queue an input to process after the current one completes.
    pub fn follow_up(&self, message: &str) {
        self.lock().follow_ups.push_back(message.to_string());
    }

    /// Process one input (None: a turn without input) and nothing after
    /// it: no follow-ups, no turn for finished jobs (a replay drives
    /// those from its recording).
    pub async fn process_one(self: &Arc<Self>, input: Option<&str>) -> Result<(), SessionError> {
        let _running = self.run_lock.lock().await;
        self.process_input(input, &self.cancel).await
    }

    /// Process `input` (and any queued follow-ups) to completion.
    pub async fn submit(self: &Arc<Self>, input: &str) -> Result<(), SessionError> {
        let stop = self.cancel.clone();
        self.submit_until(input, &stop).await
    }

    /// What stops an input taken now ([`Session::submit_until`]) until
    /// the next [`Session::stop_inputs`]: a front end takes it as the
    /// input arrives, so a stop that comes before the input's turn begins
    /// (it waits behind another) still reaches it. [`Session::interrupt`]
    /// reaches only a turn already running.
    pub fn input_stop(&self) -> CancellationToken {
        self.inputs
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|_| self.cancel.clone())
    }

    /// Stop the running turn and every input taken since the last stop,
    /// one still waiting for its turn too; an input taken after this is
    /// not stopped.
    pub fn stop_inputs(&self) {
        if let Ok(mut inputs) = self.inputs.lock() {
            std::mem::replace(&mut *inputs, self.cancel.child_token()).cancel();
        }
        self.interrupt();
    }

    /// [`Session::submit`], every turn of it stopped by `stop`.
    pub async fn submit_until(
        self: &Arc<Self>,
        input: &str,
        stop: &CancellationToken,
    ) -> Result<(), SessionError> {
        if self.state() == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        let _running = self.run_lock.lock().await;
        // Stopped while it waited for another turn: never taken.
        if stop.is_cancelled() {
            self.warn(&format!(
                "an input of {} characters was stopped before its turn began: the model did not see it; send it again to have it answered",
                input.chars().count()
            ));
            return Ok(());
        }
        self.process_input(Some(input), stop).await?;
        loop {
            if self.state() == SessionState::Closed {
                return Err(SessionError::Closed);
            }
            // Stopped: what waits (follow-ups, finished jobs) waits for
            // the next input or the session's own wake, not for this one.
            if stop.is_cancelled() {
                return Ok(());
            }
            let follow_up = self.lock().follow_ups.pop_front();
            match follow_up {
                Some(next) => self.process_input(Some(&next), stop).await?,
                // A job finished during the last turn: give it a turn now.
                None if self.jobs_pending() => self.process_input(None, stop).await?,
                None => return Ok(()),
            }
        }
    }

    /// Ask the model again after an error, without new input: the last
    /// turn must be one that awaits an answer (the user's, steering, tool
    /// results). Waits for a running input.
    pub async fn retry(self: &Arc<Self>) -> Result<(), SessionError> {
        let _running = self.run_lock.lock().await;
        if self.state() == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        let awaiting = self.lock().history.last().is_some_and(
            |t| !matches!(&t.kind, TurnKind::Assistant { tool_calls, .. } if tool_calls.is_empty()),
        );
        if !awaiting {
            return Err(SessionError::NothingToRetry);
        }
        self.process_input(None, &self.cancel).await
    }

    /// Take a turn without new input if finished jobs are waiting (the
    /// thread was idle when they finished). Waits for a running input.
    pub async fn wake(self: &Arc<Self>) -> Result<(), SessionError> {
        let _running = self.run_lock.lock().await;
        if self.state() == SessionState::Idle && self.jobs_pending() {
            self.process_input(None, &self.cancel).await?;
        }
        Ok(())
    }

    /// Wait (at most `limit`) until this thread's background jobs have
    /// finished and the model has had a turn for each; whether it got
    /// there.
    pub async fn settle(
        self: &Arc<Self>,
        limit: std::time::Duration,
    ) -> Result<bool, SessionError> {
        let Some(jobs) = &self.jobs else {
            return Ok(true);
        };
        let mut notices = jobs.registry.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.state() == SessionState::Closed {
                return Err(SessionError::Closed);
            }
            // A turn already reacting to a job (the wake listener's) must
            // finish before this can say the thread has settled.
            drop(self.run_lock.lock().await);
            if self.jobs_pending() {
                self.wake().await?;
                continue;
            }
            if !self.jobs_active() {
                return Ok(true);
            }
            match tokio::time::timeout_at(deadline, notices.recv()).await {
                Err(_) => return Ok(false),
                Ok(None) => return Ok(!self.jobs_active()),
                Ok(Some(_)) => {}
            }
        }
    }

    /// Cancel this thread's running jobs (their processes are killed);
    /// returns their ids.
    pub fn cancel_jobs(&self) -> Vec<String> {
        let Some(jobs) = &self.jobs else {
            return Vec::new();
        };
        jobs.registry
            .list(&self.id, None)
            .into_iter()
            .filter_map(|job| {
                jobs.registry
                    .cancel(&self.id, &job.job_id, crate::jobs::Actor::User)
                    .ok()
                    .map(|r| r.job_id)
            })
            .collect()
    }

    /// Cancel this thread's running jobs and wait (at most `limit`) until
    /// they have ended (their processes killed).
    pub async fn stop_jobs(&self, limit: std::time::Duration) {
        let Some(jobs) = &self.jobs else {
            return;
        };
        let mut notices = jobs.registry.subscribe();
        if self.cancel_jobs().is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + limit;
        while self.jobs_active() {
            if tokio::time::timeout_at(deadline, notices.recv())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Finished jobs of this thread whose messages wait for a turn.
    pub fn jobs_pending(&self) -> bool {
        self.jobs
            .as_ref()
            .is_some_and(|j| j.registry.has_pending(&self.id))
    }

    /// Running or pending-cancel jobs of this thread.
    pub fn jobs_active(&self) -> bool {
        self.jobs
            .as_ref()
            .is_some_and(|j| j.registry.has_active(&self.id))
    }

    /// The job registry, if jobs are enabled.
    pub fn job_registry(&self) -> Option<&Arc<JobRegistry>> {
        self.jobs.as_ref().map(|j| &j.registry)
    }

    /// Stop the input being processed; the session stays usable.
    pub fn interrupt(&self) {
        if let Some(token) = &self.lock().current {
            token.cancel();
        }
    }

    /// End the session: cancel the stream and running tools (their
    /// processes are killed), close subagents, emit SESSION_END. Safe to
    /// call more than once.
    pub async fn abort(&self) {
        self.end(ed::EndReason::Aborted).await;
    }

    /// End the session for `reason`: stop what runs (jobs, subagents),
    /// mark it closed in the store, and send SESSION_END last.
    pub async fn end(&self, reason: ed::EndReason) {
        {
            let mut inner = self.lock();
            if inner.state == SessionState::Closed {
                return;
            }
            inner.state = SessionState::Closed;
        }
        self.cancel.cancel();
        let mut fields = serde_json::Map::new();
        let why = match reason {
            ed::EndReason::Completed => "other",
            ed::EndReason::Aborted => "prompt_input_exit",
            ed::EndReason::Error => "error",
        };
        fields.insert("reason".into(), why.into());
        self.hooks_observe(crate::hooks::HookEvent::SessionEnd, why, fields)
            .await;
        self.stop_jobs(std::time::Duration::from_secs(5)).await;
        if let Some(children) = &self.children {
            children.close_all().await;
        }
        // Wait for the loop to notice, so nothing follows SESSION_END.
        let _running = self.run_lock.lock().await;
        self.mark_closed();
        self.bus
            .close_with(EventData::SessionEnd(ed::SessionEnded { reason }));
    }

    /// Keep in the store that this conversation is closed (a later
    /// `--resume` opens it again).
    fn mark_closed(&self) {
        if let Some(memory) = &self.memory
            && let Err(err) = memory.close()
        {
            tracing::warn!("session {}: could not mark it closed: {err}", self.id);
        }
    }

    /// Close after an unrecoverable error.
    pub(super) fn close_on_error(&self) {
        self.lock().state = SessionState::Closed;
        self.cancel.cancel();
        self.mark_closed();
        self.bus.close_with(EventData::SessionEnd(ed::SessionEnded {
            reason: ed::EndReason::Error,
        }));
    }

    /// Tell whoever watches this session about something that is not an
    /// error but matters (an ignored setting, an unconfined sandbox): a
    /// WARNING event.
    pub fn warn(&self, message: &str) {
        self.emit(EventData::Warning(ed::Warning {
            message: message.to_string(),
        }));
    }

    /// Tell whoever watches this session some news that is not a warning
    /// (a plugin reloaded): a NOTICE event, drawn where notes are (above
    /// the line being typed, never onto it).
    pub fn notice(&self, message: &str) {
        self.emit(EventData::Notice(EventData::text(message)));
    }

    /// Emit an event from this session.
    pub(super) fn emit(&self, data: EventData) {
        self.bus.emit(data);
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("session lock")
    }

    /// Append a turn.
    pub(super) fn push(&self, kind: TurnKind) {
        let mut inner = self.lock();
        if let TurnKind::Assistant { usage, .. } = &kind {
            inner.used.add(usage);
        }
        inner.history.push(Turn::new(kind));
    }

    /// Every token the model answers of this process used, as the provider
    /// reported them (compaction does not take any back).
    pub fn used(&self) -> crate::llm::Usage {
        self.lock().used
    }
}

/// When a job of this session finishes while it is idle, take a turn so the
/// model sees the result (a job finishing mid-turn is picked up at the next
/// boundary instead).
fn spawn_wake_listener(registry: &Arc<JobRegistry>, session: std::sync::Weak<Session>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut notices = registry.subscribe();
    runtime.spawn(async move {
        while let Some(notice) = notices.recv().await {
            let Some(session) = session.upgrade() else {
                return;
            };
            if notice.thread_id != session.id {
                continue;
            }
            session.emit(EventData::JobFinished(ed::JobFinished {
                job_id: notice.job_id.clone(),
                status: notice.status,
            }));
            if session.state() == SessionState::Closed {
                return;
            }
            let woken = session.clone();
            tokio::spawn(async move {
                let _ = woken.wake().await;
            });
        }
    });
}
