//! What plugins write to the host's log — `log` import lines and the
//! guest's stdout/stderr — bounded and made inert: each call may write a
//! limited number of lines of limited length, and a line can neither break
//! into several (forging host log lines) nor carry terminal control
//! sequences.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Log lines one call may write.
pub const MAX_LINES_PER_CALL: u32 = 200;
/// Longest line kept (longer lines are cut).
pub const MAX_LINE_BYTES: usize = 2048;
/// The guest's last stderr lines kept to explain a crash (whatever the
/// log budget let through).
const CRASH_TAIL_LINES: usize = 16;
/// Most of the guest's last words a crash report carries.
const CRASH_WORDS_BYTES: usize = 1024;

/// How much of the host log one call may still use.
#[derive(Debug)]
pub struct LogBudget {
    plugin: Arc<str>,
    lines: AtomicU32,
    /// The last stderr lines of this call, made inert.
    stderr_tail: Mutex<VecDeque<String>>,
}

/// Severity of a plugin log line.
#[derive(Debug, Clone, Copy)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogBudget {
    /// A fresh budget for one call of `plugin`.
    pub fn new(plugin: &str) -> Arc<Self> {
        Arc::new(LogBudget {
            plugin: Arc::from(plugin),
            lines: AtomicU32::new(0),
            stderr_tail: Mutex::new(VecDeque::with_capacity(CRASH_TAIL_LINES)),
        })
    }

    /// Start the budget over, for the next call of a reused instance.
    pub fn reset(&self) {
        self.lines.store(0, Ordering::Relaxed);
        self.tail().clear();
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, VecDeque<String>> {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn keep_stderr(&self, text: &str) {
        let mut tail = self.tail();
        if tail.len() == CRASH_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(inert(text));
    }

    /// What the guest said last on stderr, to explain why it crashed: a
    /// Rust panic as `panicked at FILE:LINE:COL: MESSAGE`, else its last
    /// lines (a Python traceback's exception, a JavaScript error).
    pub fn last_words(&self) -> Option<String> {
        let tail = self.tail();
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        crash_words(&lines)
    }

    /// Write one line (sanitized, cut) if the budget allows; the first line
    /// over the budget says the rest are dropped.
    pub fn line(&self, level: Level, source: &str, text: &str) {
        let n = self.lines.fetch_add(1, Ordering::Relaxed);
        if n > MAX_LINES_PER_CALL {
            return;
        }
        let plugin = &*self.plugin;
        if n == MAX_LINES_PER_CALL {
            tracing::warn!(target: "sandcrab::plugin", plugin, "more than {MAX_LINES_PER_CALL} log lines in one call; the rest of this call's log is dropped");
            return;
        }
        let text = inert(text);
        match level {
            Level::Trace => tracing::trace!(target: "sandcrab::plugin", plugin, source, "{text}"),
            Level::Debug => tracing::debug!(target: "sandcrab::plugin", plugin, source, "{text}"),
            Level::Info => tracing::info!(target: "sandcrab::plugin", plugin, source, "{text}"),
            Level::Warn => tracing::warn!(target: "sandcrab::plugin", plugin, source, "{text}"),
            Level::Error => tracing::error!(target: "sandcrab::plugin", plugin, source, "{text}"),
        }
    }
}

/// `text` on one line, without control characters (escaped as `\n`,
/// `\u{1b}`, …), cut to [`MAX_LINE_BYTES`].
pub fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LINE_BYTES) + 8);
    for c in text.chars() {
        if out.len() >= MAX_LINE_BYTES {
            out.push_str(" [cut]");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The message of the last Rust panic in `lines` (`thread '…' panicked
/// at LOCATION:` then the message, up to the `note: run with` line), else
/// the last few lines; bounded.
fn crash_words(lines: &[&str]) -> Option<String> {
    let words = match lines.iter().rposition(|l| l.contains("panicked at ")) {
        Some(start) => {
            let head = lines[start];
            let location = head[head.find("panicked at ").unwrap()..].trim_end_matches(':');
            let message: Vec<&str> = lines[start + 1..]
                .iter()
                .take_while(|l| !l.starts_with("note: run with"))
                .copied()
                .collect();
            format!("{location}: {}", message.join(" / "))
        }
        None => {
            let last: Vec<&str> = lines.iter().rev().take(4).rev().copied().collect();
            if last.is_empty() {
                return None;
            }
            last.join(" / ")
        }
    };
    let mut words = words;
    if words.len() > CRASH_WORDS_BYTES {
        let cut = (0..=CRASH_WORDS_BYTES)
            .rev()
            .find(|&i| words.is_char_boundary(i))
            .unwrap_or(0);
        words.truncate(cut);
        words.push_str(" [cut]");
    }
    Some(words)
}

/// Guest stdout/stderr: each line goes to the host log at debug level,
/// under the call's budget; writes never fail, so a chatty guest cannot
/// crash itself.
#[derive(Clone)]
pub struct GuestOutput {
    budget: Arc<LogBudget>,
    stream: &'static str,
}

impl GuestOutput {
    pub fn new(budget: Arc<LogBudget>, stream: &'static str) -> Self {
        GuestOutput { budget, stream }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineLogger {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

struct LineLogger {
    out: GuestOutput,
    line: Vec<u8>,
}

impl LineLogger {
    fn emit(&mut self) {
        if !self.line.is_empty() {
            let text = String::from_utf8_lossy(&self.line);
            let text = text.trim_end();
            if self.out.stream == "stderr" {
                self.out.budget.keep_stderr(text);
            }
            self.out.budget.line(Level::Debug, self.out.stream, text);
            self.line.clear();
        }
    }
}

impl AsyncWrite for LineLogger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        for &byte in buf {
            if byte == b'\n' || self.line.len() >= MAX_LINE_BYTES {
                self.emit();
            }
            if byte != b'\n' {
                self.line.push(byte);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.emit();
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineLogger {
    fn drop(&mut self) {
        self.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_inert_and_cut() {
        assert_eq!(inert("a\nb\x1b]52;c;x\x07"), "a\\nb\\u{1b}]52;c;x\\u{7}");
        let long = inert(&"é".repeat(5000));
        assert!(long.len() <= MAX_LINE_BYTES + 10 && long.ends_with(" [cut]"));
    }

    #[test]
    fn a_rust_panic_reads_as_location_and_message() {
        let lines = [
            "starting",
            "thread '<unnamed>' panicked at src/lib.rs:165:9:",
            "it broke on purpose",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ];
        assert_eq!(
            crash_words(&lines).unwrap(),
            "panicked at src/lib.rs:165:9: it broke on purpose"
        );
    }

    #[test]
    fn other_guests_give_their_last_lines_and_silence_gives_none() {
        let lines = [
            "Traceback (most recent call last):",
            "  File \"app.py\", line 3",
            "ValueError: bad",
        ];
        assert!(crash_words(&lines).unwrap().ends_with("ValueError: bad"));
        assert_eq!(crash_words(&[]), None);
    }
}
