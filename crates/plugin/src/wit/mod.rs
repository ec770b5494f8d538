//! The plugin ABI versions the host understands. Each released version is
//! frozen in its own module (bindings generated from `wit/since_vX.Y.Z`)
//! and adapts its components to the version-neutral guest interfaces below
//! ([`ToolGuest`], [`ProfileGuest`], [`SummarizerGuest`]); the rest of the
//! host never sees a version. [`detect`] tells which version and world a
//! component implements.

#[macro_use]
mod bind;
#[macro_use]
mod fs_bind;
pub mod fs_v0_1_0;
pub mod fs_v0_2_0;
pub mod shards_v0_1_0;

use async_trait::async_trait;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use super::manifest::PluginKind;
use super::state::HostState;
use super::types::{ProfileInfo, SummaryMessage, ToolFailure, ToolOutput, ToolTraits};

versions! {
    V0_3_0 = "0.3.0" => since_v0_3_0,
    V0_2_0 = "0.2.0" => since_v0_2_0,
    V0_1_0 = "0.1.0" => since_v0_1_0,
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool as a plugin declared it, before validation.
#[derive(Debug, Clone)]
pub struct RawTool {
    pub name: String,
    pub description: String,
    /// The parameters schema as JSON text.
    pub schema: String,
    pub traits: ToolTraits,
}

/// What a tool call is told, in guest terms.
#[derive(Debug, Clone)]
pub struct GuestContext {
    /// The workspace root inside the guest (`/workspace`).
    pub workspace_root: String,
    /// The workspace root on the host (what the model sees).
    pub host_workspace_root: String,
    /// Where the agent works, inside the guest.
    pub working_dir: String,
    pub session_id: String,
    pub call_id: String,
    /// How the programs the call starts are confined.
    pub sandbox_mode: crate::process::SandboxMode,
    /// Workspace paths no tool may write (relative, `/`-separated).
    pub protected: Vec<String>,
    /// How long the host lets the call run.
    pub time_budget_ms: u64,
    /// The call runs as a background job.
    pub background: bool,
}

/// A tool plugin's component, whatever its ABI version. Each call
/// instantiates it in the given (fresh) store.
#[async_trait]
pub trait ToolGuest: Send + Sync {
    async fn tools(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<RawTool>>;
    async fn call(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
    ) -> wasmtime::Result<Result<ToolOutput, ToolFailure>> {
        let instance = self.instantiate(store).await?;
        instance.call(store, name, args_json, ctx).await
    }
    /// An instance in `store`, to be called once or, for a plugin that
    /// allows reuse, again and again in the same store.
    async fn instantiate(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Box<dyn ToolInstance>>;
}

/// A tool plugin's instance in its store, whatever its ABI version.
#[async_trait]
pub trait ToolInstance: Send + Sync {
    async fn call(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
    ) -> wasmtime::Result<Result<ToolOutput, ToolFailure>>;
}

/// Which part of a sharded call an instance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// One finding of a shard, placed in the answer by (`major`, `minor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub major: u64,
    pub minor: u64,
    pub text: String,
}

/// What one shard found.
#[derive(Debug, Clone, Default)]
pub struct ShardOutput {
    pub pieces: Vec<Piece>,
    /// The shard stopped before doing all of its part.
    pub stopped_early: bool,
}

/// A tool plugin's optional `sandcrab:shards` export: one call run as
/// several shards in separate instances, then merged in one more.
#[async_trait]
pub trait ShardedGuest: Send + Sync {
    /// The tools that may be sharded.
    async fn shardable(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<String>>;
    /// Run part `shard` of a call.
    async fn call_shard(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
        shard: Shard,
    ) -> wasmtime::Result<Result<ShardOutput, ToolFailure>>;
    /// The call's answer from every shard's pieces, in key order.
    async fn merge(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
        pieces: Vec<Piece>,
        stopped_early: bool,
    ) -> wasmtime::Result<Result<ToolOutput, ToolFailure>>;
}

/// A profile plugin's component, whatever its ABI version.
#[async_trait]
pub trait ProfileGuest: Send + Sync {
    async fn info(&self, store: &mut Store<HostState>) -> wasmtime::Result<ProfileInfo>;
    async fn base_instructions(&self, store: &mut Store<HostState>) -> wasmtime::Result<String>;
}

/// A summarizer plugin's component, whatever its ABI version.
#[async_trait]
pub trait SummarizerGuest: Send + Sync {
    async fn render(
        &self,
        store: &mut Store<HostState>,
        persona: &str,
        existing_summary: &str,
        messages: &[SummaryMessage],
    ) -> wasmtime::Result<String>;
}

/// A linked component behind its world's guest interface.
pub enum Guest {
    /// Shared: a tool call runs on its own thread (see `LoadedPlugin::call_tool`).
    Tool(std::sync::Arc<dyn ToolGuest>),
    Profile(Box<dyn ProfileGuest>),
    Summarizer(Box<dyn SummarizerGuest>),
}

/// The exported instance names of `component` (e.g.
/// `sandcrab:plugin/tool@0.2.0`).
pub fn export_names(component: &Component, engine: &Engine) -> Vec<String> {
    component
        .component_type()
        .exports(engine)
        .filter(|(_, item)| matches!(item.ty, ComponentItem::ComponentInstance(_)))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Which ABI version of `kind`'s world `component` implements, or a message
/// saying what it exports instead.
pub fn detect(
    component: &Component,
    engine: &Engine,
    kind: PluginKind,
) -> Result<WitVersion, String> {
    let exports = export_names(component, engine);
    let wanted = format!("sandcrab:plugin/{}@", kind.export_interface());
    for name in &exports {
        if let Some(version) = name.strip_prefix(&wanted) {
            return WitVersion::parse(version).ok_or_else(|| {
                format!(
                    "it exports {name}, an ABI version this host does not know (supported: {})",
                    SUPPORTED_VERSIONS.join(", ")
                )
            });
        }
    }
    let found = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    Err(format!(
        "manifest says kind = \"{kind}\" (world {}), so the component must export sandcrab:plugin/{}@{} (or an earlier supported version), but it exports {found}",
        kind.world(),
        kind.export_interface(),
        SUPPORTED_VERSIONS[0]
    ))
}
