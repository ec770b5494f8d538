//! The plugin runtime: manifests and policy, the engine and its on-disk
//! cache, per-call sandboxed stores, the host imports, and loading.

use sandcrab_core::user_files;
use sandcrab_kept::{self as kept, safe_fs};
use sandcrab_process as process;
use sandcrab_store::tls;

mod cache;
pub mod clock;
pub mod confinement;
mod context;
pub mod discovery;
mod embedded;
mod engine;
mod error;
mod guest_log;
mod host;
pub mod http;
mod imports;
pub mod integrity;
mod loaded;
pub mod manifest;
pub mod policy;
mod reading;
mod sandbox;
mod state;
mod tool_call;
pub mod tool_owners;
mod types;
mod warm;
mod warm_pool;
pub mod watch;
pub mod wit;

pub use crate::process::find_on_path;
pub use cache::{CacheOutcome, ComponentCache};
pub use discovery::PluginSource;
pub use engine::{EPOCH_TICK, EngineOptions, PluginEngine};
pub use error::{CallError, EngineError, LoadError};
pub use host::{
    Admission, Admitted, Checked, CompilingNotice, Diagnostic, HostError, MAX_SHARDS, PluginHost,
    PluginHostConfig, Severity, default_max_shards,
};
pub use loaded::{LoadedPlugin, ToolCallError};
pub use manifest::{Access, Manifest, PluginKind};
pub use policy::{PluginOrigin, Policy, PolicyMode, SandboxMode};
pub use reading::{
    MAX_COMPONENT_BYTES, MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_PLUGIN,
    component_digest,
};
pub use sandbox::{
    GUEST_WORKSPACE, Mount, PluginSandbox, SandboxContext, host_path_of, scratch_warning,
};
pub use types::{
    ActivityLog, CallActivity, HttpExchange, ModelUse, ProfileInfo, ProgramConfinement, ProgramRun,
    SummaryMessage, ToolCallContext, ToolFailure, ToolOutput, ToolSpec, ToolTraits, TruncateMode,
    TruncationLimits, Writes,
};
