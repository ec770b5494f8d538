//! Make one request fit the model's window, changing only what is sent
//! (the history and the store keep everything). In order, until it fits:
//!
//! 1. tool descriptions shortened, and the system prompt's own list of
//!    them replaced by their names, when the tools take a third of the
//!    budget;
//! 2. the largest messages cut down to a common size (never below a
//!    floor), each with a marker saying what was cut;
//! 3. the oldest exchanges left out, whole (a tool call never without its
//!    result), with a note saying so;
//! 4. every message but the current input cut further.
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
    let mut input = input;
    let fixed = tools_tokens(&request.tools) + request.messages.first().map_or(0, message_tokens);
    let input_tokens = input
        .and_then(|i| request.messages.get(i))
        .map_or(0, message_tokens);
    if fixed + input_tokens > budget {
        return Err(TooBig {
            input: input_tokens,
            fixed,
            budget,
        });
    }
    report.clipped += clip_to_fit(request, input, budget, FLOOR);
    while request_tokens(request) > budget {
        let Some(dropped) = drop_oldest_exchange(request, input) else {
            break;
        };
        report.dropped += dropped;
        input = input.map(|i| i - dropped);
    }
    if report.dropped > 0 {
        // The note stands before every kept message, the input among them.
        note_left_out(request, report.dropped);
        input = input.map(|i| i + 1);
    }
    if request_tokens(request) > budget {
        report.clipped += clip_to_fit(request, input, budget, LAST_FLOOR);
    }
    report.tokens = request_tokens(request);
    if report.tokens > budget {
        return Err(TooBig {
            input: input_tokens,
            fixed,
            budget,
        });
    }
    Ok(report)
}

/// Step 1 alone: when the tools take a third of `budget`, shorten their
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

/// Cut the largest cuttable messages to one size (at least `floor`) so
/// the request fits, or as near as `floor` allows; how many were cut.
fn clip_to_fit(request: &mut Request, input: Option<usize>, budget: u64, floor: u64) -> usize {
    let cuttable = cuttable(request, input);
    let total = request_tokens(request);
    let sizes: Vec<u64> = cuttable
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
    for (i, size) in cuttable.into_iter().zip(sizes) {
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

/// Leave out the oldest exchange before the current input: from the first
/// message after the system prompt up to the next operator message (so
/// what stays starts with the operator and no result loses its call).
/// System messages (the summary of what was compacted) stay. How many
/// messages were left out (none: nothing can be).
fn drop_oldest_exchange(request: &mut Request, input: Option<usize>) -> Option<usize> {
    let end = input.unwrap_or(request.messages.len().saturating_sub(1));
    let first = (1..end).find(|i| !matches!(request.messages[*i], Message::System { .. }))?;
    let next_user =
        (first + 1..=end).find(|i| matches!(request.messages[*i], Message::User { .. }))?;
    request.messages.drain(first..next_user);
    Some(next_user - first)
}

/// Say, after the system prompt and the summary, that earlier messages
/// were left out.
fn note_left_out(request: &mut Request, dropped: usize) {
    let note = format!(
        "[{dropped} earlier messages of this conversation are not shown, so the request fits the model's context window; the session's store keeps them.]"
    );
    let at = (1..request.messages.len())
        .find(|i| !matches!(request.messages[*i], Message::System { .. }))
        .unwrap_or(request.messages.len());
    request.messages.insert(at, Message::system(note));
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
