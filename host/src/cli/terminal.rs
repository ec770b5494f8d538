//! Text for a terminal: everything sandcrab prints goes through here, so
//! model output, tool output, config values, server answers and anything
//! else a plugin, provider, repository or peer controls is printed without
//! control sequences: it cannot set the clipboard (OSC 52), retitle the
//! window, plant hyperlinks, clear the screen, move the cursor over earlier
//! lines or reorder text with bidi controls.
//!
//! The command line prints only with [`outln!`], [`out!`], [`errln!`] and
//! [`err!`] (the std print macros are refused by clippy in this crate), and
//! JSON with [`json`].

use std::borrow::Cow;
use std::io::Write;

use crate::terminal_safe::{json_text, needs_escape};

/// `text` with every control character except newline and tab, and every
/// bidirectional-override character, replaced by a visible escape.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as one line of JSON whose every character is safe on a
/// terminal: what [`sanitize`] would escape is written as a JSON `\uXXXX`
/// escape instead, so the line stays valid JSON with the same meaning.
pub fn json(value: &impl serde::Serialize) -> String {
    json_text(&serde_json::to_string(value).unwrap_or_default())
}

/// Like [`json`], pretty-printed.
pub fn json_pretty(value: &impl serde::Serialize) -> String {
    json_text(&serde_json::to_string_pretty(value).unwrap_or_default())
}

/// `text` on one line: line breaks and tabs escaped (`\n`), cut to `max`
/// characters with how many were left out — for text someone else wrote
/// (a model's command, a path) shown where a line break could fake
/// sandcrab's own output.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (shown, c) in text.chars().enumerate() {
        if shown == max {
            let rest = text.chars().count() - max;
            out.push_str(&format!("… ({rest} more characters)"));
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// Write `text`, sanitized, to stdout (see [`to_stdout`]).
pub fn write_out(text: &str) {
    to_stdout(sanitize(text).as_bytes());
}

/// Write `text`, sanitized, to stderr.
pub fn write_err(text: &str) {
    to_stderr(sanitize(text).as_bytes());
}

/// Write `bytes` to stdout. Output that cannot be written ends sandcrab.
/// When whoever reads stdout went away (`sandcrab … | head`), as other
/// Unix tools do: by the default action of SIGPIPE, which sandcrab
/// otherwise ignores so that a closed socket or pipe elsewhere is an error
/// and not its end. Any other failure (a full disk under
/// `sessions export > file`) is said, with exit status 74, rather than
/// ending as if all had been written.
fn to_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let Err(err) = out.write_all(bytes).and_then(|()| out.flush()) else {
        return;
    };
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        // SAFETY: restoring the default action of a signal and raising it;
        // the process ends here.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
    write_err(&format!(
        "sandcrab: cannot write to standard output: {err}\n"
    ));
    std::process::exit(74);
}

/// Write `bytes` to stderr (if that fails, there is nowhere left to say
/// so).
fn to_stderr(bytes: &[u8]) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(bytes).and_then(|()| err.flush());
}

/// Where styled text goes.
#[derive(Debug, Clone, Copy)]
pub enum Sink {
    Out,
    Err,
}

/// Write `text` (built by [`Styled`](super::view::style::Styled), whose
/// only escapes are sandcrab's own styles) to stdout or stderr.
pub fn write_styled(text: &super::view::style::Styled, sink: Sink) {
    let bytes = text.as_terminal_bytes().as_bytes();
    if bytes.is_empty() {
        return;
    }
    match sink {
        Sink::Out => to_stdout(bytes),
        Sink::Err => to_stderr(bytes),
    }
}

/// `println!`, sanitized.
macro_rules! outln {
    () => { $crate::cli::terminal::write_out("\n") };
    ($($arg:tt)*) => { $crate::cli::terminal::write_out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!`, sanitized.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::terminal::write_out(&format!($($arg)*)) };
}

/// `eprintln!`, sanitized.
macro_rules! errln {
    () => { $crate::cli::terminal::write_err("\n") };
    ($($arg:tt)*) => { $crate::cli::terminal::write_err(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!`, sanitized.
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::terminal::write_err(&format!($($arg)*)) };
}

/// An I/O error in words, without the `(os error N)` code.
pub fn io_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_lowercase(),
        None => text,
    }
}

/// `1 turn`, `2 turns`: a count and its noun, singular or plural.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reach_the_terminal_only_as_text() {
        let hostile = "ok\x1b]52;c;cHduZWQ=\x07\x1b[2J\r\u{9b}31m\u{202e}evil\ttab\nnext";
        let shown = sanitize(hostile);
        assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
        assert!(!shown.contains('\u{9b}') && !shown.contains('\u{202e}'));
        assert!(shown.contains("\\u{1b}]52;c;cHduZWQ=") && shown.contains("\ttab\nnext"));
        assert!(matches!(sanitize("plain text\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_for_a_terminal_stays_valid_and_means_the_same() {
        let value = serde_json::json!({"m": "a\u{7f}b\u{9b}c\u{202e}d\x1b]0;t\x07\n"});
        for text in [json(&value), json_pretty(&value)] {
            assert_eq!(sanitize(&text), text.as_str(), "nothing left to escape");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
    }
}
