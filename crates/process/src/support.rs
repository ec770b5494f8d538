//! What this kernel lets sandcrab enforce, probed once per process by
//! trying each mechanism in a short-lived child, and what each mode
//! therefore guarantees here.

use std::io;
use std::sync::{Once, OnceLock};

use super::mode::SandboxMode;

/// The confinement mechanisms this kernel provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SandboxSupport {
    /// The kernel's Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Unprivileged user namespaces.
    pub user_ns: bool,
    /// A user namespace with a fresh network namespace.
    pub net_ns: bool,
    /// A user namespace with a fresh PID namespace.
    pub pid_ns: bool,
    /// A user namespace with a mount namespace where read-only bind mounts
    /// work (protected paths).
    pub mount_ns: bool,
    /// A private `/proc` can be mounted in the PID namespace.
    pub private_proc: bool,
    /// seccomp filters.
    pub seccomp: bool,
}

/// Landlock ABI that handles truncation (below it, seccomp stands in).
pub const LANDLOCK_ABI_TRUNCATE: i32 = 3;
/// Landlock ABI with signal and abstract-socket scoping.
pub const LANDLOCK_ABI_SCOPES: i32 = 6;

impl SandboxSupport {
    /// Landlock is available.
    pub fn landlock(&self) -> bool {
        self.landlock_abi > 0
    }

    /// What `mode` needs that this kernel lacks, one phrase each (empty:
    /// the mode's guarantees hold here). `network` says whether the
    /// program may use the network (if not, a network namespace is needed).
    pub fn missing(&self, mode: SandboxMode, network: bool) -> Vec<&'static str> {
        if mode == SandboxMode::Off {
            return Vec::new();
        }
        let mut missing = Vec::new();
        if !self.landlock() {
            missing.push("Landlock (filesystem rules)");
        }
        if !self.user_ns {
            missing.push("unprivileged user namespaces");
        }
        if !self.pid_ns {
            missing.push("PID namespaces (every descendant dies with the call)");
        }
        if !self.mount_ns {
            missing.push("mount namespaces (read-only protected paths)");
        }
        if !self.seccomp {
            missing.push("seccomp filters");
        }
        if !network && !self.net_ns {
            missing.push("network namespaces (no network)");
        }
        missing
    }
}

/// Probe the kernel (once) and log what is missing.
pub fn support() -> SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let found = probe();
        let missing = found.missing(SandboxMode::Locked, false);
        if !missing.is_empty() {
            tracing::warn!(
                "this kernel cannot confine programs fully (missing: {}); confining modes refuse to run programs; see `sandcrab sandbox status`",
                missing.join(", ")
            );
        }
        found
    })
}

/// Start [`support`]'s probe on a thread of its own, once, so that
/// start-up goes on meanwhile; the first caller of [`support`] waits for
/// it. What is missing is still reported at start.
pub fn probe_in_background() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("sandcrab-probe".into())
            .spawn(|| {
                support();
            });
        if spawned.is_err() {
            support();
        }
    });
}

fn probe() -> SandboxSupport {
    let maps = super::child::IdMaps::current();
    let mount_plan = mount_probe_plan();
    let user_ns = || unshare(libc::CLONE_NEWUSER);
    let net_ns = || unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
    let mount_ns = || match &mount_plan {
        Some(plan) => probe_mount_ns(plan, &maps),
        None => Err(probe_failed()),
    };
    let private_proc = || probe_private_proc(&maps);
    let probes: [&dyn Fn() -> io::Result<()>; 5] =
        [&user_ns, &net_ns, &probe_pid_ns, &mount_ns, &private_proc];
    // Every mechanism is tried at once, each in a child of its own: what
    // takes the time is the kernel making namespaces, and the children
    // make theirs side by side. Each child is waited for, whatever the
    // others said.
    let children = probes.map(ProbeChild::start);
    let mut worked = children.map(ProbeChild::succeeded);
    // A host that limits namespaces or processes may refuse five at once
    // what it allows one at a time: what failed is tried again alone. The
    // others each need a user namespace (the first probe): without one,
    // trying them again could change nothing reported.
    for (i, probe) in probes.into_iter().enumerate() {
        if i > 0 && !worked[0] {
            break;
        }
        if !worked[i] {
            worked[i] = ProbeChild::start(probe).succeeded();
        }
    }
    let [user_ns, net_ns, pid_ns, mount_ns, private_proc] = worked;
    SandboxSupport {
        landlock_abi: landlock_abi(),
        user_ns,
        net_ns: user_ns && net_ns,
        pid_ns: user_ns && pid_ns,
        mount_ns: user_ns && mount_ns,
        private_proc: user_ns && private_proc,
        seccomp: seccomp_available(),
    }
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

fn seccomp_available() -> bool {
    // With filter support, a null filter is EFAULT; without, EINVAL.
    // SAFETY: prctl with a null pointer that the kernel checks.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            std::ptr::null::<libc::c_void>(),
        )
    };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT)
}

/// A forked child trying one mechanism: it runs `setup` and nothing else
/// (what is probed — namespaces, mounts — is decided by the system calls;
/// executing a program after them would only add a program load per probe
/// to every start), and exits 0 when it worked.
struct ProbeChild(Option<libc::pid_t>);

impl ProbeChild {
    /// Fork a child that runs `setup` (None: it could not be forked).
    /// `setup` is only borrowed: nothing it holds is dropped (freed) in
    /// the child.
    fn start(setup: &dyn Fn() -> io::Result<()>) -> Self {
        // SAFETY: the child is a copy of one thread of a possibly threaded
        // process; it only makes async-signal-safe system calls (the setups
        // are written for a child between fork and exec, return raw OS
        // errors and borrow what they use) and leaves with `_exit`, running
        // no destructor or atexit handler.
        unsafe {
            match libc::fork() {
                -1 => ProbeChild(None),
                0 => libc::_exit(if setup().is_ok() { 0 } else { 1 }),
                pid => ProbeChild(Some(pid)),
            }
        }
    }

    /// Wait for the child; whether its mechanism worked.
    fn succeeded(self) -> bool {
        self.0.is_some_and(exited_zero)
    }
}

/// Wait for child `pid`; whether it exited with status 0.
fn exited_zero(pid: libc::pid_t) -> bool {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child, with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        }
        if rc == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// A failure a probe child reports by its exit status alone (no
/// allocation between fork and exit).
fn probe_failed() -> io::Error {
    io::Error::from_raw_os_error(libc::ECHILD)
}

fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare is async-signal-safe.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A child in a new PID namespace can be started and reaped.
fn probe_pid_ns() -> io::Result<()> {
    unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID)?;
    // SAFETY: fork/waitpid/_exit in a single-threaded child.
    unsafe {
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => libc::_exit(if libc::getpid() == 1 { 0 } else { 1 }),
            pid if exited_zero(pid) => Ok(()),
            _ => Err(probe_failed()),
        }
    }
}

/// The bind mounts the mount probe tries: the temp directory read-only,
/// then a cover over it (what protected paths and the host's hidden
/// secrets need). None: they cannot even be planned here.
fn mount_probe_plan() -> Option<super::child::BindPlan> {
    use crate::kept::{Cover, CoverKind};
    let dir = std::env::temp_dir();
    let covers = [
        Cover {
            path: dir.clone(),
            kind: CoverKind::ReadOnly,
            is_dir: true,
        },
        Cover {
            path: dir,
            kind: CoverKind::Hide,
            is_dir: true,
        },
    ];
    super::child::BindPlan::new(&covers).ok()
}

/// `plan`'s bind mounts work in a new mount namespace.
fn probe_mount_ns(plan: &super::child::BindPlan, maps: &super::child::IdMaps) -> io::Result<()> {
    unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)?;
    // SAFETY: the probe child only makes async-signal-safe calls.
    unsafe {
        maps.write();
        plan.apply()
    }
}

/// procfs can be mounted for a new PID namespace.
fn probe_private_proc(maps: &super::child::IdMaps) -> io::Result<()> {
    unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS)?;
    // SAFETY: async-signal-safe calls in a single-threaded child.
    unsafe {
        maps.write();
        super::child::make_mounts_private()?;
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => libc::_exit(if super::child::mount_private_proc().is_ok() {
                0
            } else {
                1
            }),
            pid if exited_zero(pid) => Ok(()),
            _ => Err(probe_failed()),
        }
    }
}
