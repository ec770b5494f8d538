//! Showing session events on a terminal: assistant text on stdout, tool
//! activity and notes on stderr, with control sequences made visible (see
//! [`super::terminal`]); or every event as one JSON line (escaped by JSON).
//!
//! The drawing runs on a task of its own ([`Renderer`]); whoever prints
//! besides it (chat's prompt, an error, an approval request) first waits
//! with [`Renderer::flush`] until everything emitted so far is drawn and
//! the answer's line is ended, so nothing lands in the middle of an answer.

use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};

use super::terminal::sanitize;
use crate::agent::{Event, EventData, EventStream};

/// Draws a session's events from a task of its own.
pub struct Renderer {
    flushes: mpsc::UnboundedSender<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Renderer {
    /// Start drawing `events` (as JSON lines when `json`).
    pub fn spawn(events: EventStream, json: bool) -> Renderer {
        let (flushes, requests) = mpsc::unbounded_channel();
        Renderer {
            flushes,
            task: tokio::spawn(render(events, json, requests)),
        }
    }

    /// Wait until every event emitted before this call is drawn and the
    /// answer's last line is ended (events are emitted synchronously, so
    /// after a turn returns, its whole rendering is done here).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.flushes.send(ack).is_ok() {
            let _ = done.await;
        }
    }

    /// Wait for the events to end (the session was closed) and the last
    /// one to be drawn.
    pub async fn finish(self) {
        drop(self.flushes);
        let _ = self.task.await;
    }
}

/// Print `events` until the stream ends, answering flush requests once
/// what was queued before them is drawn.
async fn render(
    mut events: EventStream,
    json: bool,
    mut flushes: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let mut screen = Screen {
        at_line_start: true,
    };
    let draw = |event: &Event, screen: &mut Screen| {
        if json {
            outln!("{}", super::terminal::json(event));
        } else {
            human(event, screen);
        }
    };
    loop {
        tokio::select! {
            biased;
            event = events.next() => match event {
                Some(event) => draw(&event, &mut screen),
                None => break,
            },
            Some(ack) = flushes.recv() => {
                while let Some(Some(event)) = events.next().now_or_never() {
                    draw(&event, &mut screen);
                }
                screen.end_line();
                let _ = ack.send(());
            }
        }
    }
    screen.end_line();
}

/// Where the cursor is in the answer's text.
struct Screen {
    at_line_start: bool,
}

impl Screen {
    /// End the answer's line if it is open (a note or a prompt never
    /// continues it).
    fn end_line(&mut self) {
        if !self.at_line_start {
            outln!();
            self.at_line_start = true;
        }
    }
}

fn human(event: &Event, screen: &mut Screen) {
    match &event.data {
        EventData::AssistantTextDelta(d) => {
            out!("{}", sanitize(&d.delta));
            if !d.delta.is_empty() {
                screen.at_line_start = d.delta.ends_with('\n');
            }
        }
        EventData::AssistantTextEnd(_) => screen.end_line(),
        // Anything else is at most a line of its own on stderr: the
        // answer's line is ended first, so a note never splits it.
        data => {
            if let Some(line) = notice(data) {
                screen.end_line();
                errln!("{line}");
            }
        }
    }
}

/// The line an event other than the answer's text shows, if any.
fn notice(data: &EventData) -> Option<String> {
    let clean = |text: &str| sanitize(text).into_owned();
    Some(match data {
        EventData::ToolCallStart(d) => format!(
            "● {}({})",
            clean(&d.name),
            sanitize(&short(&d.arguments.to_string(), 120))
        ),
        EventData::ToolCallEnd(d) => {
            let output = clean(&d.output);
            let first = output.lines().next().unwrap_or("");
            let lines = output.lines().count();
            let more = if lines > 1 {
                format!(" (+{} lines)", lines - 1)
            } else {
                String::new()
            };
            let mark = if d.is_error { "✗" } else { "⎿" };
            format!("  {mark} {}{more}", short(first, 160))
        }
        EventData::TurnLimit(d) => format!(
            "note: turn limit reached ({} = {})",
            d.limit.as_str(),
            d.value
        ),
        EventData::LoopDetection(_) => {
            "note: the agent is repeating itself; it was asked to change approach".into()
        }
        EventData::ContextWarning(d) => {
            let pct = d.usage_percent * 100.0;
            format!("note: the conversation uses about {pct:.0}% of the model's context window")
        }
        EventData::Warning(d) => format!("warning: {}", clean(&d.message)),
        EventData::Error(d) => format!("error: {}", clean(&d.error)),
        EventData::JobStarted(d) => format!(
            "● background job {} started ({})",
            clean(&d.job_id),
            clean(&d.tool)
        ),
        EventData::JobFinished(d) => format!(
            "● background job {} {}",
            clean(&d.job_id),
            d.status.as_str()
        ),
        EventData::CompactionEnd(d) if d.messages_compressed > 0 => format!(
            "● compacted {} messages into {} summary batches (about {} → {} tokens)",
            d.messages_compressed,
            d.batches_created,
            d.tokens_estimate_before,
            d.tokens_estimate_after
        ),
        EventData::CompactionEnd(_) => "● nothing to compact".into(),
        // Whoever asks shows a permission request (chat's prompt); the
        // rest shows nothing.
        _ => return None,
    })
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}
