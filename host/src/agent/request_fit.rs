//! Make one request fit the model's window, changing only what is sent
//! (the history and the store keep everything). The [`STEPS`], in order,
//! each only while the request is still too big: what is oldest and least
//! needed goes first, the latest round of tool calls last.
//!
//! The system prompt and the current input are never cut: when they alone
//! do not fit, the answer is [`TooBig`] with the numbers.

use serde_json::Value;

use crate::llm::estimate::{
    BYTES_PER_TOKEN, message_tokens, request_tokens, text_tokens, tools_tokens,
};
use crate::llm::{Message, Request};

/// No message is cut below this many tokens while older ones can be left
/// out instead.
const FLOOR: u64 = 300;

/// The least a message is cut to, at the last step.
const LAST_FLOOR: u64 = 24;

/// Longest tool description once shortened, in bytes.
const SHORT_DESCRIPTION: usize = 160;

/// What fitting changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FitReport {
    /// The request's estimated size after fitting.
    pub tokens: u64,
    /// Messages cut.
    pub clipped: usize,
    /// Messages left out.
    pub dropped: usize,
    pub tools_shortened: bool,
}

impl FitReport {
    /// Whether the request was sent as the history has it.
    pub fn unchanged(&self) -> bool {
        self.clipped == 0 && self.dropped == 0 && !self.tools_shortened
    }
}

/// The part that cannot be cut does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig {
    /// The current input.
    pub input: u64,
    /// The system prompt and the tool descriptions (shortened).
    pub fixed: u64,
    /// What a request may be.
    pub budget: u64,
}

/// One way of making a request smaller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The reasoning sent back with answers before the current input left
    /// out (every API takes a history without it).
    OlderReasoning,
    /// The largest messages before the current input cut down to a common
    /// size, never below [`FLOOR`], each with a marker.
    CutOlder,
    /// The oldest exchanges before the current input left out whole (a
    /// tool call never without its result), with a note.
    LeaveOutOlder,
    /// The largest messages of the rounds of tool calls made since the
    /// current input, but the latest round, cut down to the floor.
    CutEarlierRounds,
    /// Those rounds left out whole, oldest first, with a note.
    LeaveOutEarlierRounds,
    /// Every message but the current input cut down to the floor.
    CutAll,
    /// Every message but the current input cut down to [`LAST_FLOOR`].
    CutAllFurther,
}

/// The steps, in the order they are tried.
pub const STEPS: [Step; 7] = [
    Step::OlderReasoning,
    Step::CutOlder,
    Step::LeaveOutOlder,
    Step::CutEarlierRounds,
    Step::LeaveOutEarlierRounds,
    Step::CutAll,
    Step::CutAllFurther,
];

/// Fit `request` into `budget` estimated tokens. `input` is the index of
/// the current input among its messages (never cut; none: every message
/// but the first, the system prompt, may be cut); `brief_system` gives
/// the system prompt that names the tools without describing them.
pub fn fit(
    request: &mut Request,
    input: Option<usize>,
    budget: u64,
    brief_system: impl FnOnce() -> String,
) -> Result<FitReport, TooBig> {
    let mut report = FitReport {
        tokens: request_tokens(request),
        ..FitReport::default()
    };
    if report.tokens <= budget {
        return Ok(report);
    }
    report.tools_shortened = brief_if_small(request, budget, brief_system);
    let fixed = tools_tokens(&request.tools) + request.messages.first().map_or(0, message_tokens);
    let input_tokens = input
        .and_then(|i| request.messages.get(i))
        .map_or(0, message_tokens);
    let too_big = TooBig {
        input: input_tokens,
        fixed,
        budget,
    };
    if fixed + input_tokens > budget {
        return Err(too_big);
    }
    let mut fitting = Fitting {
        request,
        input,
        budget,
        report,
    };
    for step in STEPS {
        if !fitting.over() {
            break;
        }
        fitting.apply(step);
    }
    fitting.report.tokens = request_tokens(fitting.request);
    if fitting.over() {
        return Err(too_big);
    }
    Ok(fitting.report)
}

/// A request being fitted, and where its current input is.
struct Fitting<'a> {
    request: &'a mut Request,
    input: Option<usize>,
    budget: u64,
    report: FitReport,
}

impl Fitting<'_> {
    fn over(&self) -> bool {
        request_tokens(self.request) > self.budget
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::OlderReasoning => {
                for i in self.older() {
                    if let Message::Assistant { reasoning, .. } = &mut self.request.messages[i]
                        && reasoning.take().is_some()
                    {
                        self.report.clipped += 1;
                    }
                }
            }
            Step::CutOlder => self.cut(self.older(), FLOOR),
            Step::LeaveOutOlder => {
                // The note is counted while exchanges are left out (it
                // stands before every kept message, the input among them).
                let at = note_at(self.request);
                self.request
                    .messages
                    .insert(at, Message::system(older_note(MANY)));
                self.input = self.input.map(|i| i + 1);
                let mut dropped = 0;
                while self.over() {
                    let Some(n) = drop_oldest_exchange(self.request, at + 1, self.input) else {
                        break;
                    };
                    dropped += n;
                    self.input = self.input.map(|i| i - n);
                }
                self.settle_note(at, dropped, older_note);
            }
            Step::CutEarlierRounds => self.cut(self.earlier_rounds(), FLOOR),
            Step::LeaveOutEarlierRounds => {
                let Some(input) = self.input else { return };
                let at = input + 1;
                self.request
                    .messages
                    .insert(at, Message::system(rounds_note(MANY)));
                let mut dropped = 0;
                while self.over() {
                    let Some(n) = drop_oldest_round(self.request, at) else {
                        break;
                    };
                    dropped += n;
                }
                self.settle_note(at, dropped, rounds_note);
            }
            Step::CutAll => self.cut(cuttable(self.request, self.input), FLOOR),
            Step::CutAllFurther => self.cut(cuttable(self.request, self.input), LAST_FLOOR),
        }
    }

    /// Say how many messages were left out in the note at `at`, or take
    /// the note away when none were.
    fn settle_note(&mut self, at: usize, dropped: usize, note: fn(usize) -> String) {
        if dropped == 0 {
            self.request.messages.remove(at);
            if self.input.is_some_and(|i| i > at) {
                self.input = self.input.map(|i| i - 1);
            }
            return;
        }
        self.request.messages[at] = Message::system(note(dropped));
        self.report.dropped += dropped;
    }

    fn cut(&mut self, indexes: Vec<usize>, floor: u64) {
        self.report.clipped += clip_to_fit(self.request, &indexes, self.budget, floor);
    }

    /// The messages before the current input (all when there is none).
    fn older(&self) -> Vec<usize> {
        let end = self.input.unwrap_or(self.request.messages.len());
        (1..end).collect()
    }

    /// The messages of the rounds since the current input but the latest.
    fn earlier_rounds(&self) -> Vec<usize> {
        let Some(input) = self.input else {
            return Vec::new();
        };
        (input + 1..latest_round(self.request, input)).collect()
    }
}

/// Where the latest round of tool calls after the message at `input`
/// starts (its last answer).
fn latest_round(request: &Request, input: usize) -> usize {
    (input + 1..request.messages.len())
        .rfind(|i| matches!(request.messages[*i], Message::Assistant { .. }))
        .unwrap_or(request.messages.len())
}

/// Leave out the oldest round after the message at `after` (an answer
/// and the results of its calls), never the latest; how many messages.
fn drop_oldest_round(request: &mut Request, after: usize) -> Option<usize> {
    let first = (after + 1..request.messages.len())
        .find(|i| matches!(request.messages[*i], Message::Assistant { .. }))?;
    let latest = latest_round(request, after);
    if first >= latest {
        return None;
    }
    let next =
        (first + 1..=latest).find(|i| matches!(request.messages[*i], Message::Assistant { .. }))?;
    request.messages.drain(first..next);
    Some(next - first)
}

/// A count as large as any, for a note's size before its count is known.
const MANY: usize = 99_999;

/// The note where rounds of tool calls made for the current input were
/// left out.
fn rounds_note(dropped: usize) -> String {
    format!(
        "[{dropped} earlier messages of the tool calls made for this request are not shown, so the request fits the model's context window; the session's store keeps them.]"
    )
}

/// The note where older exchanges were left out.
fn older_note(dropped: usize) -> String {
    format!(
        "[{dropped} earlier messages of this conversation are not shown, so the request fits the model's context window; the session's store keeps them.]"
    )
}

/// Before any step: when the tools take a third of `budget`, shorten their
/// descriptions and name them only in the system prompt; whether it did.
pub fn brief_if_small(
    request: &mut Request,
    budget: u64,
    brief_system: impl FnOnce() -> String,
) -> bool {
    if tools_tokens(&request.tools) <= budget / 3 {
        return false;
    }
    shorten_tools(request);
    if let Some(Message::System { text }) = request.messages.first_mut() {
        *text = brief_system();
    }
    true
}

/// Indexes of the messages that may be cut.
fn cuttable(request: &Request, input: Option<usize>) -> Vec<usize> {
    (1..request.messages.len())
        .filter(|i| Some(*i) != input)
        .collect()
}

/// Cut the largest of the messages at `indexes` to one size (at least
/// `floor`) so the request fits, or as near as `floor` allows; how many
/// were cut.
fn clip_to_fit(request: &mut Request, indexes: &[usize], budget: u64, floor: u64) -> usize {
    let total = request_tokens(request);
    let sizes: Vec<u64> = indexes
        .iter()
        .map(|i| message_tokens(&request.messages[*i]))
        .collect();
    let others = total - sizes.iter().sum::<u64>();
    let room = budget.saturating_sub(others);
    // The largest cap at which the cut messages fit in `room`.
    let fits = |cap: u64| sizes.iter().map(|s| (*s).min(cap)).sum::<u64>() <= room;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let cap = if fits(largest) {
        return 0;
    } else if !fits(floor) {
        floor
    } else {
        let (mut low, mut high) = (floor, largest);
        while low + 1 < high {
            let mid = (low + high) / 2;
            if fits(mid) { low = mid } else { high = mid }
        }
        low
    };
    let mut cut = 0;
    for (i, size) in indexes.iter().copied().zip(sizes) {
        if size > cap {
            clip_message(&mut request.messages[i], cap);
            cut += 1;
        }
    }
    cut
}

/// Below this many tokens a message is cut with the short marker.
const LONG_MARKER_FROM: u64 = 200;

/// Cut `message` to about `tokens` estimated tokens.
fn clip_message(message: &mut Message, tokens: u64) {
    let long = tokens >= LONG_MARKER_FROM;
    // Room for the text once the overhead and the marker are paid.
    let bytes =
        (tokens.saturating_sub(text_tokens(&marker(0, long)) + 12) * BYTES_PER_TOKEN) as usize;
    match message {
        Message::System { text } | Message::User { text } => clip_text(text, bytes, long),
        Message::ToolResult { content, .. } => clip_text(content, bytes, long),
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let share = bytes / (1 + tool_calls.len());
            clip_text(text, share, long);
            for call in tool_calls {
                clip_strings(&mut call.arguments, share);
            }
        }
    }
}

/// What stands where a message was cut: what happened and what to do, or
/// (where a message is cut very short) only what happened.
fn marker(cut: usize, long: bool) -> String {
    if long {
        format!(
            "\n[… {cut} bytes cut here so the request fits the model's context window; the session's store keeps the whole. Ask for a smaller part (a line range, a narrower search) if you need what was cut …]\n"
        )
    } else {
        format!("\n[… {cut} bytes cut …]\n")
    }
}

/// Keep the head (two thirds) and tail (one third) of `text` within
/// `bytes`, with a marker between (nothing changes when the cut text
/// would be no shorter).
fn clip_text(text: &mut String, bytes: usize, long: bool) {
    if text.len() <= bytes + marker(text.len(), long).len() {
        return;
    }
    let head = text.floor_char_boundary(bytes * 2 / 3);
    let tail = text.ceil_char_boundary(text.len() - bytes / 3);
    let cut = tail - head;
    *text = format!("{}{}{}", &text[..head], marker(cut, long), &text[tail..]);
}

/// Cut the long strings inside a tool call's arguments so all of them fit
/// in `bytes` (the JSON stays valid: only string values change).
fn clip_strings(value: &mut Value, bytes: usize) {
    let mut strings = Vec::new();
    collect_strings(value, &mut strings);
    let total: usize = strings.iter().sum();
    if total <= bytes || strings.is_empty() {
        return;
    }
    let each = (bytes / strings.len()).max(64);
    cut_strings(value, each);
}

fn collect_strings(value: &Value, out: &mut Vec<usize>) {
    match value {
        Value::String(s) => out.push(s.len()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn cut_strings(value: &mut Value, each: usize) {
    match value {
        Value::String(s) => clip_text(s, each, false),
        Value::Array(items) => items.iter_mut().for_each(|v| cut_strings(v, each)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_strings(v, each)),
        _ => {}
    }
}

/// Leave out the oldest exchange from `from` on, before the current
/// input: up to the next operator message (so what stays starts with the
/// operator and no result loses its call). System messages (the summary
/// of what was compacted) stay. How many messages were left out (none:
/// nothing can be).
fn drop_oldest_exchange(request: &mut Request, from: usize, input: Option<usize>) -> Option<usize> {
    let end = input.unwrap_or(request.messages.len().saturating_sub(1));
    let first = (from..end).find(|i| !matches!(request.messages[*i], Message::System { .. }))?;
    let next_user =
        (first + 1..=end).find(|i| matches!(request.messages[*i], Message::User { .. }))?;
    request.messages.drain(first..next_user);
    Some(next_user - first)
}

/// Where the note on older exchanges stands: after the system prompt and
/// the summary.
fn note_at(request: &Request) -> usize {
    (1..request.messages.len())
        .find(|i| !matches!(request.messages[*i], Message::System { .. }))
        .unwrap_or(request.messages.len())
}

/// Each tool description cut to its first sentence, and the descriptions
/// and bounds inside the parameter schemas removed.
fn shorten_tools(request: &mut Request) {
    for tool in &mut request.tools {
        let first = tool
            .description
            .split_inclusive(['\n', '.'])
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let end = first.floor_char_boundary(SHORT_DESCRIPTION);
        tool.description = first[..end].to_string();
        drop_schema_descriptions(&mut tool.parameters);
    }
}

/// Schema keywords a small window does without (only as keywords: a
/// property of that name has an object as its value, and stays).
const SPARED_KEYWORDS: &[&str] = &["description", "additionalProperties", "minimum", "maximum"];

fn drop_schema_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for keyword in SPARED_KEYWORDS {
                if map.get(*keyword).is_some_and(|v| !v.is_object()) {
                    map.remove(*keyword);
                }
            }
            map.values_mut().for_each(drop_schema_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_schema_descriptions),
        _ => {}
    }
}

#[cfg(test)]
#[path = "request_fit_tests.rs"]
mod tests;
