//! A loaded plugin: its manifest and grants, the pre-instantiated component
//! behind a version-neutral guest interface, and the calls into it. Every
//! call gets a fresh store and instance, so a call that traps, times out or
//! runs out of memory leaves nothing behind for the next one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use wasmtime::{Store, Trap};

use super::cache::CacheOutcome;
use super::clock::{CallClock, TimedOut};
use super::error::CallError;
use super::manifest::{Manifest, PluginKind};
use super::policy::{GrantDecision, PluginOrigin};
use super::sandbox::{GUEST_WORKSPACE, PluginSandbox};
use super::state::{HostState, new_store};
use super::types::{ProfileInfo, SummaryMessage, ToolCallContext, ToolFailure, ToolSpec};
use super::wit::{Guest, GuestContext, ProfileGuest, RawTool, ShardedGuest, ToolGuest, WitVersion};

/// Longest wait for a free instance before a call fails as busy.
pub const INSTANCE_WAIT: Duration = Duration::from_secs(30);

/// Longest a load-time call (listing tools, profile facts) may take.
pub const LOAD_CALL_LIMIT: Duration = Duration::from_secs(10);

/// Calls of one plugin that may run in the background at once (they do not
/// count against its instance limit, which is for calls the agent waits on).
pub const MAX_BACKGROUND_CALLS: usize = 64;

/// A plugin ready to be called.
pub struct LoadedPlugin {
    pub manifest: Manifest,
    pub origin: PluginOrigin,
    /// Where it came from (the manifest path, or `builtin:NAME/plugin.toml`).
    pub source: PathBuf,
    pub version: WitVersion,
    /// Request ∩ grant, and what was refused.
    pub decision: GrantDecision,
    /// Whether the compiled component came from the cache.
    pub cache: CacheOutcome,
    /// SHA-256 (hex) of the component it runs.
    pub component_sha256: String,
    /// Who signed its component and manifest (`NAME (SHA256:…)`), when a
    /// trusted signature was checked at load.
    pub signer: Option<String>,
    /// The tools of a tool plugin (empty otherwise).
    pub tools: Vec<ToolSpec>,
    pub(crate) sandbox: Arc<PluginSandbox>,
    guest: Guest,
    /// The optional `sandcrab:shards` export of a tool plugin and the most
    /// shards a call may use.
    pub(super) sharding: Option<(Arc<dyn ShardedGuest>, usize)>,
    /// Calls that ran as shards so far.
    pub(super) sharded_calls: std::sync::atomic::AtomicU64,
    engine: wasmtime::Engine,
    pub(super) instances: Arc<Semaphore>,
    background: Arc<Semaphore>,
    /// Idle instances kept for reuse (plugins that allow it only).
    pub(super) warm: Option<super::warm_pool::WarmInstances>,
}

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    /// The tool ran and reported a failure.
    #[error(transparent)]
    Tool(#[from] ToolFailure),
    /// The plugin could not complete the call.
    #[error(transparent)]
    Runtime(#[from] CallError),
}

/// Whether the call moved to the background (false: it never will).
async fn moved_to_background(detach: &mut Option<tokio::sync::watch::Receiver<bool>>) -> bool {
    let Some(rx) = detach else {
        return std::future::pending().await;
    };
    rx.wait_for(|moved| *moved).await.is_ok()
}

/// A call in progress: its instance slot, clock and store.
pub(super) struct FreshCall {
    permit: tokio::sync::OwnedSemaphorePermit,
    clock: Arc<CallClock>,
    limit: Duration,
    store: Store<HostState>,
    /// See [`CallSetup::on_own_thread`].
    on_own_thread: bool,
}

/// One call's parameters besides the guest work itself.
pub(super) struct CallSetup {
    /// The guest runs on a blocking-pool thread of its own, where its WASI
    /// file operations run directly, instead of on the caller's task, where
    /// each of them hops to the blocking pool.
    on_own_thread: bool,
    live: Option<crate::process::LiveOutput>,
    limit: Duration,
    /// Where the guest's programs run by default (0.2.0 guests).
    working_dir: Option<String>,
    /// Where the call's programs are recorded (tool calls only).
    programs: Option<super::types::ActivityLog>,
    /// The call was given the network (see [`ToolCallContext::network`]).
    network: bool,
}

impl CallSetup {
    /// The same call given at most `limit` (the rest of a time limit that
    /// earlier parts of the call used some of).
    pub(super) fn within(mut self, limit: Duration) -> Self {
        self.limit = self.limit.min(limit);
        self
    }
}

impl LoadedPlugin {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        manifest: Manifest,
        origin: PluginOrigin,
        source: PathBuf,
        version: WitVersion,
        decision: GrantDecision,
        cache: CacheOutcome,
        sandbox: Arc<PluginSandbox>,
        guest: Guest,
        engine: wasmtime::Engine,
    ) -> Self {
        let permits = decision.grants.limits.max_instances as usize;
        LoadedPlugin {
            manifest,
            origin,
            source,
            version,
            decision,
            cache,
            component_sha256: String::new(),
            signer: None,
            tools: Vec::new(),
            sandbox,
            guest,
            sharding: None,
            sharded_calls: std::sync::atomic::AtomicU64::new(0),
            engine,
            instances: Arc::new(Semaphore::new(permits)),
            background: Arc::new(Semaphore::new(MAX_BACKGROUND_CALLS)),
            warm: None,
        }
    }

    /// Call warm instances again (the plugin allows reuse), keeping idle
    /// ones under the host-wide `allowance`.
    pub(crate) fn allow_reuse(&mut self, allowance: Arc<Semaphore>) {
        let max = self.decision.grants.limits.max_instances;
        self.warm = Some(super::warm_pool::WarmInstances::new(max, allowance));
    }

    /// Instances kept idle for reuse now (0 for a plugin without reuse).
    pub fn idle_instances(&self) -> usize {
        self.warm.as_ref().map_or(0, |w| w.idle())
    }

    /// Resources (open files, streams, …) its idle warm instances hold:
    /// host file descriptors among them.
    pub fn idle_resources(&self) -> usize {
        self.warm.as_ref().map_or(0, |w| w.idle_resources())
    }

    /// Let calls of the tools this plugin's `sandcrab:shards` export
    /// names run as up to `max_shards` shards.
    pub(crate) fn allow_shards(&mut self, guest: Arc<dyn ShardedGuest>, max_shards: usize) {
        self.sharding = Some((guest, max_shards));
    }

    /// How many calls ran as several shards so far (a diagnostic: calls
    /// run whole when no instance slot is free).
    pub fn sharded_calls(&self) -> u64 {
        self.sharded_calls
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The plugin's kind.
    pub fn kind(&self) -> PluginKind {
        self.manifest.kind
    }

    /// The plugin's sandbox (mounts, programs, confinement).
    pub fn sandbox(&self) -> &PluginSandbox {
        &self.sandbox
    }

    /// How a tool call (or a shard of one) runs. A plain call runs on the
    /// caller's task: no thread hop, and the file operations of the tools
    /// that matter go through `sandcrab:fs`, which never blocks (FIFOs are
    /// opened non-blocking and refused); WASI file operations hop to the
    /// blocking pool one by one. Shards run on threads of their own, so
    /// they use several cores whatever the caller's runtime.
    pub(super) fn tool_call_setup(
        &self,
        guest_ctx: &GuestContext,
        live: Option<crate::process::LiveOutput>,
        on_own_thread: bool,
        ctx: &ToolCallContext,
    ) -> CallSetup {
        CallSetup {
            on_own_thread,
            live,
            limit: self.call_limit(),
            working_dir: Some(guest_ctx.working_dir.clone()),
            programs: ctx.programs.clone(),
            network: ctx.network,
        }
    }

    /// What the guest is told about a call.
    pub(super) fn guest_context(&self, ctx: &ToolCallContext) -> GuestContext {
        GuestContext {
            workspace_root: GUEST_WORKSPACE.to_string(),
            host_workspace_root: self.sandbox.host_workspace.display().to_string(),
            working_dir: self.guest_working_dir(ctx.working_dir.as_deref()),
            session_id: ctx.session_id.clone(),
            call_id: ctx.call_id.clone(),
            sandbox_mode: self.sandbox.sandbox_mode,
            protected: self.sandbox.protected.clone(),
            time_budget_ms: self.call_limit().as_millis() as u64,
            background: ctx.background,
        }
    }

    /// Run `work` in `call`'s fresh instance, on the caller's task or on a
    /// blocking-pool thread of its own (see [`CallSetup::on_own_thread`]).
    /// Either way the wall clock is kept out here: a guest spinning is
    /// interrupted by its epoch deadline, and one blocked in the kernel (a
    /// FIFO) is abandoned at the limit, its blocking thread left to finish
    /// alone. Dropping the returned future (an interrupt, an abort, the
    /// limit) drops the guest's work too, which stops the programs it runs.
    /// When `detach` turns true the call gives up its instance slot for a
    /// background one.
    pub(super) async fn run_guest<T, W>(
        &self,
        call: FreshCall,
        detach: Option<tokio::sync::watch::Receiver<bool>>,
        work: W,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        W: for<'s> FnOnce(
                &'s mut Store<HostState>,
            ) -> futures::future::BoxFuture<'s, wasmtime::Result<T>>
            + Send
            + 'static,
    {
        let (result, _slot) = self.run_guest_keeping_slot(call, detach, work).await?;
        Ok(result)
    }

    /// [`Self::run_guest`], handing back the instance slot of a call that
    /// ended (its instance gone) for the caller's next instance; a call that
    /// failed or timed out gives its slot up.
    pub(super) async fn run_guest_keeping_slot<T, W>(
        &self,
        call: FreshCall,
        detach: Option<tokio::sync::watch::Receiver<bool>>,
        work: W,
    ) -> Result<(T, tokio::sync::OwnedSemaphorePermit), CallError>
    where
        T: Send + 'static,
        W: for<'s> FnOnce(
                &'s mut Store<HostState>,
            ) -> futures::future::BoxFuture<'s, wasmtime::Result<T>>
            + Send
            + 'static,
    {
        let FreshCall {
            mut permit,
            clock,
            limit,
            mut store,
            on_own_thread,
        } = call;
        if !on_own_thread {
            let done = {
                let work = clock.bound(work(&mut store));
                self.detachable(work, detach, &mut permit).await
            };
            return Ok((self.conclude(done, &store, limit)?, permit));
        }
        let handle = tokio::runtime::Handle::current();
        let cancel = tokio_util::sync::CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let task = tokio::task::spawn_blocking(move || {
            let result = handle.block_on(async {
                tokio::select! {
                    r = work(&mut store) => Some(r),
                    () = cancel.cancelled() => None,
                }
            });
            (store, result)
        });
        let done = self
            .detachable(clock.bound(task), detach, &mut permit)
            .await;
        match done {
            Ok(Ok((store, Some(result)))) => {
                Ok((self.conclude(Ok(result), &store, limit)?, permit))
            }
            Ok(Ok((_, None))) => Err(self.setup_error("the call was cancelled".into())),
            Ok(Err(join)) => Err(self.setup_error(format!("the call's thread failed: {join}"))),
            Err(TimedOut) => Err(self.timeout(limit)),
        }
    }

    /// Await `work`; if `detach` turns true meanwhile (the call moved to
    /// the background), trade `permit` for a background slot.
    pub(super) async fn detachable<F: std::future::Future>(
        &self,
        work: F,
        mut detach: Option<tokio::sync::watch::Receiver<bool>>,
        permit: &mut tokio::sync::OwnedSemaphorePermit,
    ) -> F::Output {
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return done,
                moved = moved_to_background(&mut detach) => {
                    detach = None;
                    if moved {
                        // Free the foreground slot for calls the agent waits
                        // on; hold a background one if there is room.
                        match self.background.clone().try_acquire_owned() {
                            Ok(slot) => *permit = slot,
                            Err(_) => tracing::debug!(
                                "plugin {}: no background slot free; the call keeps its instance slot",
                                self.name()
                            ),
                        }
                    }
                }
            }
        }
    }

    /// `dir` (a host directory inside the workspace) as the guest sees it.
    fn guest_working_dir(&self, dir: Option<&std::path::Path>) -> String {
        let rest = dir.and_then(|d| d.strip_prefix(&self.sandbox.host_workspace).ok());
        match rest {
            Some(rest) if !rest.as_os_str().is_empty() => {
                format!("{GUEST_WORKSPACE}/{}", rest.display())
            }
            _ => GUEST_WORKSPACE.to_string(),
        }
    }

    /// Ask a tool plugin for its tools (raw, unvalidated).
    /// Tools that its `sandcrab:shards` export names are marked shardable.
    pub(crate) async fn list_tools(&self) -> Result<Vec<RawTool>, CallError> {
        let guest = self.tool_guest()?;
        let mut tools = {
            let mut call = self.fresh_instance(self.load_setup()).await?;
            let done = call.clock.bound(guest.tools(&mut call.store)).await;
            self.conclude(done, &call.store, call.limit)?
        };
        // The first instance's slot is free again (a plugin may have one).
        if let Some((sharded, _)) = &self.sharding {
            let mut call = self.fresh_instance(self.load_setup()).await?;
            let done = call.clock.bound(sharded.shardable(&mut call.store)).await;
            let names = self.conclude(done, &call.store, call.limit)?;
            for tool in &mut tools {
                tool.traits.shardable = names.contains(&tool.name);
            }
        }
        Ok(tools)
    }

    /// A profile plugin's facts.
    pub async fn profile_info(&self) -> Result<ProfileInfo, CallError> {
        let guest = self.profile_guest()?;
        let mut call = self.fresh_instance(self.load_setup()).await?;
        let done = call.clock.bound(guest.info(&mut call.store)).await;
        self.conclude(done, &call.store, call.limit)
    }

    /// A profile plugin's base instructions.
    pub async fn base_instructions(&self) -> Result<String, CallError> {
        let guest = self.profile_guest()?;
        let mut call = self.fresh_instance(self.load_setup()).await?;
        let done = call
            .clock
            .bound(guest.base_instructions(&mut call.store))
            .await;
        self.conclude(done, &call.store, call.limit)
    }

    /// Render the summarization prompt with a summarizer plugin.
    pub async fn render_summary_prompt(
        &self,
        persona: &str,
        existing_summary: &str,
        messages: &[SummaryMessage],
    ) -> Result<String, CallError> {
        let Guest::Summarizer(guest) = &self.guest else {
            return Err(self.not_a("summarizer"));
        };
        let setup = CallSetup {
            on_own_thread: false,
            live: None,
            limit: self.call_limit(),
            working_dir: None,
            programs: None,
            network: false,
        };
        let mut call = self.fresh_instance(setup).await?;
        let done = call
            .clock
            .bound(guest.render(&mut call.store, persona, existing_summary, messages))
            .await;
        self.conclude(done, &call.store, call.limit)
    }

    pub(super) fn tool_guest(&self) -> Result<Arc<dyn ToolGuest>, CallError> {
        match &self.guest {
            Guest::Tool(g) => Ok(g.clone()),
            _ => Err(self.not_a("tool")),
        }
    }

    fn profile_guest(&self) -> Result<&dyn ProfileGuest, CallError> {
        match &self.guest {
            Guest::Profile(g) => Ok(g.as_ref()),
            _ => Err(self.not_a("profile")),
        }
    }

    /// A fresh store for one call, under the plugin's instance limit
    /// (waited for a bounded time) and the call's wall-clock clock. Every
    /// call into a plugin goes through here and [`Self::conclude`], so every
    /// call gets the same limits: the caller runs the guest work under
    /// `call.clock.bound(...)`.
    async fn fresh_instance(&self, setup: CallSetup) -> Result<FreshCall, CallError> {
        let permit = self.permit().await?;
        self.fresh_instance_holding(permit, setup)
    }

    /// A fresh store for one call that already holds its instance slot.
    pub(super) fn fresh_instance_holding(
        &self,
        permit: tokio::sync::OwnedSemaphorePermit,
        setup: CallSetup,
    ) -> Result<FreshCall, CallError> {
        let clock = CallClock::new(setup.limit);
        let store = self.new_call_store(super::state::CallParts {
            live_output: setup.live,
            clock: clock.clone(),
            working_dir: setup.working_dir,
            on_own_thread: setup.on_own_thread,
            programs: setup.programs,
            network: setup.network,
        })?;
        Ok(FreshCall {
            permit,
            clock,
            limit: setup.limit,
            store,
            on_own_thread: setup.on_own_thread,
        })
    }

    /// The result of a call with `store` and the time limit `limit`, a
    /// failure classified (timeout, out of memory, trap, invalid result).
    pub(super) fn conclude<T>(
        &self,
        done: Result<wasmtime::Result<T>, TimedOut>,
        store: &Store<HostState>,
        limit: Duration,
    ) -> Result<T, CallError> {
        match done {
            Ok(result) => result.map_err(|e| self.classify(e, store)),
            Err(TimedOut) => Err(self.timeout(limit)),
        }
    }

    /// A call that reached its time limit `limit`.
    fn timeout(&self, limit: Duration) -> CallError {
        CallError::Timeout {
            plugin: self.name().to_string(),
            limit_ms: limit.as_millis() as u64,
        }
    }

    /// The plugin's time limit per call.
    pub(super) fn call_limit(&self) -> Duration {
        Duration::from_millis(self.decision.grants.limits.timeout_ms)
    }

    /// Settings of a load-time call.
    fn load_setup(&self) -> CallSetup {
        CallSetup {
            on_own_thread: false,
            live: None,
            limit: self.call_limit().min(LOAD_CALL_LIMIT),
            working_dir: None,
            programs: None,
            network: false,
        }
    }

    /// A free instance slot, waited for at most [`INSTANCE_WAIT`] (or the
    /// plugin's own time limit, if shorter).
    pub(super) async fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, CallError> {
        let wait = INSTANCE_WAIT.min(self.call_limit());
        match tokio::time::timeout(wait, self.instances.clone().acquire_owned()).await {
            Ok(permit) => permit.map_err(|e| self.setup_error(e.to_string())),
            Err(_) => Err(CallError::Busy {
                plugin: self.name().to_string(),
                instances: self.decision.grants.limits.max_instances,
                waited_ms: wait.as_millis() as u64,
            }),
        }
    }

    /// A new store for a call made of `parts`, in this plugin's sandbox
    /// and under its limits.
    pub(super) fn new_call_store(
        &self,
        parts: super::state::CallParts,
    ) -> Result<Store<HostState>, CallError> {
        new_store(
            &self.engine,
            &self.sandbox,
            &self.decision.grants.limits,
            parts,
        )
        .map_err(|e| self.setup_error(format!("{e:#}")))
    }

    pub(super) fn setup_error(&self, message: String) -> CallError {
        CallError::Setup {
            plugin: self.name().to_string(),
            message,
        }
    }

    fn not_a(&self, kind: &str) -> CallError {
        self.setup_error(format!(
            "it is a {} plugin, not a {kind} plugin",
            self.kind()
        ))
    }

    /// Turn a wasmtime error into the reason the call failed.
    fn classify(&self, err: wasmtime::Error, store: &Store<HostState>) -> CallError {
        let plugin = self.name().to_string();
        let limits = &self.decision.grants.limits;
        if store.data().memory_exhausted() {
            return CallError::OutOfMemory {
                plugin,
                limit_mb: limits.memory_mb,
            };
        }
        if err.chain().any(|e| {
            e.downcast_ref::<wasmtime::component::ResourceTableError>()
                .is_some()
        }) {
            return CallError::TooManyResources {
                plugin,
                limit: super::state::MAX_RESOURCES_PER_STORE,
            };
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::Timeout {
                plugin,
                limit_ms: limits.timeout_ms,
            },
            Some(trap) => {
                // The guest's own words first; wasmtime's frames (named by
                // the guest) only in the log, with -v.
                if let Some(frames) = err.downcast_ref::<wasmtime::WasmBacktrace>() {
                    tracing::info!(target: "sandcrab::plugin", plugin = %plugin, "crashed: {trap}");
                    for line in frames.to_string().lines() {
                        let line = super::guest_log::inert(line);
                        tracing::info!(target: "sandcrab::plugin", plugin = %plugin, "{line}");
                    }
                }
                let message = match store.data().log.last_words() {
                    Some(words) => format!("{words} ({trap})"),
                    None => format!("{trap} (run with -v for the wasm backtrace)"),
                };
                CallError::Trap { plugin, message }
            }
            None => CallError::InvalidResult {
                plugin,
                message: first_lines(&format!("{err:#}"), 12),
            },
        }
    }
}

fn first_lines(text: &str, n: usize) -> String {
    let mut lines: Vec<&str> = text.lines().take(n + 1).collect();
    if lines.len() > n {
        lines.truncate(n);
        lines.push("…");
    }
    lines.join("\n")
}
