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
use super::mode::SandboxMode;
use super::support::{LANDLOCK_ABI_TRUNCATE, support};
use crate::kept::{Protected, Registry};

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
    /// Whether the program may make Unix-domain sockets (never in
    /// `locked`; in `workspace-write` only when the operator says so: a
    /// socket reaches whatever listens on it, outside every sandbox — a
    /// terminal multiplexer, docker, the session bus).
    pub unix_sockets: bool,
    /// The workspace whose protected paths (`.git/config`, `.git/hooks`,
    /// …) stay read-only even though the program may write it, when they
    /// exist as the program starts. None: it may not write the workspace
    /// (Landlock keeps them so).
    pub protected: Option<ProtectedWorkspace>,
}

/// A workspace and its protected paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedWorkspace {
    /// The workspace (a real path).
    pub root: PathBuf,
    pub paths: Protected,
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
    protected: Option<ProtectedWorkspace>,
    /// Where the program may write (what the host keeps there is bound
    /// read-only or covered, and the way to it pinned).
    writable: Vec<PathBuf>,
    /// What the program works in (never covered by a secret's cover).
    visible: Vec<PathBuf>,
    /// What the host keeps (None: the registry in force when a program
    /// starts).
    kept: Option<Arc<Registry>>,
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
            protected: None,
            writable: Vec::new(),
            visible: Vec::new(),
            kept: None,
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
            unix_sockets: spec.unix_sockets && spec.mode != SandboxMode::Locked,
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
            writable: spec.write.clone(),
            visible: spec.write.iter().chain(&spec.read).cloned().collect(),
            kept: None,
        })
    }

    /// This confinement, covering what `kept` names instead of the
    /// registry in force (the sandbox probe's own secret).
    pub fn keeping(mut self, kept: Arc<Registry>) -> Self {
        self.kept = Some(kept);
        self
    }

    /// The workspace whose git metadata a program under this confinement
    /// could change (it may write it, and git's metadata is protected):
    /// counted before the program and swept after it.
    pub fn census_root(&self) -> Option<PathBuf> {
        let ws = self.protected.as_ref()?;
        (self.namespaces != 0 && ws.paths.guards_git()).then(|| ws.root.clone())
    }

    /// Whether what a program makes is looked at after it (it is confined
    /// and may write somewhere).
    pub fn watches(&self) -> bool {
        self.namespaces != 0 && !self.writable.is_empty()
    }

    /// The kept paths (what the host keeps, the workspace's fixed
    /// protected paths) absent now beneath what a program may write.
    pub fn absent_kept(&self) -> crate::kept::Absent {
        let registry = self.kept.clone().unwrap_or_else(crate::kept::current);
        crate::kept::Absent::before(
            &registry,
            self.protected
                .as_ref()
                .map(|ws| (ws.root.as_path(), &ws.paths)),
            &self.writable,
        )
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
    /// exec). What the host keeps and the protected paths that exist now
    /// (where the program starts, and `git`: the git metadata a census
    /// found at every depth) are covered, as [`crate::kept`] says.
    pub fn apply(
        &self,
        cmd: &mut tokio::process::Command,
        git: &[(PathBuf, crate::kept::ProtectionKind)],
    ) -> Result<(), ConfineError> {
        let binds = if self.namespaces & libc::CLONE_NEWNS != 0 {
            let protected = match &self.protected {
                Some(ws) => {
                    let cwd = cmd
                        .as_std()
                        .get_current_dir()
                        .and_then(|d| d.canonicalize().ok())
                        .filter(|d| d.starts_with(&ws.root))
                        .unwrap_or_else(|| ws.root.clone());
                    let mut found = ws.paths.existing(&ws.root, &cwd);
                    found.extend(git.iter().cloned());
                    found
                }
                None => Vec::new(),
            };
            let covers = self
                .kept
                .clone()
                .unwrap_or_else(crate::kept::current)
                .covers(&protected, &self.writable, &self.visible)
                .map_err(|e| ConfineError::Protected(e.to_string()))?;
            BindPlan::new(&covers)
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

    // Abstract sockets made outside the sandbox are out of reach in every
    // mode (where the kernel can say so).
    let scopes = Scope::Signal | Scope::AbstractUnixSocket;
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
