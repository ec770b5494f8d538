//! Background tool jobs: a tool call either returns inline or starts one
//! job; jobs belong to a thread (conversation); each finished job adds one
//! synthetic assistant message at the thread's next turn boundary.

mod payload;
mod record;
mod registry;
mod runner;
mod tools;

pub use payload::{make_payload, render_message};
pub use record::{Actor, JobError, JobRecord, JobStatus, Payload};
pub use registry::{JobNotice, JobOutcome, JobRegistry, JobStart, TERMINAL_RETENTION};
pub use runner::{BackgroundAnswer, BackgroundSettings, CallMode, run_call, wants_background};
pub use tools::{TOOL_NAMES, register as register_tools};
