//! A long-running confined program spoken to over its stdin and stdout
//! (an MCP server): started like every program (new session and process
//! group, the confinement's namespaces, Landlock, seccomp and rlimits, a
//! cleared environment), its stderr forwarded to the log, and its whole
//! group killed when the handle is dropped.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, ChildStdin, ChildStdout};

use super::bounded::{LineLimited, forward_lines};

use super::confine::Confinement;
use super::env::ChildEnv;
use super::runner::{GroupGuard, ProcessError};

/// Longest line a service may write to its stdout (one protocol message);
/// a longer one fails the stream instead of growing memory.
pub const MAX_SERVICE_LINE: usize = 16 << 20;
/// Longest stderr line forwarded to the log; the rest of it is dropped.
pub const MAX_LOG_LINE: usize = 2000;

/// A program to keep running.
#[derive(Debug, Clone)]
pub struct ServiceRequest {
    /// Absolute path of the program.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Host working directory.
    pub cwd: PathBuf,
    pub env: ChildEnv,
    /// How its stderr lines are labelled in the log.
    pub label: String,
}

/// A running service; dropping it kills the program and its descendants.
pub struct ServiceProcess {
    child: Child,
    group: GroupGuard,
}

impl ServiceProcess {
    /// Its process id (in the host's PID namespace).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether it has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.group.signal(libc::SIGKILL);
        let _ = self.child.start_kill();
    }
}

/// Start `request` under `confinement`; its stdin and stdout are the
/// caller's to speak over.
pub fn spawn_service(
    request: &ServiceRequest,
    confinement: &Confinement,
) -> Result<(ServiceProcess, ChildStdin, LineLimited<ChildStdout>), ProcessError> {
    let program = request.program.display().to_string();
    let mut cmd = tokio::process::Command::new(&request.program);
    cmd.args(&request.args)
        .current_dir(&request.cwd)
        .env_clear()
        .envs(request.env.vars())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    confinement.apply(&mut cmd, &[])?;
    let mut child = cmd
        .spawn()
        .map_err(|source| ProcessError::Spawn { program, source })?;
    let group = GroupGuard(child.id().map(|pid| pid as i32));
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    if let Some(stderr) = child.stderr.take() {
        let label = request.label.clone();
        tokio::spawn(async move {
            forward_lines(stderr, MAX_LOG_LINE, |line, cut| {
                let more = if cut { " [line cut]" } else { "" };
                tracing::info!("{label}: {line}{more}");
            })
            .await;
        });
    }
    let stdout = LineLimited::new(stdout, MAX_SERVICE_LINE, &request.label);
    Ok((ServiceProcess { child, group }, stdin, stdout))
}
