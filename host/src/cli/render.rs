//! Showing session events on a terminal: assistant text on stdout, tool
//! activity and notes on stderr, with control sequences made visible (see
//! [`super::terminal`]); or every event as one JSON line (escaped by JSON).
//!
//! The drawing runs on a task of its own ([`Renderer`]); whoever prints
//! besides it (chat's prompt, an error, an approval request) first waits
//! with [`Renderer::flush`] until everything emitted so far is drawn and
//! the answer's line is ended, so nothing lands in the middle of an answer.

use std::sync::{Arc, Mutex};

use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};

use super::terminal::sanitize;
use super::view::diff_view::render_change;
use super::view::live_area::LiveArea;
use super::view::markdown::Markdown;
use super::view::style::{Look, Style, Styled, terminal_width};
use crate::agent::{Event, EventData, EventStream};
use crate::llm::Usage;

/// Draws a session's events from a task of its own.
pub struct Renderer {
    flushes: mpsc::UnboundedSender<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    usage: Arc<Mutex<Option<Usage>>>,
}

impl Renderer {
    /// Start drawing `events`: as JSON lines when `json`, else for a
    /// terminal that takes `look`.
    pub fn spawn(events: EventStream, json: bool, look: Look) -> Renderer {
        let (flushes, requests) = mpsc::unbounded_channel();
        let usage = Arc::new(Mutex::new(None));
        let screen = Screen {
            at_line_start: true,
            look,
            markdown: Markdown::new(look),
            live: LiveArea::new(look),
            usage: usage.clone(),
        };
        Renderer {
            flushes,
            task: tokio::spawn(render(events, json, requests, screen)),
            usage,
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

    /// The tokens of the last input processed, as the provider reported.
    pub fn last_usage(&self) -> Option<Usage> {
        self.usage.lock().map(|u| *u).unwrap_or(None)
    }

    /// Wait for the events to end (the session was closed) and the last
    /// one to be drawn.
    pub async fn finish(self) {
        drop(self.flushes);
        let _ = self.task.await;
    }
}

/// How often a running call's block is redrawn.
const TICK: std::time::Duration = std::time::Duration::from_millis(120);

/// Print `events` until the stream ends, answering flush requests once
/// what was queued before them is drawn.
async fn render(
    mut events: EventStream,
    json: bool,
    mut flushes: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    mut screen: Screen,
) {
    let draw = |event: &Event, screen: &mut Screen| {
        if json {
            outln!("{}", super::terminal::json(event));
        } else {
            screen.human(event);
        }
    };
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
            _ = ticks.tick(), if screen.live.active() => {
                screen.refresh_width();
                let frame = screen.live.redraw();
                write_err_styled(&frame);
            }
        }
    }
    screen.end_line();
}

/// What is on the terminal: where the cursor is in the answer's text, the
/// answer's Markdown so far, the live blocks of running calls.
struct Screen {
    at_line_start: bool,
    look: Look,
    markdown: Markdown,
    live: LiveArea,
    usage: Arc<Mutex<Option<Usage>>>,
}

impl Screen {
    /// End the answer's line if it is open (a note or a prompt never
    /// continues it), drawing what the Markdown still holds.
    fn end_line(&mut self) {
        let (rest, open) = self.markdown.finish();
        if !rest.is_empty() {
            write_out_styled(&rest);
        }
        if !self.at_line_start || open {
            outln!();
            self.at_line_start = true;
        }
    }

    /// Something else is printed: the answer's line ends and the live
    /// blocks step aside (the next tick draws them again).
    fn make_room(&mut self) {
        self.end_line();
        let erase = self.live.erase();
        if !erase.is_empty() {
            write_err_styled(&erase);
        }
    }

    /// Measure the terminal again (it may have been resized); a plain
    /// look stays plain.
    fn refresh_width(&mut self) {
        if !self.look.color {
            return;
        }
        let width = terminal_width();
        if width != self.look.width {
            self.look.width = width;
            self.look.live = width.is_some();
            self.markdown.set_look(self.look);
            self.live.set_look(self.look);
        }
    }

    fn human(&mut self, event: &Event) {
        match &event.data {
            EventData::AssistantTextStart(_) => self.refresh_width(),
            EventData::AssistantTextDelta(d) => {
                let erase = self.live.erase();
                write_err_styled(&erase);
                let text = self.markdown.push(&d.delta);
                if !text.is_empty() {
                    write_out_styled(&text);
                    self.at_line_start = text.as_terminal_bytes().ends_with('\n');
                }
            }
            EventData::AssistantTextEnd(_) => self.end_line(),
            EventData::ToolCallStart(d) => {
                self.make_room();
                self.refresh_width();
                let room = self.look.width.map_or(120, |w| {
                    w.saturating_sub(d.name.chars().count() + 5).max(20)
                });
                let mut line = Styled::new(self.look.color);
                line.styled(Style::BoldCyan, "● ")
                    .styled(Style::Bold, &d.name)
                    .styled(
                        Style::Dim,
                        &format!("({})", call_summary(&d.arguments, room)),
                    )
                    .text("\n");
                write_err_styled(&line);
                self.live.start(&d.call_id, &d.name);
            }
            EventData::ToolCallOutputDelta(d) => {
                let lines = self.live.output(&d.call_id, &d.text);
                if !lines.is_empty() {
                    self.make_room();
                    write_err_styled(&lines);
                }
            }
            EventData::ToolCallEnd(d) => {
                self.make_room();
                let collapsed = self.live.end(&d.call_id);
                write_err_styled(&collapsed);
                self.notice(&event.data);
                for change in &d.changes {
                    write_err_styled(&render_change(change, self.look, MAX_DIFF_LINES));
                }
            }
            EventData::ProcessingEnd(d) => {
                if let Ok(mut usage) = self.usage.lock() {
                    *usage = Some(d.usage);
                }
            }
            // Anything else is at most a line of its own on stderr: the
            // answer's line is ended first, so a note never splits it.
            data => self.notice(data),
        }
    }

    fn notice(&mut self, data: &EventData) {
        let Some(line) = notice(data) else { return };
        self.make_room();
        let mut out = Styled::new(self.look.color);
        let style = if line.starts_with("error:") || line.starts_with("  ✗") {
            Some(Style::Red)
        } else if line.starts_with("warning:") {
            Some(Style::Yellow)
        } else if line.starts_with("note:") || line.starts_with("  ⎿") {
            Some(Style::Dim)
        } else {
            None
        };
        match (style, line.strip_prefix("● ")) {
            (_, Some(rest)) => out.styled(Style::BoldCyan, "● ").text(rest),
            (Some(style), None) => out.styled(style, &line),
            (None, None) => out.text(&line),
        };
        out.text("\n");
        write_err_styled(&out);
    }
}

/// Most diff lines shown for one change as it happens.
const MAX_DIFF_LINES: usize = 40;

fn write_out_styled(text: &Styled) {
    super::terminal::write_styled(text, super::terminal::Sink::Out);
}

fn write_err_styled(text: &Styled) {
    super::terminal::write_styled(text, super::terminal::Sink::Err);
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

/// A call's arguments on one line of at most `room` characters: the path
/// or command it works on when it names one, else its JSON.
fn call_summary(arguments: &serde_json::Value, room: usize) -> String {
    let main = ["command", "file_path", "path", "pattern", "query", "url"]
        .iter()
        .find_map(|key| arguments.get(key)?.as_str());
    let text = match main {
        Some(main) if arguments.as_object().is_some_and(|o| o.len() == 1) => main.to_string(),
        Some(main) => format!("{main}, …"),
        None => arguments.to_string(),
    };
    super::terminal::one_line(&short(&text, room), usize::MAX)
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}
