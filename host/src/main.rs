fn main() -> std::process::ExitCode {
    // Behave like other Unix tools when the reader of our output goes away
    // (`sandcrab plugins inspect x | head`): end quietly.
    // SAFETY: restoring the default disposition of a signal at startup.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    sandcrab::cli::main()
}
