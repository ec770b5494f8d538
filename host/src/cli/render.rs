//! Showing session events on a terminal: assistant text on stdout, tool
//! activity and notes on stderr, with control sequences made visible (see
//! [`super::terminal`]); or every event as one JSON line (escaped by JSON).
//!
//! The drawing runs on a task of its own ([`Renderer`]); whoever prints
//! besides it (chat's prompt, an error, an approval request) first waits
//! with [`Renderer::flush`] until everything emitted so far is drawn and
//! the answer's line is ended, so nothing lands in the middle of an answer.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::above_prompt::{AbovePrompt, WhilePrompting};
use super::terminal::{Sink, sanitize};
use super::view::diff_view::render_change;
use super::view::live_area::{LiveArea, last_frame};
use super::view::markdown::Markdown;
use super::view::style::{Look, Style, Styled, cut_to, terminal_width, width_of};
use crate::agent::{Event, EventData, EventStream};
use crate::llm::Usage;

/// Draws a session's events from a task of its own.
pub struct Renderer {
    requests: mpsc::UnboundedSender<Request>,
    task: tokio::task::JoinHandle<()>,
    usage: Arc<Mutex<Option<Usage>>>,
    turns: watch::Receiver<u64>,
}

impl Renderer {
    /// Start drawing `events`: as JSON lines when `json`, else for a
    /// terminal that takes `look`, every answer's text on stdout as it
    /// comes.
    pub fn spawn(events: EventStream, json: bool, look: Look) -> Renderer {
        Self::spawn_with(events, json, look, Answers::Streamed)
    }

    /// Like [`Renderer::spawn`], with `answers` saying where the model's
    /// text goes.
    pub fn spawn_with(events: EventStream, json: bool, look: Look, answers: Answers) -> Renderer {
        let (sender, requests) = mpsc::unbounded_channel();
        let usage = Arc::new(Mutex::new(None));
        let (turns_sender, turns) = watch::channel(0);
        let screen = Screen {
            at_line_start: true,
            look,
            markdown: Markdown::new(look),
            live: LiveArea::new(look),
            usage: usage.clone(),
            turns: turns_sender,
            above: None,
            partial: Styled::new(look.color),
            answer_open: false,
            deferred: Vec::new(),
            held_answer: match answers {
                Answers::Streamed => None,
                Answers::FinalOnStdout => Some(Styled::new(look.color)),
            },
        };
        Renderer {
            requests: sender,
            task: tokio::spawn(render(events, json, requests, screen)),
            usage,
            turns,
        }
    }

    /// Wait until every event emitted before this call is drawn and the
    /// answer's last line is ended (events are emitted synchronously, so
    /// after a turn returns, its whole rendering is done here).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.requests.send(Request::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }

    /// Flush, then draw nothing more (the live blocks erased, events kept
    /// for later) until the guard is dropped: the operator is reading a
    /// prompt, and nothing may draw over it.
    pub async fn hold(&self) -> Held<'_> {
        let (ack, done) = oneshot::channel();
        if self.requests.send(Request::Hold(ack)).is_ok() {
            let _ = done.await;
        }
        Held { renderer: self }
    }

    /// A prompt is about to open: what was emitted so far is drawn, the
    /// answer's line ended and the live blocks erased; until
    /// [`Renderer::prompt_closed`], drawing goes on as `how` says.
    pub async fn prompt_open(&self, how: WhilePrompting) {
        let (ack, done) = oneshot::channel();
        if self.requests.send(Request::PromptOpen(how, ack)).is_ok() {
            let _ = done.await;
        }
    }

    /// The prompt was answered: drawing goes on below it.
    pub async fn prompt_closed(&self) {
        let (ack, done) = oneshot::channel();
        if self.requests.send(Request::PromptClosed(ack)).is_ok() {
            let _ = done.await;
        }
    }

    /// Counts the inputs the session finished processing, once drawn
    /// (a turn a finished job woke among them).
    pub fn turns_ended(&self) -> watch::Receiver<u64> {
        self.turns.clone()
    }

    /// The tokens of the last input processed, as the provider reported.
    pub fn last_usage(&self) -> Option<Usage> {
        self.usage.lock().map(|u| *u).unwrap_or(None)
    }

    /// Wait for the events to end (the session was closed) and the last
    /// one to be drawn.
    pub async fn finish(self) {
        drop(self.requests);
        let _ = self.task.await;
    }
}

/// Where the model's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Every answer on stdout as it streams (chat).
    Streamed,
    /// Only the final answer on stdout, once it is known to be final;
    /// what the model says before a tool call (narration) on stderr
    /// (`run`: stdout is the result a script reads).
    FinalOnStdout,
}

/// While alive, the renderer draws nothing (see [`Renderer::hold`]).
pub struct Held<'a> {
    renderer: &'a Renderer,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = self.renderer.requests.send(Request::Release);
    }
}

/// What the chat asks of the drawing task.
enum Request {
    /// Draw what is queued, end the line, answer.
    Flush(oneshot::Sender<()>),
    /// Like flush, then hold everything until `Release`.
    Hold(oneshot::Sender<()>),
    Release,
    /// Like flush, then draw as the open prompt allows.
    PromptOpen(WhilePrompting, oneshot::Sender<()>),
    PromptClosed(oneshot::Sender<()>),
}

/// How long a closed prompt waits for lines still being printed above it.
const ABOVE_DRAIN: std::time::Duration = std::time::Duration::from_millis(300);

/// How often a running call's block is redrawn.
const TICK: std::time::Duration = std::time::Duration::from_millis(120);

/// Print `events` until the stream ends, answering flush requests once
/// what was queued before them is drawn.
async fn render(
    mut events: EventStream,
    json: bool,
    mut requests: mpsc::UnboundedReceiver<Request>,
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
    // An approval prompt is being answered.
    let mut held = false;
    // The line editor's prompt is open and nothing can print above it.
    let mut waiting = false;
    loop {
        let drawing = !held && !waiting;
        tokio::select! {
            biased;
            event = events.next(), if drawing => match event {
                Some(event) => draw(&event, &mut screen),
                None => break,
            },
            request = requests.recv() => {
                let mut drain = |screen: &mut Screen| {
                    while drawing && let Some(event) = crate::agent::next_ready(&mut events) {
                        draw(&event, screen);
                    }
                };
                match request {
                    Some(Request::Flush(ack)) => {
                        drain(&mut screen);
                        if drawing {
                            screen.end_line();
                        }
                        let _ = ack.send(());
                    }
                    Some(Request::Hold(ack)) => {
                        drain(&mut screen);
                        if drawing {
                            screen.make_room();
                        }
                        held = true;
                        let _ = ack.send(());
                    }
                    Some(Request::Release) => held = false,
                    Some(Request::PromptOpen(how, ack)) => {
                        drain(&mut screen);
                        waiting = screen.open_prompt(how);
                        let _ = ack.send(());
                    }
                    Some(Request::PromptClosed(ack)) => {
                        waiting = false;
                        screen.close_prompt().await;
                        let _ = ack.send(());
                    }
                    // The chat is done with us: draw what is left.
                    None => {
                        screen.close_prompt().await;
                        while let Some(event) = events.next().await {
                            draw(&event, &mut screen);
                        }
                        break;
                    }
                }
            },
            _ = ticks.tick(), if drawing && screen.live.active() => {
                screen.refresh_width();
                let frame = screen.live.redraw();
                screen.write(Sink::Err, &frame);
            }
        }
    }
    screen.end_line();
    screen.release_answer(Sink::Out);
}

/// What is on the terminal: where the cursor is in the answer's text, the
/// answer's Markdown so far, the live blocks of running calls.
struct Screen {
    at_line_start: bool,
    look: Look,
    markdown: Markdown,
    live: LiveArea,
    usage: Arc<Mutex<Option<Usage>>>,
    /// Counts the inputs processed, once drawn.
    turns: watch::Sender<u64>,
    /// While the operator types: whole lines go above the prompt.
    above: Option<AbovePrompt>,
    /// The part of a line not yet printed above the prompt.
    partial: Styled,
    /// An answer's text is being drawn.
    answer_open: bool,
    /// Notices waiting for the answer's end.
    deferred: Vec<Styled>,
    /// With [`Answers::FinalOnStdout`]: the answer so far, until it is
    /// known whether a tool call follows it.
    held_answer: Option<Styled>,
}

impl Screen {
    /// Write `text` (whose only escapes are sandcrab's styles) to `sink`;
    /// while the operator types, whole lines above the prompt.
    fn write(&mut self, sink: Sink, text: &Styled) {
        let Some(above) = &self.above else {
            super::terminal::write_styled(text, sink);
            return;
        };
        self.partial.append(text);
        if let Some(lines) = self.partial.take_lines() {
            above.print(lines.as_terminal_bytes().to_string());
        }
    }

    /// Write the model's text: on stdout, or held until it is known
    /// whether it is the final answer.
    fn answer(&mut self, text: &Styled) {
        match &mut self.held_answer {
            Some(held) => {
                held.append(text);
            }
            None => self.write(Sink::Out, text),
        }
    }

    /// The held answer was narration (a tool call follows: `Sink::Err`)
    /// or the final answer (`Sink::Out`).
    fn release_answer(&mut self, sink: Sink) {
        let Some(held) = &mut self.held_answer else {
            return;
        };
        let text = std::mem::replace(held, Styled::new(self.look.color));
        if !text.is_empty() {
            self.write(sink, &text);
        }
    }

    /// A prompt opens (see [`Renderer::prompt_open`]); whether drawing
    /// must wait until it closes.
    fn open_prompt(&mut self, how: WhilePrompting) -> bool {
        self.make_room();
        match how {
            WhilePrompting::DrawAsUsual => false,
            WhilePrompting::Wait => true,
            WhilePrompting::Above(above) => {
                self.above = Some(above);
                // Lines above a prompt cannot be redrawn in place.
                self.live.set_look(self.live_look());
                false
            }
        }
    }

    /// The prompt closed: what was printed above it is shown (or queued
    /// behind a search the operator is in), and drawing goes on below.
    async fn close_prompt(&mut self) {
        let Some(above) = self.above.take() else {
            return;
        };
        above.drained(ABOVE_DRAIN).await;
        let rest = std::mem::replace(&mut self.partial, Styled::new(self.look.color));
        super::terminal::write_styled(&rest, Sink::Out);
        self.live.set_look(self.live_look());
    }

    /// How the live blocks draw: in place, unless lines go above a prompt.
    fn live_look(&self) -> Look {
        Look {
            live: self.look.live && self.above.is_none(),
            ..self.look
        }
    }

    /// End the answer's line if it is open (a note or a prompt never
    /// continues it), drawing what the Markdown still holds.
    /// Notices that came while the answer was being drawn follow it.
    fn end_line(&mut self) {
        let (rest, open) = self.markdown.finish();
        if !rest.is_empty() {
            self.answer(&rest);
        }
        if !self.at_line_start || open {
            let mut line = Styled::new(self.look.color);
            line.text("\n");
            self.answer(&line);
            self.at_line_start = true;
        }
        self.answer_open = false;
        for notice in std::mem::take(&mut self.deferred) {
            self.write(Sink::Err, &notice);
        }
    }

    /// Something else is printed: the answer's line ends and the live
    /// blocks step aside (the next tick draws them again).
    fn make_room(&mut self) {
        self.end_line();
        let erase = self.live.erase();
        if !erase.is_empty() {
            self.write(Sink::Err, &erase);
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
            self.live.set_look(self.live_look());
        }
    }

    fn human(&mut self, event: &Event) {
        match &event.data {
            EventData::AssistantTextStart(_) => {
                self.refresh_width();
                self.answer_open = true;
            }
            EventData::AssistantTextDelta(d) => {
                let erase = self.live.erase();
                self.write(Sink::Err, &erase);
                let text = self.markdown.push(&d.delta);
                if !text.is_empty() {
                    self.answer(&text);
                    self.at_line_start = text.as_terminal_bytes().ends_with('\n');
                }
            }
            EventData::AssistantTextEnd(_) => self.end_line(),
            EventData::ToolCallStart(d) => {
                self.make_room();
                // What the model said before a call was narration.
                self.release_answer(Sink::Err);
                self.refresh_width();
                // The name is the model's text: one row, however it is made.
                let name = cut_to(&d.name, 60);
                let room = self
                    .look
                    .width
                    .map_or(120, |w| w.saturating_sub(width_of(&name) + 5).max(20));
                let mut line = Styled::new(self.look.color);
                line.styled(Style::BoldCyan, "● ")
                    .styled(Style::Bold, &name)
                    .styled(
                        Style::Dim,
                        &format!("({})", call_summary(&d.arguments, room)),
                    )
                    .text("\n");
                self.write(Sink::Err, &line);
                self.live.start(&d.call_id, &d.name);
            }
            EventData::ToolCallOutputDelta(d) => {
                let lines = self.live.output(&d.call_id, &d.text);
                if !lines.is_empty() {
                    self.make_room();
                    self.write(Sink::Err, &lines);
                }
            }
            EventData::ToolCallEnd(d) => {
                self.make_room();
                let collapsed = self.live.end(&d.call_id);
                self.write(Sink::Err, &collapsed);
                self.notice(&event.data);
                for change in &d.changes {
                    let diff = render_change(change, self.look, MAX_DIFF_LINES);
                    self.write(Sink::Err, &diff);
                }
            }
            EventData::ProcessingEnd(d) => {
                self.end_line();
                self.release_answer(Sink::Out);
                if let Ok(mut usage) = self.usage.lock() {
                    *usage = Some(d.usage);
                }
                self.turns.send_modify(|n| *n += 1);
            }
            // Anything else is at most a line of its own on stderr: the
            // answer's line is ended first, so a note never splits it.
            data => self.notice(data),
        }
    }

    /// A line of its own for `data`; while an answer is being drawn, it
    /// waits for the answer's end (a job's notice never splits a line or
    /// a code block of the answer).
    fn notice(&mut self, data: &EventData) {
        let columns = self.look.width.unwrap_or(160).saturating_sub(1).max(20);
        let Some(line) = notice(data, columns) else {
            return;
        };
        // A message of several lines (a provider's error body) keeps its
        // later lines indented under its first: none passes for a line of
        // sandcrab's own. On a terminal, a line longer than its width is
        // broken between words (a tool's row is cut to one row already).
        let one_row = matches!(data, EventData::ToolCallEnd(_)) && !refusal(data);
        let line = match self.look.width {
            Some(width) if !one_row => hang(line.trim_end(), width.saturating_sub(1)),
            _ => line.trim_end().replace('\n', "\n  "),
        };
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
        if self.answer_open {
            self.deferred.push(out);
            return;
        }
        self.make_room();
        self.write(Sink::Err, &out);
    }
}

/// A call's end that is a refusal: read whole, since it says what would
/// allow the call (any other call's end is one row).
fn refusal(data: &EventData) -> bool {
    matches!(data, EventData::ToolCallEnd(d) if d.status == crate::tools::ToolStatus::Denied)
}

/// `text` with every line after its first indented by two columns, each
/// longer than `width` broken between words (a line that fits is kept as
/// it is: an error's caret under its column stays there).
fn hang(text: &str, width: usize) -> String {
    let mut rows: Vec<String> = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let indent = if i == 0 { "" } else { "  " };
        let room = width.saturating_sub(2).max(20);
        if width_of(line) + indent.len() <= width {
            rows.push(format!("{indent}{line}"));
            continue;
        }
        for (j, part) in super::view::style::word_wrap(line, room)
            .into_iter()
            .enumerate()
        {
            let indent = if i == 0 && j == 0 { "" } else { "  " };
            rows.push(format!("{indent}{part}"));
        }
    }
    rows.join("\n")
}

/// Most diff lines shown for one change as it happens.
const MAX_DIFF_LINES: usize = 40;

/// The line an event other than the answer's text shows, if any.
fn notice(data: &EventData, columns: usize) -> Option<String> {
    let clean = |text: &str| sanitize(text).into_owned();
    Some(match data {
        // A refusal is read whole: it says what would allow the call.
        EventData::ToolCallEnd(d) if refusal(data) => {
            format!(
                "  ✗ {}",
                clean(&d.output)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }
        EventData::ToolCallEnd(d) => {
            let first = d.output.lines().next().unwrap_or("");
            let lines = d.output.lines().count();
            let more = if lines > 1 {
                format!(" (+{} lines)", lines - 1)
            } else {
                String::new()
            };
            let mark = if d.is_error { "✗" } else { "⎿" };
            // One row: a progress bar's last frame, escapes shown, cut to
            // the columns left.
            let room = columns.saturating_sub(width_of(&more) + 4).max(10);
            format!("  {mark} {}{more}", cut_to(last_frame(first), room))
        }
        EventData::TurnLimit(d) => format!(
            "note: stopped before the agent was done: {} reached ({}; raise it to go on)",
            d.limit.setting(),
            d.value
        ),
        EventData::SpendCap(d) => format!(
            "note: stopped before the next model call (it was not sent): {}",
            d.reached.message
        ),
        EventData::LoopDetection(_) => {
            "note: the agent is repeating itself; it was asked to change approach".into()
        }
        EventData::ContextWarning(d) => {
            let pct = d.usage_percent * 100.0;
            format!("note: the conversation uses about {pct:.0}% of the model's context window")
        }
        EventData::Warning(d) => format!("warning: {}", clean(&d.message)),
        EventData::Notice(d) => format!("● {}", clean(&d.text)),
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

/// A call's arguments on one row of at most `room` columns: the path
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
    cut_to(&text, room)
}
