//! What plugins write to the host's log — `log` import lines and the
//! guest's stdout/stderr — bounded and made inert: each call may write a
//! limited number of lines of limited length, and a line can neither break
//! into several (forging host log lines) nor carry terminal control
//! sequences.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Log lines one call may write.
pub const MAX_LINES_PER_CALL: u32 = 200;
/// Longest line kept (longer lines are cut).
pub const MAX_LINE_BYTES: usize = 2048;

/// How much of the host log one call may still use.
#[derive(Debug)]
pub struct LogBudget {
    plugin: Arc<str>,
    lines: AtomicU32,
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
        })
    }

    /// Start the budget over, for the next call of a reused instance.
    pub fn reset(&self) {
        self.lines.store(0, Ordering::Relaxed);
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
            self.out
                .budget
                .line(Level::Debug, self.out.stream, text.trim_end());
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
}
