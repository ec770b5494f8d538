//! Confinement of child programs, applied in the child between fork and
//! exec:
//!
//! - a new session (own process group, no controlling terminal);
//! - when network is not allowed, a fresh user + network namespace (only a
//!   loopback interface, down, so nothing is reachable);
//! - `no_new_privs` and a Landlock ruleset: in `workspace-write` read
//!   anywhere and write only the workspace, the private temp dir and a few
//!   device files; in `locked` read only the workspace, the temp dir and the
//!   system paths programs need to run. Signals to processes outside the
//!   sandbox are refused (Landlock scopes, where the kernel has them).
//!
//! The ruleset is built once in the parent; the child only makes
//! async-signal-safe system calls.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
};

use crate::plugin::policy::SandboxMode;

/// Paths a program needs to start and run in `locked` mode (read-only).
const SYSTEM_READ_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/dev/urandom",
    "/dev/random",
];

/// Device files every confined program may read and write.
const DEVICE_PATHS: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// What the kernel can do, probed once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The kernel's Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Unprivileged user + network namespaces work.
    pub user_netns: bool,
}

impl SandboxSupport {
    /// Landlock is available.
    pub fn landlock(&self) -> bool {
        self.landlock_abi > 0
    }
}

/// Probe the kernel (once) and log what is missing.
pub fn support() -> SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let found = SandboxSupport {
            landlock_abi: landlock_abi(),
            user_netns: probe_user_netns(),
        };
        if !found.landlock() {
            tracing::warn!(
                "this kernel has no Landlock: programs cannot be confined; `locked` mode will refuse to run them"
            );
        }
        if !found.user_netns {
            tracing::warn!(
                "unprivileged user+network namespaces are unavailable: programs cannot be cut off from the network; modes without network will refuse to run them"
            );
        }
        found
    })
}

fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: null attr, size 0, version flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as i32
}

fn probe_user_netns() -> bool {
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .env_clear()
        .env("PATH", super::DEFAULT_PATH);
    // SAFETY: unshare is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    matches!(cmd.status(), Ok(status) if status.success())
}

/// What to confine a program to.
#[derive(Debug, Clone)]
pub struct ConfinementSpec {
    pub mode: SandboxMode,
    /// Directories the program may read (in `locked` mode, besides the
    /// system paths; in `workspace-write` everything is readable).
    pub read: Vec<PathBuf>,
    /// Directories the program may write (the workspace when granted, the
    /// private temp dir).
    pub write: Vec<PathBuf>,
    /// Whether the program may use the network.
    pub network: bool,
}

/// Why a program cannot be confined.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfineError {
    /// The kernel lacks a feature the mode requires; the host fails closed.
    #[error("{0}")]
    Unavailable(String),
    /// Building the Landlock ruleset failed.
    #[error("cannot build the Landlock ruleset: {0}")]
    Ruleset(String),
}

/// A prepared confinement, reusable for any number of programs.
#[derive(Debug, Clone)]
pub struct Confinement {
    mode: SandboxMode,
    ruleset: Option<Arc<OwnedFd>>,
    id_maps: Option<Arc<IdMaps>>,
}

#[derive(Debug)]
struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Confinement {
    /// No confinement beyond a new session (explicit `off`).
    pub fn none() -> Self {
        Confinement {
            mode: SandboxMode::Off,
            ruleset: None,
            id_maps: None,
        }
    }

    /// Prepare the confinement for `spec`. Fails when the mode needs a
    /// kernel feature that is missing (fail closed).
    pub fn prepare(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        if spec.mode == SandboxMode::Off {
            return Ok(Confinement::none());
        }
        let support = support();
        let id_maps = if spec.network {
            None
        } else if support.user_netns {
            Some(Arc::new(id_maps()))
        } else {
            return Err(ConfineError::Unavailable(
                "network must be blocked but this kernel does not allow unprivileged network namespaces".into(),
            ));
        };
        let ruleset = if support.landlock() {
            Some(Arc::new(build_ruleset(spec)?))
        } else if spec.mode == SandboxMode::Locked {
            return Err(ConfineError::Unavailable(
                "locked mode needs Landlock, which this kernel does not provide".into(),
            ));
        } else {
            None
        };
        Ok(Confinement {
            mode: spec.mode,
            ruleset,
            id_maps,
        })
    }

    /// The mode this confinement enforces.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// Whether Landlock filesystem rules are applied.
    pub fn filesystem_confined(&self) -> bool {
        self.ruleset.is_some()
    }

    /// Whether programs get a fresh network namespace.
    pub fn network_isolated(&self) -> bool {
        self.id_maps.is_some()
    }

    /// Install the confinement on `cmd` (runs in the child before exec).
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        let ruleset = self.ruleset.clone();
        let id_maps = self.id_maps.clone();
        // SAFETY: the closure only makes async-signal-safe system calls on
        // data prepared in the parent; it does not allocate.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(maps) = &id_maps {
                    if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // Keep our ids inside the namespace; failure only
                    // changes how ids are displayed, not what is allowed.
                    write_proc(c"/proc/self/setgroups", b"deny");
                    write_proc(c"/proc/self/uid_map", &maps.uid_map);
                    write_proc(c"/proc/self/gid_map", &maps.gid_map);
                }
                if let Some(fd) = &ruleset {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

fn id_maps() -> IdMaps {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    IdMaps {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
    }
}

/// Write `data` to a /proc file; async-signal-safe, errors ignored.
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) {
    // SAFETY: plain open/write/close on a NUL-terminated path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, data.as_ptr().cast(), data.len());
            libc::close(fd);
        }
    }
}

fn build_ruleset(spec: &ConfinementSpec) -> Result<OwnedFd, ConfineError> {
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| ConfineError::Ruleset(e.to_string());
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);

    let mut read_paths: Vec<PathBuf> = spec.read.clone();
    match spec.mode {
        SandboxMode::Locked => read_paths.extend(SYSTEM_READ_PATHS.iter().map(PathBuf::from)),
        _ => read_paths.push(PathBuf::from("/")),
    }
    let mut write_paths = spec.write.clone();
    write_paths.extend(DEVICE_PATHS.iter().map(PathBuf::from));

    let mut scopes = landlock::BitFlags::from(Scope::Signal);
    if spec.mode == SandboxMode::Locked {
        scopes |= Scope::AbstractUnixSocket;
    }
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?
        .scope(scopes)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(&read_paths), read))
        .map_err(err)?
        .add_rules(path_beneath_rules(existing(&write_paths), all))
        .map_err(err)?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| {
        ConfineError::Unavailable("the kernel refused to create a Landlock ruleset".into())
    })
}

fn existing(paths: &[PathBuf]) -> Vec<&Path> {
    paths
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect()
}
