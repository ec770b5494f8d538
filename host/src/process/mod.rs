//! Running programs for plugins: a fresh process group per program, a
//! cleared environment, capped output, timeouts that end the whole group,
//! and confinement (Landlock filesystem rules, a network namespace) applied
//! in the child before it executes the program.

mod confine;
mod env;
mod runner;

pub use confine::{Confinement, ConfinementSpec, SandboxSupport, support};
pub use env::{ChildEnv, DEFAULT_PATH};
pub use runner::{OutputChunk, OutputStream, ProcessError, ProcessOutput, ProcessRequest, run};

/// Default timeout when the caller gives none.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest timeout a caller may ask for.
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Time between SIGTERM and SIGKILL when a program is stopped.
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Default cap on captured stdout and on captured stderr (each).
pub const DEFAULT_OUTPUT_CAP: usize = 10 * 1024 * 1024;
