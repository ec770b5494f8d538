//! Hardening the sandcrab process itself against the programs it runs.

/// Make this process non-dumpable: its `/proc/<pid>/environ`, `mem`,
/// `fd/` and friends then belong to root and cannot be read or ptrace'd by
/// a program running as the same user (the keys in sandcrab's environment
/// and memory stay out of reach), and it never writes a core dump.
pub fn harden_host() {
    close_inherited_on_exec();
    // SAFETY: prctl with constant arguments on this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(
            "cannot make sandcrab non-dumpable: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Mark every descriptor sandcrab inherited beyond stdin, stdout and
/// stderr close-on-exec: whatever started sandcrab may have left some open
/// (a terminal's, a harness's), and no program sandcrab confines may reach
/// them.
fn close_inherited_on_exec() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: fcntl on a descriptor number; one that closed since the
        // listing (the listing's own) fails harmlessly.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}
