//! A probe, not a promise: start real confined programs in a mode and try
//! what the mode forbids — write outside their roots, read a file outside,
//! connect to a loopback listener and to a pathname Unix socket the probe
//! opened on the host, read another process's environment, outlive their
//! call, signal a host process, read a secret of the host (a bridge token)
//! though it may read everywhere else. Each attempt is `blocked` or `OPEN`.
//!
//! The program is sandcrab itself (`sandcrab sandbox probe ACTION ARG`,
//! placed in the probe's private temp directory as a confined program of a
//! third-party plugin would find it), so the probe needs no interpreter.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ChildEnv, Confinement, ConfinementSpec, ProcessRequest, SandboxMode};

/// One thing a mode forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attempt {
    WriteOutside,
    ReadOutside,
    Network,
    UnixSocket,
    ReadEnvironment,
    Outlive,
    Signal,
    ReadHostSecret,
}

impl Attempt {
    /// Every attempt, in report order.
    pub const ALL: [Attempt; 8] = [
        Attempt::WriteOutside,
        Attempt::ReadOutside,
        Attempt::Network,
        Attempt::UnixSocket,
        Attempt::ReadEnvironment,
        Attempt::Outlive,
        Attempt::Signal,
        Attempt::ReadHostSecret,
    ];

    /// What it tries, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Attempt::WriteOutside => "write a file outside its roots",
            Attempt::ReadOutside => "read a file outside its grants",
            Attempt::Network => "connect to a listener on the host's loopback",
            Attempt::UnixSocket => "connect to a Unix socket outside the workspace",
            Attempt::ReadEnvironment => "read sandcrab's environment",
            Attempt::Outlive => "outlive its call (setsid, double fork)",
            Attempt::Signal => "signal a process of the host",
            Attempt::ReadHostSecret => {
                "read a host secret (a bridge token) while it may read everywhere"
            }
        }
    }

    /// Whether `mode` promises to block it (for a program with no network
    /// grant): every confining mode promises every attempt blocked.
    pub fn promised(self, mode: SandboxMode) -> bool {
        mode != SandboxMode::Off
    }
}

/// What one attempt did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub attempt: Attempt,
    /// The probe program ran (else nothing was proven either way).
    pub ran: bool,
    /// It succeeded: the door is open.
    pub open: bool,
    /// Whether the mode promises it closed.
    pub promised: bool,
    /// What the program said, shortened.
    pub detail: String,
}

/// The check of one mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeCheck {
    pub mode: SandboxMode,
    /// Why no program could be confined at all (the mode fails closed).
    pub unavailable: Option<String>,
    pub outcomes: Vec<Outcome>,
}

impl ModeCheck {
    /// Whether every promise of the mode held: each promised attempt ran
    /// and was blocked (a mode that cannot confine at all holds too: it
    /// refuses to run programs).
    pub fn holds(&self) -> bool {
        self.outcomes
            .iter()
            .all(|o| !o.promised || (o.ran && !o.open))
    }
}

/// Deliberate weakenings, for testing the probe itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Weaken {
    /// Give the probe's programs the network.
    pub network: bool,
}

/// What the probe program prints when its attempt succeeded.
pub const OPEN_MARK: &str = "PROBE-OPEN";
/// What the probe program prints first, so a program that did not run is
/// never taken for a blocked attempt.
pub const RAN_MARK: &str = "probe ran:";

/// Check `mode` by running `sandcrab` (the binary at `sandcrab`) confined.
pub async fn check(mode: SandboxMode, sandcrab: &Path, weaken: Weaken) -> ModeCheck {
    match Scene::new(sandcrab) {
        Ok(scene) => scene.check(mode, weaken).await,
        Err(e) => ModeCheck {
            mode,
            unavailable: Some(format!("cannot prepare the probe: {e}")),
            outcomes: Vec::new(),
        },
    }
}

/// The probe's files: a workspace, a private temp dir holding the probe
/// program, and a place outside both with a secret and a Unix socket.
struct Scene {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    temp: PathBuf,
    outside: PathBuf,
    program: PathBuf,
}

impl Scene {
    fn new(sandcrab: &Path) -> std::io::Result<Scene> {
        let root = tempfile::Builder::new()
            .prefix("sandcrab-check-")
            .tempdir()?;
        let base = root.path().canonicalize()?;
        let (workspace, temp, outside) = (base.join("ws"), base.join("tmp"), base.join("out"));
        for dir in [&workspace, &temp, &outside] {
            std::fs::create_dir(dir)?;
        }
        std::fs::write(outside.join("secret"), "probe secret")?;
        std::fs::write(outside.join("serve.token"), "probe token")?;
        let program = temp.join("sandcrab");
        if std::fs::hard_link(sandcrab, &program).is_err() {
            std::fs::copy(sandcrab, &program)?;
        }
        Ok(Scene {
            _root: root,
            workspace,
            temp,
            outside,
            program,
        })
    }

    /// What the probe's programs get: their workspace and temp dir.
    fn spec(&self, mode: SandboxMode, network: bool) -> ConfinementSpec {
        ConfinementSpec {
            mode,
            read_everywhere: false,
            read: Vec::new(),
            write: vec![self.workspace.clone(), self.temp.clone()],
            network,
            unix_sockets: false,
            protected: None,
        }
    }

    async fn check(&self, mode: SandboxMode, weaken: Weaken) -> ModeCheck {
        let spec = self.spec(mode, weaken.network);
        let confinement = match Confinement::prepare(&spec) {
            Ok(c) => c,
            Err(e) => {
                return ModeCheck {
                    mode,
                    unavailable: Some(e.to_string()),
                    outcomes: Vec::new(),
                };
            }
        };
        let mut outcomes = Vec::new();
        for attempt in Attempt::ALL {
            let (open, detail) = self.attempt(attempt, &confinement).await;
            outcomes.push(Outcome {
                attempt,
                ran: detail.contains(RAN_MARK),
                open,
                promised: attempt.promised(mode),
                detail,
            });
        }
        ModeCheck {
            mode,
            unavailable: None,
            outcomes,
        }
    }

    /// Make one attempt; whether it succeeded, and what was seen.
    async fn attempt(&self, attempt: Attempt, confinement: &Confinement) -> (bool, String) {
        let host_pid = std::process::id().to_string();
        match attempt {
            Attempt::WriteOutside => {
                let target = self.outside.join("written");
                let said = self
                    .run("write", &target.display().to_string(), confinement)
                    .await;
                (target.exists() || said.contains(OPEN_MARK), said)
            }
            Attempt::ReadOutside => {
                let said = self
                    .run(
                        "read",
                        &self.outside.join("secret").display().to_string(),
                        confinement,
                    )
                    .await;
                (said.contains("probe secret"), said)
            }
            Attempt::Network => {
                let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
                    return (false, "no loopback listener could be opened".into());
                };
                let addr = listener
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let said = self.run("connect", &addr, confinement).await;
                (said.contains(OPEN_MARK), said)
            }
            Attempt::UnixSocket => {
                let path = self.outside.join("sock");
                let Ok(_listener) = std::os::unix::net::UnixListener::bind(&path) else {
                    return (false, "no Unix socket could be opened".into());
                };
                let said = self
                    .run("unix", &path.display().to_string(), confinement)
                    .await;
                (said.contains(OPEN_MARK), said)
            }
            Attempt::ReadEnvironment => {
                let said = self.run("environ", &host_pid, confinement).await;
                (said.contains(OPEN_MARK), said)
            }
            Attempt::Signal => {
                let said = self.run("signal", &host_pid, confinement).await;
                (said.contains(OPEN_MARK), said)
            }
            Attempt::ReadHostSecret => {
                // As first-party tools' programs are: reading everywhere.
                let token = self.outside.join("serve.token");
                let mut kept = crate::kept::Registry::new();
                kept.keep(crate::kept::Item::BridgeTokens, &token, "the probe");
                let spec = ConfinementSpec {
                    read_everywhere: true,
                    ..self.spec(confinement.mode(), confinement.network())
                };
                let wide = match Confinement::prepare(&spec) {
                    Ok(wide) => wide.keeping(std::sync::Arc::new(kept)),
                    Err(e) => return (false, format!("could not confine: {e}")),
                };
                let said = self.run("read", &token.display().to_string(), &wide).await;
                (said.contains("probe token"), said)
            }
            Attempt::Outlive => {
                let marker = format!("linger-{}", uuid::Uuid::new_v4());
                let said = self.run("outlive", &marker, confinement).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let survivors = processes_with(&marker);
                for pid in &survivors {
                    // SAFETY: sending a signal to a process id we found.
                    unsafe {
                        libc::kill(*pid, libc::SIGKILL);
                    }
                }
                let open = !survivors.is_empty();
                (
                    open,
                    if open {
                        format!("{said} (a descendant was still running)")
                    } else {
                        said
                    },
                )
            }
        }
    }

    /// Run `sandcrab sandbox probe ACTION ARG` confined; what it printed.
    async fn run(&self, action: &str, arg: &str, confinement: &Confinement) -> String {
        let request = ProcessRequest {
            program: self.program.clone(),
            args: vec!["sandbox".into(), "probe".into(), action.into(), arg.into()],
            cwd: self.workspace.clone(),
            env: ChildEnv::base(&self.temp, None, None),
            stdin: None,
            timeout: Duration::from_secs(20),
            output_cap: 64 * 1024,
            kill_grace: Duration::from_millis(500),
        };
        match super::run(&request, confinement, None).await {
            Ok(out) => {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                text.trim().chars().take(300).collect()
            }
            Err(e) => format!("could not start: {e}"),
        }
    }
}

/// Process ids whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// The probe program's side: try `action` on `arg`, print [`OPEN_MARK`]
/// when it worked (and what failed otherwise).
pub fn attempt_here(action: &str, arg: &str) -> String {
    use std::io::{Read, Write};
    let result: Result<String, String> = match action {
        "write" => std::fs::File::create(arg)
            .and_then(|mut f| f.write_all(b"x"))
            .map(|()| OPEN_MARK.to_string())
            .map_err(|e| e.to_string()),
        "read" => std::fs::read_to_string(arg).map_err(|e| e.to_string()),
        "connect" => arg
            .parse::<std::net::SocketAddr>()
            .map_err(|e| e.to_string())
            .and_then(|addr| {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                    .map(|_| OPEN_MARK.to_string())
                    .map_err(|e| e.to_string())
            }),
        "unix" => std::os::unix::net::UnixStream::connect(arg)
            .map(|_| OPEN_MARK.to_string())
            .map_err(|e| e.to_string()),
        "environ" => std::fs::File::open(format!("/proc/{arg}/environ"))
            .and_then(|mut f| {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map(|_| bytes)
            })
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                if bytes.is_empty() {
                    Err("empty".into())
                } else {
                    Ok(OPEN_MARK.to_string())
                }
            }),
        "signal" => arg
            .parse::<i32>()
            .map_err(|e| e.to_string())
            .and_then(|pid| {
                // SAFETY: signal 0 only checks whether the process can be signalled.
                if unsafe { libc::kill(pid, 0) } == 0 {
                    Ok(OPEN_MARK.to_string())
                } else {
                    Err(std::io::Error::last_os_error().to_string())
                }
            }),
        "outlive" => outlive(arg),
        "linger" => {
            std::thread::sleep(Duration::from_secs(30));
            Ok(String::new())
        }
        other => Err(format!("unknown probe action {other}")),
    };
    match result {
        Ok(text) => format!("{RAN_MARK} {text}"),
        Err(e) => format!("{RAN_MARK} blocked: {e}"),
    }
}

/// Start a detached grandchild (`sandcrab sandbox probe linger MARKER`,
/// in a new session) and return at once.
fn outlive(marker: &str) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(me);
    cmd.args(["sandbox", "probe", "linger", marker])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()
        .map(|_| "started a detached process".to_string())
        .map_err(|e| e.to_string())
}

/// The last check, as kept for `sandbox status` and for locked mode's
/// check before its first program (valid for the boot it was made in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// `/proc/sys/kernel/random/boot_id` when it was made.
    pub boot_id: String,
    /// RFC 3339.
    pub checked_at: String,
    pub checks: Vec<ModeCheck>,
}

/// This boot's id.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Where the last check is kept.
pub fn kept_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("sandcrab").join("sandbox-check.json"))
}

/// Keep `checks` as this boot's last check of their modes (best effort;
/// the checks of other modes kept this boot stay).
pub fn keep(checks: &[ModeCheck], checked_at: String) {
    let Some(file) = kept_file() else { return };
    let mut kept = last().unwrap_or(Kept {
        boot_id: boot_id(),
        checked_at: checked_at.clone(),
        checks: Vec::new(),
    });
    kept.checked_at = checked_at;
    kept.checks
        .retain(|old| !checks.iter().any(|c| c.mode == old.mode));
    kept.checks.extend(checks.iter().cloned());
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    if let Ok(text) = serde_json::to_string_pretty(&kept) {
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &file);
        }
    }
}

/// The last check kept, if it was made in this boot.
pub fn last() -> Option<Kept> {
    let file = kept_file()?;
    let bytes = crate::safe_fs::read_regular(&file, 1 << 20, crate::safe_fs::Links::Refuse).ok()?;
    let kept: Kept = serde_json::from_slice(&bytes).ok()?;
    (kept.boot_id == boot_id()).then_some(kept)
}

/// Locked mode's check before its first program: this boot's kept check of
/// `locked`, or a new one (kept); an error naming every open guarantee if
/// any is open.
pub async fn verify_locked(sandcrab: &Path) -> Result<(), String> {
    let kept = last().and_then(|k| k.checks.into_iter().find(|c| c.mode == SandboxMode::Locked));
    let check = match kept {
        Some(check) => check,
        None => {
            let check = self::check(SandboxMode::Locked, sandcrab, Weaken::default()).await;
            keep(std::slice::from_ref(&check), crate::time::now_rfc3339());
            check
        }
    };
    if let Some(why) = &check.unavailable {
        return Err(format!(
            "locked mode cannot be enforced on this host: {why}"
        ));
    }
    let open: Vec<&str> = check
        .outcomes
        .iter()
        .filter(|o| o.promised && (o.open || !o.ran))
        .map(|o| o.attempt.describe())
        .collect();
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "locked mode refuses to run: on this host a confined program could (or could not be shown not to) {} (see `sandcrab sandbox check`)",
            open.join(", and ")
        ))
    }
}
