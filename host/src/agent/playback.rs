//! What a replayed session takes from its recording instead of the world
//! (`replay/` implements it; [`super::tape`] asks it).

use crate::llm::ToolCall;
use crate::tools::{ToolOutcome, ToolRegistry};

/// What a replayed session takes from its recording instead of the world.
pub trait Playback: Send + Sync {
    /// Steering drained here in the recording.
    fn steering(&self) -> Vec<String>;
    /// Job messages injected here in the recording.
    fn job_messages(&self) -> Vec<String>;
    /// Whether the operator interrupted before this round.
    fn interrupted_before_round(&self) -> bool;
    /// The tools offered from this request on, when they changed here.
    fn tools(&self) -> Option<ToolRegistry>;
    /// What `call` answered.
    fn tool_outcome(&self, call: &ToolCall) -> Played;
    /// The next time the session read for a turn.
    fn now(&self) -> String;
    /// What the hooks of `event` answered here (None: none ran).
    fn hooked(&self, event: &str) -> Option<crate::hooks::HookAnswer>;
}

/// A tool call's answer from a recording.
pub enum Played {
    Outcome(Box<ToolOutcome>),
    /// The operator interrupted the round before this call answered.
    Interrupt,
}
