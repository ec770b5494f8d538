//! A loaded plugin: its manifest and grants, the pre-instantiated component
//! and the typed calls into it. Every call gets a fresh store and instance,
//! so a call that traps, times out or runs out of memory leaves nothing
//! behind for the next one.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap};

use super::cache::CacheOutcome;
use super::clock::{CallClock, TimedOut};
use super::error::CallError;
use super::manifest::{Manifest, PluginKind};
use super::policy::{Decision, Origin};
use super::sandbox::{GUEST_WORKSPACE, PluginSandbox};
use super::state::{HostState, new_store};
use super::types::{ProfileInfo, SummaryMessage, ToolCallContext, ToolFailure, ToolSpec};
use super::wit::WitVersion;
use super::wit::since_v0_1_0 as v0_1_0;

/// The pre-instantiated component, by ABI version and world.
pub(crate) enum Pre {
    ToolV0_1_0(v0_1_0::tool::ToolPluginPre<HostState>),
    ProfileV0_1_0(v0_1_0::profile::ProfilePluginPre<HostState>),
    SummarizerV0_1_0(v0_1_0::summarizer::SummarizerPluginPre<HostState>),
}

impl Pre {
    pub(crate) fn new(
        version: WitVersion,
        kind: PluginKind,
        pre: InstancePre<HostState>,
    ) -> wasmtime::Result<Pre> {
        Ok(match (version, kind) {
            (WitVersion::V0_1_0, PluginKind::Tool) => {
                Pre::ToolV0_1_0(v0_1_0::tool::ToolPluginPre::new(pre)?)
            }
            (WitVersion::V0_1_0, PluginKind::Profile) => {
                Pre::ProfileV0_1_0(v0_1_0::profile::ProfilePluginPre::new(pre)?)
            }
            (WitVersion::V0_1_0, PluginKind::Summarizer) => {
                Pre::SummarizerV0_1_0(v0_1_0::summarizer::SummarizerPluginPre::new(pre)?)
            }
        })
    }
}

/// Run `$call` on a fresh instance of `$pre` in a fresh store, under the
/// plugin's instance limit (waited for a bounded time) and a wall-clock
/// bound of `$limit`; a failure is classified (busy, timeout, out of
/// memory, trap, invalid result). Every call into a plugin goes through
/// here, so every call gets the same limits.
macro_rules! in_fresh_instance {
    ($self:ident, $live:expr, $limit:expr, $pre:expr, |$instance:ident, $store:ident| $call:expr) => {{
        let _permit = $self.permit().await?;
        let limit: std::time::Duration = $limit;
        let clock = CallClock::with_budget(limit, $self.sandbox.process_budget);
        let mut $store = $self.store($live, clock.clone())?;
        let bounded = clock
            .bound(async {
                let $instance = $pre.instantiate_async(&mut $store).await?;
                $call
            })
            .await;
        match bounded {
            Ok(result) => result.map_err(|e| $self.classify(e, &$store)),
            Err(TimedOut) => Err(CallError::Timeout {
                plugin: $self.name().to_string(),
                limit_ms: limit.as_millis() as u64,
            }),
        }
    }};
}

/// Longest wait for a free instance before a call fails as busy.
pub const INSTANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest a load-time call (listing tools, profile facts) may take.
pub const LOAD_CALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A plugin ready to be called.
pub struct LoadedPlugin {
    pub manifest: Manifest,
    pub origin: Origin,
    /// Where it came from (the manifest path, or `builtin:NAME/plugin.toml`).
    pub source: PathBuf,
    pub version: WitVersion,
    /// Request ∩ grant, and what was refused.
    pub decision: Decision,
    /// Whether the compiled component came from the cache.
    pub cache: CacheOutcome,
    /// The tools of a tool plugin (empty otherwise).
    pub tools: Vec<ToolSpec>,
    pub(crate) sandbox: Arc<PluginSandbox>,
    pre: Pre,
    engine: wasmtime::Engine,
    instances: Arc<Semaphore>,
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

impl LoadedPlugin {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        manifest: Manifest,
        origin: Origin,
        source: PathBuf,
        version: WitVersion,
        decision: Decision,
        cache: CacheOutcome,
        sandbox: Arc<PluginSandbox>,
        pre: Pre,
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
            tools: Vec::new(),
            sandbox,
            pre,
            engine,
            instances: Arc::new(Semaphore::new(permits)),
        }
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

    /// Call tool `name` with `args_json`. Output of programs the tool starts
    /// is also sent to `live` as it arrives.
    pub async fn call_tool(
        &self,
        name: &str,
        args_json: &str,
        ctx: &ToolCallContext,
        live: Option<crate::process::LiveOutput>,
    ) -> Result<String, ToolCallError> {
        let Pre::ToolV0_1_0(pre) = &self.pre else {
            return Err(self.not_a("tool").into());
        };
        let wit_ctx = v0_1_0::tool::sandcrab::plugin::types::CallContext {
            workspace_root: GUEST_WORKSPACE.to_string(),
            host_workspace_root: self.sandbox.host_workspace.display().to_string(),
            session_id: ctx.session_id.clone(),
            call_id: ctx.call_id.clone(),
        };
        let outcome = in_fresh_instance!(self, live, self.call_limit(), pre, |instance, store| {
            instance
                .sandcrab_plugin_tool()
                .call_call(&mut store, name, args_json, &wit_ctx)
                .await
        });
        use v0_1_0::tool::sandcrab::plugin::types::ToolError as E;
        match outcome? {
            Ok(output) => Ok(output),
            Err(E::InvalidArguments(m)) => Err(ToolFailure::InvalidArguments(m).into()),
            Err(E::Denied(m)) => Err(ToolFailure::Denied(m).into()),
            Err(E::Failed(m)) => Err(ToolFailure::Failed(m).into()),
        }
    }

    /// Ask a tool plugin for its tool specs (raw, unvalidated).
    pub(crate) async fn list_tools(&self) -> Result<Vec<(String, String, String)>, CallError> {
        let Pre::ToolV0_1_0(pre) = &self.pre else {
            return Err(self.not_a("tool"));
        };
        let specs = in_fresh_instance!(self, None, self.load_limit(), pre, |instance, store| {
            instance.sandcrab_plugin_tool().call_tools(&mut store).await
        })?;
        Ok(specs
            .into_iter()
            .map(|s| (s.name, s.description, s.parameters_schema))
            .collect())
    }

    /// A profile plugin's facts.
    pub async fn profile_info(&self) -> Result<ProfileInfo, CallError> {
        let Pre::ProfileV0_1_0(pre) = &self.pre else {
            return Err(self.not_a("profile"));
        };
        let info = in_fresh_instance!(self, None, self.load_limit(), pre, |instance, store| {
            instance
                .sandcrab_plugin_profile()
                .call_info(&mut store)
                .await
        })?;
        Ok(ProfileInfo {
            id: info.id,
            adapter: info.adapter,
            default_model: info.default_model,
            context_window: info.context_window,
            parallel_tool_calls: info.parallel_tool_calls,
            tool_names: info.tool_names,
            project_doc_files: info.project_doc_files,
        })
    }

    /// A profile plugin's base instructions.
    pub async fn base_instructions(&self) -> Result<String, CallError> {
        let Pre::ProfileV0_1_0(pre) = &self.pre else {
            return Err(self.not_a("profile"));
        };
        in_fresh_instance!(self, None, self.load_limit(), pre, |instance, store| {
            instance
                .sandcrab_plugin_profile()
                .call_base_instructions(&mut store)
                .await
        })
    }

    /// Render the summarization prompt with a summarizer plugin.
    pub async fn render_summary_prompt(
        &self,
        persona: &str,
        existing_summary: &str,
        messages: &[SummaryMessage],
    ) -> Result<String, CallError> {
        let Pre::SummarizerV0_1_0(pre) = &self.pre else {
            return Err(self.not_a("summarizer"));
        };
        use v0_1_0::summarizer::exports::sandcrab::plugin::summarizer::Message;
        let messages: Vec<Message> = messages
            .iter()
            .map(|m| Message {
                role: m.role.clone(),
                content: m.content.clone(),
            })
            .collect();
        in_fresh_instance!(self, None, self.call_limit(), pre, |instance, store| {
            instance
                .sandcrab_plugin_summarizer()
                .call_render(&mut store, persona, existing_summary, &messages)
                .await
        })
    }

    /// The plugin's time limit per call.
    fn call_limit(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.decision.grants.limits.timeout_ms)
    }

    /// The time limit of a load-time call.
    fn load_limit(&self) -> std::time::Duration {
        self.call_limit().min(LOAD_CALL_LIMIT)
    }

    /// A free instance slot, waited for at most [`INSTANCE_WAIT`] (or the
    /// plugin's own time limit, if shorter).
    async fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, CallError> {
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

    fn store(
        &self,
        live: Option<crate::process::LiveOutput>,
        clock: std::sync::Arc<CallClock>,
    ) -> Result<Store<HostState>, CallError> {
        new_store(
            &self.engine,
            &self.sandbox,
            &self.decision.grants.limits,
            live,
            clock,
        )
        .map_err(|e| self.setup_error(format!("{e:#}")))
    }

    fn setup_error(&self, message: String) -> CallError {
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
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::Timeout {
                plugin,
                limit_ms: limits.timeout_ms,
            },
            Some(trap) => CallError::Trap {
                plugin,
                message: first_lines(&format!("{trap}: {err:?}"), 12),
            },
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
