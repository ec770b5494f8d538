//! Confinement of child programs: what a [`ConfinementSpec`] asks for,
//! turned into a prepared [`Confinement`] (Landlock ruleset, seccomp
//! program, namespaces, rlimits) that is installed on each command and
//! applied in the child before it executes the program (see
//! [`super::child`]).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
};

use super::child::{BindPlan, ChildPlan, IdMaps};
use super::filter::{self, FilterSpec};
use super::hidden;
use super::mode::SandboxMode;
use super::support::{LANDLOCK_ABI_TRUNCATE, support};

/// Paths every confined program may read: what programs need to start
/// and run (loader, libraries, locale, certificates).
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

/// What name resolution reads, for programs that have the network.
const NETWORK_READ_PATHS: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
];

/// Device files every confined program may read and write.
const DEVICE_PATHS: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Largest file a confined program may write (SIGXFSZ beyond).
pub const MAX_FILE_SIZE: u64 = 16 << 30;
/// Most processes of the user while a confined program runs (effective
/// for unprivileged users; the PID namespace bounds their lifetime).
pub const MAX_PROCESSES: u64 = 8192;

/// What to confine a program to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementSpec {
    pub mode: SandboxMode,
    /// Read anywhere; otherwise only `read`, `write` and the system
    /// runtime paths.
    pub read_everywhere: bool,
    /// Directories the program may read.
    pub read: Vec<PathBuf>,
    /// Directories the program may write (and read).
    pub write: Vec<PathBuf>,
    /// Whether the program may use the network.
    pub network: bool,
    /// Paths kept read-only even inside a writable directory, when they
    /// exist as the program starts (`.git/config`, `.git/hooks`, …).
    pub protected: Vec<PathBuf>,
}

/// Why a program cannot be confined.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfineError {
    /// The kernel lacks a feature the mode requires; the host fails closed.
    #[error("{0}")]
    Unavailable(String),
    /// Building the Landlock ruleset or the seccomp filter failed.
    #[error("cannot build the sandbox: {0}")]
    Build(String),
    /// A protected path cannot be protected (it is a symbolic link).
    #[error("{0}")]
    Protected(String),
}

/// A prepared confinement, reusable for any number of programs.
#[derive(Debug, Clone)]
pub struct Confinement {
    mode: SandboxMode,
    network: bool,
    namespaces: libc::c_int,
    private_proc: bool,
    ruleset: Option<Arc<OwnedFd>>,
    seccomp: Option<Arc<seccompiler::BpfProgram>>,
    protected: Vec<PathBuf>,
    /// What the program works in (never covered by a secret's cover).
    visible: Vec<PathBuf>,
}

impl Confinement {
    /// No confinement beyond a new session (explicit `off`).
    pub fn none() -> Self {
        Confinement {
            mode: SandboxMode::Off,
            network: true,
            namespaces: 0,
            private_proc: false,
            ruleset: None,
            seccomp: None,
            protected: Vec::new(),
            visible: Vec::new(),
        }
    }

    /// Prepare the confinement for `spec`. Fails when the mode needs a
    /// kernel feature that is missing (fail closed).
    pub fn prepare(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        if spec.mode == SandboxMode::Off {
            return Ok(Confinement::none());
        }
        let support = support();
        let missing = support.missing(spec.mode, spec.network);
        if !missing.is_empty() {
            return Err(ConfineError::Unavailable(format!(
                "the {} sandbox cannot be enforced on this host (missing: {}); see `sandcrab sandbox status`",
                spec.mode,
                missing.join(", ")
            )));
        }
        let mut namespaces = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        if !spec.network {
            namespaces |= libc::CLONE_NEWNET;
        }
        let bpf = filter::build(FilterSpec {
            unix_sockets: spec.mode != SandboxMode::Locked,
            guard_truncate: support.landlock_abi < LANDLOCK_ABI_TRUNCATE,
        })
        .map_err(ConfineError::Build)?;
        Ok(Confinement {
            mode: spec.mode,
            network: spec.network,
            namespaces,
            private_proc: support.private_proc,
            ruleset: Some(Arc::new(build_ruleset(spec, support.private_proc)?)),
            seccomp: Some(Arc::new(bpf)),
            protected: spec.protected.clone(),
            visible: spec.write.iter().chain(&spec.read).cloned().collect(),
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
        self.namespaces & libc::CLONE_NEWNET != 0
    }

    /// Whether programs may use the network.
    pub fn network(&self) -> bool {
        self.network
    }

    /// Install the confinement on `cmd` (it runs in the child before
    /// exec). The protected paths that exist now are bound read-only; the
    /// host's secrets that exist now are covered.
    pub fn apply(&self, cmd: &mut tokio::process::Command) -> Result<(), ConfineError> {
        let binds = if self.namespaces & libc::CLONE_NEWNS != 0 {
            BindPlan::new(
                &existing_protected(&self.protected)?,
                &hidden::covers(&self.visible),
            )
            .map_err(|e| ConfineError::Build(format!("protected paths: {e}")))?
        } else {
            BindPlan::default()
        };
        let plan = ChildPlan {
            namespaces: self.namespaces,
            maps: (self.namespaces != 0).then(IdMaps::current),
            binds,
            private_proc: self.private_proc,
            rlimits: if self.namespaces != 0 {
                vec![
                    (libc::RLIMIT_CORE, 0),
                    (libc::RLIMIT_FSIZE, MAX_FILE_SIZE),
                    (libc::RLIMIT_NPROC, MAX_PROCESSES),
                ]
            } else {
                Vec::new()
            },
            ruleset: self.ruleset.clone(),
            seccomp: self.seccomp.clone(),
            // SAFETY: getpid cannot fail.
            parent_pid: unsafe { libc::getpid() },
        };
        // SAFETY: `enter` only makes async-signal-safe system calls on the
        // plan prepared above.
        unsafe {
            cmd.pre_exec(move || super::child::enter(&plan));
        }
        Ok(())
    }
}

/// The protected paths that exist; one that is a symbolic link cannot be
/// protected (the link itself could be replaced), so nothing runs.
fn existing_protected(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfineError> {
    let mut found = Vec::new();
    for path in paths {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ConfineError::Protected(format!(
                    "the protected path {} is a symbolic link, so it cannot be kept read-only; no program runs until it is removed (or the operator lifts the protection with [policy] protected_paths)",
                    path.display()
                )));
            }
            Ok(_) => found.push(path.clone()),
            Err(_) => {}
        }
    }
    Ok(found)
}

fn build_ruleset(spec: &ConfinementSpec, private_proc: bool) -> Result<OwnedFd, ConfineError> {
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| ConfineError::Build(e.to_string());
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);

    let mut read_paths: Vec<PathBuf> = spec.read.clone();
    if spec.read_everywhere {
        read_paths.push(PathBuf::from("/"));
    } else {
        read_paths.extend(SYSTEM_READ_PATHS.iter().map(PathBuf::from));
        if spec.network {
            read_paths.extend(NETWORK_READ_PATHS.iter().map(PathBuf::from));
        }
        if private_proc {
            // Only the sandbox's own processes are visible there.
            read_paths.push(PathBuf::from("/proc"));
        }
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
