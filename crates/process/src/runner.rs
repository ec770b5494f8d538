//! Spawn one program, feed its stdin, capture its output up to a cap, and
//! stop its whole process group on timeout (SIGTERM, grace period,
//! SIGKILL), on completion (stragglers) and when the caller goes away.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::confine::{ConfineError, Confinement};
use super::env::ChildEnv;

/// A program to run.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// Absolute path of the program.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Host working directory.
    pub cwd: PathBuf,
    pub env: ChildEnv,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Cap on captured stdout and on captured stderr (each), in bytes.
    pub output_cap: usize,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Where output goes as it arrives, for live display: a bounded channel
/// (a slow reader loses live chunks, never the captured output).
pub type LiveOutput = mpsc::Sender<OutputChunk>;

/// Capacity of a live-output channel, in chunks (each at most 64 KiB).
pub const LIVE_CHUNKS: usize = 64;

/// Output as it arrives, for live display.
#[derive(Debug, Clone)]
pub struct OutputChunk {
    pub stream: OutputStream,
    pub bytes: Vec<u8>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// None when ended by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration: Duration,
    pub timed_out: bool,
    /// Output went over the cap (a note was appended).
    pub truncated: bool,
    /// Git metadata the program made that would make git run something,
    /// taken out of the workspace after it ended (see
    /// [`crate::kept::Census`]); a note for each was appended to stderr.
    pub swept: Vec<String>,
}

/// Why a program could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Confine(#[from] super::confine::ConfineError),
    #[error("error while waiting for {program}: {source}")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// How long to keep reading pipes after the program and its group are gone
/// (a descendant that left the group may still hold them open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Run `request` under `confinement`. Output chunks (up to the output cap)
/// are also sent to `live` as they arrive. Dropping the returned future
/// kills the group.
pub async fn run(
    request: &ProcessRequest,
    confinement: &Confinement,
    live: Option<LiveOutput>,
) -> Result<ProcessOutput, ProcessError> {
    let program = request.program.display().to_string();
    let mut cmd = tokio::process::Command::new(&request.program);
    cmd.args(&request.args)
        .current_dir(&request.cwd)
        .env_clear()
        .envs(request.env.vars())
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // What the program could make that the host keeps an eye on, counted
    // before it runs (covered for it) and swept when it ends.
    let aftercare = if confinement.watches() {
        let confined = confinement.clone();
        match tokio::task::spawn_blocking(move || super::aftercare::Aftercare::before(&confined))
            .await
        {
            Ok(Ok(aftercare)) => Some(aftercare),
            Ok(Err(why)) => return Err(ProcessError::Confine(ConfineError::Protected(why))),
            Err(_) => None,
        }
    } else {
        None
    };
    confinement.apply(
        &mut cmd,
        aftercare
            .as_ref()
            .map(|a| a.protected())
            .unwrap_or_default(),
    )?;

    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut group = GroupGuard(child.id().map(|pid| pid as i32));
    if let Some(aftercare) = &aftercare {
        aftercare.running_as(group.0);
    }

    if let (Some(bytes), Some(mut pipe)) = (request.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            // A program that exits without reading its input is not an error.
            let _ = pipe.write_all(&bytes).await;
        });
    }
    let (stdout_kept, stderr_kept) = (Captured::shared(), Captured::shared());
    let stdout = tokio::spawn(capture(
        child.stdout.take().expect("stdout is piped"),
        request.output_cap,
        OutputStream::Stdout,
        live.clone(),
        stdout_kept.clone(),
    ));
    let stderr = tokio::spawn(capture(
        child.stderr.take().expect("stderr is piped"),
        request.output_cap,
        OutputStream::Stderr,
        live,
        stderr_kept.clone(),
    ));

    let mut timed_out = false;
    let status = tokio::select! {
        status = child.wait() => status,
        _ = tokio::time::sleep(request.timeout) => {
            timed_out = true;
            group.signal(libc::SIGTERM);
            tokio::select! {
                status = child.wait() => status,
                _ = tokio::time::sleep(request.kill_grace) => {
                    group.signal(libc::SIGKILL);
                    child.wait().await
                }
            }
        }
    }
    .map_err(|source| ProcessError::Wait {
        program: program.clone(),
        source,
    })?;
    let duration = started.elapsed();
    // Nothing the program started outlives it.
    group.signal(libc::SIGKILL);
    group.disarm();

    let (stdout, stdout_cut) = drain(stdout, &stdout_kept, request.output_cap).await;
    let (mut stderr, stderr_cut) = drain(stderr, &stderr_kept, request.output_cap).await;
    let swept = match aftercare {
        Some(aftercare) => tokio::task::spawn_blocking(move || aftercare.after())
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    for note in &swept {
        stderr.extend_from_slice(format!("\n[sandcrab: {note}]\n").as_bytes());
    }
    Ok(ProcessOutput {
        stdout,
        stderr,
        exit_code: status.code(),
        signal: status.signal(),
        duration,
        timed_out,
        truncated: stdout_cut || stderr_cut,
        swept,
    })
}

/// What a pipe gave so far: kept while it is read, so whatever came before
/// a reader is stopped is never lost.
#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
}

impl Captured {
    fn shared() -> std::sync::Arc<std::sync::Mutex<Captured>> {
        Default::default()
    }
}

/// Wait (a little) for a pipe's reader to reach the end, then take what it
/// read: all of it, with a note when some was dropped over `cap` or when
/// a program that left the group still held the pipe. The bool says
/// whether anything is missing.
async fn drain(
    task: tokio::task::JoinHandle<()>,
    kept: &std::sync::Mutex<Captured>,
    cap: usize,
) -> (Vec<u8>, bool) {
    let abort = task.abort_handle();
    let held_open = !matches!(
        tokio::time::timeout(DRAIN_AFTER_EXIT, task).await,
        Ok(Ok(()))
    );
    if held_open {
        abort.abort();
    }
    let mut captured = std::mem::take(&mut *kept.lock().unwrap_or_else(|e| e.into_inner()));
    if captured.dropped > 0 {
        captured.kept.extend_from_slice(
            format!(
                "\n[output capped at {cap} bytes; {} more bytes were dropped]\n",
                captured.dropped
            )
            .as_bytes(),
        );
    }
    if held_open {
        captured
            .kept
            .extend_from_slice(b"\n[output cut: a program that left held it open]\n");
    }
    (captured.kept, captured.dropped > 0 || held_open)
}

/// Read `pipe` to the end into `into`, keeping the first `cap` bytes (and
/// forwarding no more than those live).
async fn capture(
    mut pipe: impl AsyncRead + Unpin,
    cap: usize,
    stream: OutputStream,
    live: Option<LiveOutput>,
    into: std::sync::Arc<std::sync::Mutex<Captured>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let take = {
            let mut captured = into.lock().unwrap_or_else(|e| e.into_inner());
            let room = cap.saturating_sub(captured.kept.len());
            let take = n.min(room);
            captured.kept.extend_from_slice(&buf[..take]);
            captured.dropped += (n - take) as u64;
            take
        };
        if let Some(live) = &live
            && take > 0
        {
            // A full channel means nobody keeps up: the chunk is dropped
            // from the live view (it is in the captured output).
            let _ = live.try_send(OutputChunk {
                stream,
                bytes: buf[..take].to_vec(),
            });
        }
    }
}

/// Kills the process group when dropped (the caller went away) and sends
/// signals to it on request.
pub(super) struct GroupGuard(pub(super) Option<i32>);

impl GroupGuard {
    pub(super) fn signal(&self, signal: i32) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) on our own child's group id; ESRCH is fine.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

impl GroupGuard {
    /// The group is gone; do not signal its id again (it may be reused).
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}
