//! Hardening the sandcrab process itself against the programs it runs.

/// Make this process non-dumpable: its `/proc/<pid>/environ`, `mem`,
/// `fd/` and friends then belong to root and cannot be read or ptrace'd by
/// a program running as the same user (the keys in sandcrab's environment
/// and memory stay out of reach), and it never writes a core dump.
pub fn harden_host() {
    // SAFETY: prctl with constant arguments on this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(
            "cannot make sandcrab non-dumpable: {}",
            std::io::Error::last_os_error()
        );
    }
}
