//! The terminal's own settings while `chat` runs: quiet during a turn
//! (keys neither echoed into the drawing nor edited, Ctrl-C still a
//! signal), typed-ahead input thrown away before a question, and the
//! settings chat found put back however it ends.

use std::sync::OnceLock;

/// The terminal's settings when chat began.
static ORIGINAL: OnceLock<libc::termios> = OnceLock::new();

const BRACKETED_PASTE_ON: &[u8] = b"\x1b[?2004h";
const BRACKETED_PASTE_OFF: &[u8] = b"\x1b[?2004l";

/// The settings of the terminal on descriptor 0, if it is one.
fn settings() -> Option<libc::termios> {
    let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr fills the struct it is given or fails.
    if unsafe { libc::tcgetattr(0, termios.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: tcgetattr succeeded, so the struct is initialized.
    Some(unsafe { termios.assume_init() })
}

/// Apply `settings` to the terminal on descriptor 0; whether it took.
fn apply(settings: &libc::termios) -> bool {
    // SAFETY: a valid termios for the terminal on descriptor 0.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, settings) == 0 }
}

/// Write one of our own control sequences to the terminal (descriptor 2).
fn send(sequence: &[u8]) {
    // SAFETY: a write of a constant buffer to descriptor 2.
    unsafe {
        libc::write(2, sequence.as_ptr().cast(), sequence.len());
    }
}

/// Remember the settings to put back (see [`restore`]).
pub fn remember() {
    if let Some(original) = settings() {
        let _ = ORIGINAL.set(original);
    }
}

/// Put the terminal back as it was found (nothing when no line editor
/// changed it).
pub fn restore() {
    if let Some(original) = ORIGINAL.get() {
        apply(original);
        send(BRACKETED_PASTE_OFF);
    }
}

/// SIGTERM, SIGHUP and SIGQUIT (Ctrl-\) end chat as they would any
/// program, but with the terminal as chat found it (the line editor and a
/// running turn change its settings).
pub async fn restore_on_signals() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hangup), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        return;
    };
    let code = tokio::select! {
        _ = term.recv() => 128 + libc::SIGTERM,
        _ = hangup.recv() => 128 + libc::SIGHUP,
        _ = quit.recv() => 128 + libc::SIGQUIT,
    };
    restore();
    // What running programs made is swept before sandcrab goes.
    crate::process::stop_and_sweep_all();
    std::process::exit(code);
}

/// The settings before [`quiet`], put back on drop.
pub struct Quiet {
    saved: libc::termios,
}

impl Drop for Quiet {
    fn drop(&mut self) {
        apply(&self.saved);
        send(BRACKETED_PASTE_OFF);
    }
}

/// While a turn runs: keys typed are not echoed (they would land in the
/// middle of what is drawn) and wait, unedited, for the next prompt; a
/// paste stays one input there (bracketed). Ctrl-C still interrupts.
/// Undone when the guard drops.
pub fn quiet() -> Option<Quiet> {
    let saved = settings()?;
    let mut quiet = saved;
    quiet.c_lflag &= !(libc::ECHO | libc::ICANON);
    quiet.c_cc[libc::VMIN] = 1;
    quiet.c_cc[libc::VTIME] = 0;
    if !apply(&quiet) {
        return None;
    }
    send(BRACKETED_PASTE_ON);
    Some(Quiet { saved })
}

/// Throw away what was typed ahead on the terminal, so a key pressed
/// before a question existed never answers it; how many bytes.
pub fn discard_typeahead() -> usize {
    // SAFETY: isatty, ioctl(FIONREAD) and tcflush only act on descriptor
    // 0 and the integer given.
    unsafe {
        if libc::isatty(0) != 1 {
            return 0;
        }
        let mut waiting: libc::c_int = 0;
        libc::ioctl(0, libc::FIONREAD, &mut waiting);
        libc::tcflush(0, libc::TCIFLUSH);
        waiting.max(0) as usize
    }
}
