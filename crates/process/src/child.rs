//! What a confined child does between `fork` and `exec`. Everything here
//! runs in the forked child of a multi-threaded parent, so it only makes
//! async-signal-safe system calls on data prepared in the parent: no
//! allocation, no locks.
//!
//! The sequence, in the process sandcrab spawned (the *proxy*):
//!
//! 1. `setsid` (own session and process group);
//! 2. `unshare` a user namespace, with a PID namespace, a mount namespace
//!    (when paths must be protected) and a network namespace (when the
//!    network is closed); write the id maps;
//! 3. make mounts private, then cover what the host keeps and the
//!    protected paths, in the order [`crate::kept`] gives (see
//!    [`BindPlan`]);
//! 4. fork the namespace's *init* (PID 1), which mounts a private `/proc`
//!    and forks the *program* process; init reaps everything and exits when
//!    the program exits, and the kernel then kills every process left in
//!    the namespace (`setsid` or not);
//! 5. the proxy ignores SIGTERM (it reaches the program through the
//!    process group), waits for init and exits the way the program did;
//! 6. the program process sets rlimits, drops every capability it has in
//!    its namespace, sets `no_new_privs`, enters the Landlock domain and
//!    installs the seccomp filter, then returns to `exec`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use crate::kept::{Cover, CoverKind};

/// The child's uid/gid inside its user namespace: the same as outside.
#[derive(Debug, Clone)]
pub struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl IdMaps {
    /// Maps for the current user.
    pub fn current() -> Self {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        IdMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Write the maps for the calling process's new user namespace.
    ///
    /// # Safety
    /// Call only in a forked child right after `unshare(CLONE_NEWUSER)`.
    pub unsafe fn write(&self) {
        // SAFETY: plain open/write/close (see write_proc).
        unsafe {
            write_proc(c"/proc/self/setgroups", b"deny");
            write_proc(c"/proc/self/uid_map", &self.uid_map);
            write_proc(c"/proc/self/gid_map", &self.gid_map);
        }
    }
}

/// The mounts a confined program's namespace gets, in order (a folder
/// before what is inside it): secrets covered (a folder by an empty file
/// system no one may list, a file by `/dev/null`), paths bound read-only
/// onto themselves (with the mount flags each remount must keep: flags
/// locked by the kernel in a user namespace), folders pinned (bound onto
/// themselves, so they cannot be moved).
#[derive(Debug, Clone, Default)]
pub struct BindPlan {
    mounts: Vec<Mount>,
}

#[derive(Debug, Clone)]
enum Mount {
    HideDir(CString),
    HideFile(CString),
    ReadOnly(CString, libc::c_ulong),
    Pin(CString),
}

fn c_path(path: &std::path::Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))
}

impl BindPlan {
    /// A plan for `covers` (each exists; read in the parent).
    pub fn new(covers: &[Cover]) -> io::Result<Self> {
        let mut mounts = Vec::new();
        for cover in covers {
            let c = c_path(&cover.path)?;
            mounts.push(match (cover.kind, cover.is_dir) {
                (CoverKind::Hide, true) => Mount::HideDir(c),
                (CoverKind::Hide, false) => Mount::HideFile(c),
                (CoverKind::Pin, _) => Mount::Pin(c),
                (CoverKind::ReadOnly, _) => {
                    // SAFETY: statvfs on a NUL-terminated path into a zeroed struct.
                    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Mount::ReadOnly(c, kept_flags(st.f_flag))
                }
            });
        }
        Ok(BindPlan { mounts })
    }

    /// Whether there is anything to mount.
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// Make every mount private, then mount each cover in order.
    ///
    /// # Safety
    /// Call only in a forked child inside its own mount namespace.
    pub unsafe fn apply(&self) -> io::Result<()> {
        // SAFETY: mount(2) with NUL-terminated paths prepared in the parent.
        unsafe {
            make_mounts_private()?;
            for mount in &self.mounts {
                match mount {
                    Mount::HideDir(dir) => check(libc::mount(
                        c"none".as_ptr(),
                        dir.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        c"mode=000,size=4k,nr_inodes=1".as_ptr().cast(),
                    ))?,
                    Mount::HideFile(file) => check(libc::mount(
                        c"/dev/null".as_ptr(),
                        file.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ))?,
                    Mount::Pin(path) => bind_onto_itself(path)?,
                    Mount::ReadOnly(path, flags) => {
                        bind_onto_itself(path)?;
                        check(libc::mount(
                            std::ptr::null(),
                            path.as_ptr(),
                            std::ptr::null(),
                            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
                            std::ptr::null(),
                        ))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Bind `path` onto itself, with what is mounted beneath it.
///
/// # Safety
/// Call only in a forked child inside its own mount namespace.
unsafe fn bind_onto_itself(path: &CString) -> io::Result<()> {
    // SAFETY: mount(2) with a NUL-terminated path.
    unsafe {
        check(libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ))
    }
}

/// statvfs flags → the mount flags a bind remount must repeat.
fn kept_flags(f: u64) -> libc::c_ulong {
    const MAP: [(u64, libc::c_ulong); 6] = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    MAP.iter()
        .filter(|(st, _)| f & st != 0)
        .fold(0, |acc, (_, ms)| acc | ms)
}

/// Stop mount events from propagating out of (or into) this namespace.
///
/// # Safety
/// Call only in a child inside its own mount namespace.
pub unsafe fn make_mounts_private() -> io::Result<()> {
    // SAFETY: mount(2) with static strings.
    unsafe {
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))
    }
}

/// Mount a procfs for the caller's PID namespace over `/proc`.
///
/// # Safety
/// Call only in a child that is in a new PID and mount namespace.
pub unsafe fn mount_private_proc() -> io::Result<()> {
    // SAFETY: mount(2) with static strings.
    unsafe {
        check(libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))
    }
}

/// Everything a confined child does before `exec`, prepared in the parent.
#[derive(Debug, Clone, Default)]
pub struct ChildPlan {
    /// `CLONE_NEW*` flags to unshare (0: stay in the parent's namespaces).
    pub namespaces: libc::c_int,
    pub maps: Option<IdMaps>,
    pub binds: BindPlan,
    /// Mount a private `/proc` in the PID namespace.
    pub private_proc: bool,
    /// Resource limits: (resource, soft and hard value).
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    /// Landlock ruleset to enter.
    pub ruleset: Option<Arc<OwnedFd>>,
    /// seccomp program to install.
    pub seccomp: Option<Arc<seccompiler::BpfProgram>>,
    /// sandcrab's pid (to notice a parent that died before we were ready).
    pub parent_pid: libc::pid_t,
}

/// Run `plan` in the freshly forked child. Returns only in the process
/// that goes on to `exec` the program.
///
/// # Safety
/// Call only between fork and exec (e.g. from `pre_exec`).
pub unsafe fn enter(plan: &ChildPlan) -> io::Result<()> {
    // SAFETY: each call below is an async-signal-safe system call on data
    // prepared in the parent.
    unsafe {
        check(libc::setsid())?;
        // The kernel's out-of-memory killer picks the program and what it
        // starts before sandcrab: sandcrab must live to sweep after it.
        write_proc(c"/proc/self/oom_score_adj", b"1000");
        if plan.namespaces != 0 {
            check(libc::unshare(plan.namespaces))?;
            if let Some(maps) = &plan.maps {
                maps.write();
            }
            if plan.namespaces & libc::CLONE_NEWNS != 0 {
                if plan.binds.is_empty() {
                    make_mounts_private()?;
                } else {
                    plan.binds.apply()?;
                }
            }
        }
        if plan.namespaces & libc::CLONE_NEWPID != 0 {
            split_into_pid_namespace(plan)?;
        }
        for &(resource, value) in &plan.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            let mut current: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(resource, &mut current);
            if current.rlim_max > value {
                check(libc::setrlimit(resource, &limit))?;
            }
        }
        if plan.namespaces & libc::CLONE_NEWUSER != 0 {
            drop_capabilities();
        }
        if plan.ruleset.is_some() || plan.seccomp.is_some() {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        }
        if let Some(fd) = &plan.ruleset {
            check(libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) as i32)?;
        }
        if let Some(bpf) = &plan.seccomp {
            seccompiler::apply_filter(bpf).map_err(|_| io::Error::last_os_error())?;
        }
    }
    Ok(())
}

/// Fork the PID namespace's init; return (in the program process) only.
/// The proxy and init never return.
unsafe fn split_into_pid_namespace(plan: &ChildPlan) -> io::Result<()> {
    // SAFETY: fork/wait/pipe/prctl/_exit in the single-threaded child.
    unsafe {
        let mut fds = [0; 2];
        check(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC))?;
        let (status_read, status_write) = (fds[0], fds[1]);
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                libc::close(status_read);
                run_init(plan, status_write)
            }
            init => {
                libc::close(status_write);
                run_proxy(plan, init, status_read)
            }
        }
    }
}

/// The proxy: waits for init, then ends the way the program ended.
unsafe fn run_proxy(plan: &ChildPlan, init: libc::pid_t, status_read: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls; this process never returns.
    unsafe {
        // The program gets SIGTERM through the process group and decides;
        // the proxy must outlive it to report how it ended.
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != plan.parent_pid {
            libc::_exit(1);
        }
        close_all_but(status_read);
        let mut status = 0;
        while libc::waitpid(init, &mut status, 0) == -1 && *libc::__errno_location() == libc::EINTR
        {
        }
        let mut raw = [0u8; 4];
        let n = libc::read(status_read, raw.as_mut_ptr().cast(), 4);
        let program = if n == 4 {
            i32::from_ne_bytes(raw)
        } else {
            // init was killed before the program ended (SIGKILL on the
            // group): report that.
            libc::SIGKILL
        };
        if libc::WIFEXITED(program) {
            libc::_exit(libc::WEXITSTATUS(program));
        }
        let signal = if libc::WIFSIGNALED(program) {
            libc::WTERMSIG(program)
        } else {
            libc::SIGKILL
        };
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

/// init (PID 1 of the namespace): mounts `/proc`, forks the program,
/// reaps every process, and exits when the program does.
unsafe fn run_init(plan: &ChildPlan, status_write: libc::c_int) -> io::Result<()> {
    // SAFETY: async-signal-safe calls in the single-threaded child.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if plan.private_proc {
            mount_private_proc()?;
        }
        let program = libc::fork();
        match program {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                libc::close(status_write);
                Ok(())
            }
            program => {
                close_all_but(status_write);
                loop {
                    let mut status = 0;
                    let reaped = libc::waitpid(-1, &mut status, 0);
                    if reaped == program {
                        libc::write(status_write, status.to_ne_bytes().as_ptr().cast(), 4);
                        // Leaving kills everything still in the namespace.
                        libc::_exit(0);
                    }
                    if reaped == -1 && *libc::__errno_location() != libc::EINTR {
                        libc::_exit(1);
                    }
                }
            }
        }
    }
}

/// Close every descriptor except `keep` (the proxy and init must not hold
/// the pipes that tell the parent when the program has exec'd or exited).
unsafe fn close_all_but(keep: libc::c_int) {
    // SAFETY: close_range(2) on our own descriptor table.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// Give up every capability the program holds in its user namespace (as
/// the namespace's root it would otherwise keep them across `exec` and
/// could, say, unmount the protected paths).
unsafe fn drop_capabilities() {
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    // SAFETY: prctl/capset with constant arguments.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECUREBITS,
            SECBIT_NOROOT
                | SECBIT_NOROOT_LOCKED
                | SECBIT_NO_SETUID_FIXUP
                | SECBIT_NO_SETUID_FIXUP_LOCKED
                | SECBIT_NO_CAP_AMBIENT_RAISE
                | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
        );
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        for cap in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        libc::syscall(libc::SYS_capset, &header, data.as_ptr());
    }
}

/// Write `data` to a /proc file; errors ignored (they only change how ids
/// are displayed, not what is allowed).
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

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
