//! Running and confining programs: a fresh process group, user, PID and
//! mount namespace per program (every descendant dies with it), a network
//! namespace when the network is closed, Landlock filesystem rules and a
//! seccomp filter applied in the child before it executes the program,
//! rlimits, a cleared environment, capped output and timeouts that end the
//! whole group.
//!
//! This folder knows nothing about plugins: callers describe what a
//! program may touch in a [`ConfinementSpec`].

use sandcrab_core::{time, user_files};
use sandcrab_kept::{self as kept, safe_fs};

mod aftercare;
mod bounded;
mod child;
mod confine;
mod env;
mod filter;
mod host;
mod mode;
mod operator;
pub mod probe;
mod runner;
mod service;
mod support;

pub use aftercare::{stop_and_sweep_all, wait_for_sweeps};
pub use bounded::{LineLimited, forward_lines};
pub use confine::{
    ConfineError, Confinement, ConfinementSpec, MAX_FILE_SIZE, MAX_PROCESSES, ProtectedWorkspace,
};
pub use env::{ChildEnv, DEFAULT_PATH, GIT_HARDENING, find_on_path};
pub use host::harden_host;
pub use mode::SandboxMode;
pub use operator::open_in_browser;
pub use runner::{
    LIVE_CHUNKS, LiveOutput, OutputChunk, OutputStream, ProcessError, ProcessOutput,
    ProcessRequest, run,
};
pub use service::{ServiceProcess, ServiceRequest, spawn_service};
pub use support::{
    LANDLOCK_ABI_SCOPES, LANDLOCK_ABI_TRUNCATE, SandboxSupport, probe_in_background, support,
};

/// Default timeout when the caller gives none.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest timeout a caller may ask for.
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Time between SIGTERM and SIGKILL when a program is stopped.
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Default cap on captured stdout and on captured stderr (each).
pub const DEFAULT_OUTPUT_CAP: usize = 10 * 1024 * 1024;
