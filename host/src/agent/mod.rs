//! The agent: sessions, the agentic loop, events, provider profiles, the
//! system prompt, loop detection and subagents.

mod approval_gate;
mod build_error;
mod builder;
mod call_front;
mod config;
mod context_fit;
pub mod event_data;
mod events;
mod file_changes;
mod history;
pub mod live_plugins;
mod loop_detection;
pub mod memory;
mod model_wait;
pub mod playback;
mod profile;
pub mod prompt;
pub mod recall;
pub mod recorder;
pub mod recording;
pub mod repo_facts;
mod request_fit;
mod run_loop;
mod server_facts;
mod session;
mod session_hooks;
pub mod session_memory;
mod spend_gate;
mod subagents;
mod summarizer_setup;
mod tape;
mod tool_round;
pub mod tool_set;
mod traced;
mod turns;
pub mod window;
pub mod world;
mod write_order;

pub use builder::{AgentKit, AgentOptions, BuildError, resolve_provider};
pub use config::SessionConfig;
pub use event_data::{EndReason, TurnLimitKind};
pub use events::{Event, EventBus, EventData, EventKind, EventStream, next_ready};
pub use live_plugins::{LivePlugins, PluginReport};
pub use loop_detection::{LoopDetector, LoopFound, signature};
pub use memory::{SessionInfo, SessionMemory};
pub use profile::{Profile, ProfileError};
pub use session::{
    HostTools, Session, SessionChildren, SessionError, SessionJobs, SessionParts, SessionState,
};
pub use subagents::Subagents;
pub use tool_set::{Offer, ToolSelection};
pub use turns::{ToolResult, Turn, TurnKind, inputs, to_messages};

/// The names of the tools the host itself gives every session (jobs,
/// subagents, memory): a plugin tool of the same name is never offered.
pub fn host_tool_names() -> impl Iterator<Item = &'static str> {
    crate::jobs::TOOL_NAMES
        .iter()
        .chain(subagents::TOOL_NAMES)
        .chain(session_memory::tools::TOOL_NAMES)
        .copied()
}

#[cfg(test)]
mod tests;
