//! One path for every tool call, whoever makes it. A call is read once
//! ([`crate::tools::PreparedCall`]) and taken through fixed stages —
//! played back or live, judged by PreToolUse hooks, approved,
//! checkpointed before, run (inline or in the background), checkpointed
//! after, shown to PostToolUse hooks, receipted — listed in
//! [`STAGES`]. A front end (the agent's session, `mcp serve`, `sandcrab
//! tool call`) supplies only what differs: who is asked and how, where
//! checkpoints go, how the call is run and where its receipt is kept
//! ([`CallFront`]).

mod front;
mod hooked;
mod run;
mod stage;

pub use front::{Asked, CallFront, HookScene, Judgement};
pub use run::{Finished, run_call};
pub use stage::{STAGES, Stage};
