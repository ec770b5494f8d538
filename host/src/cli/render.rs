//! Showing session events on a terminal: assistant text on stdout, tool
//! activity and notes on stderr, with control sequences made visible (see
//! [`super::terminal`]); or every event as one JSON line (escaped by JSON).

use futures::StreamExt;

use super::terminal::sanitize;
use crate::agent::{Event, EventData, EventStream};

/// Print `events` until the stream ends.
pub async fn render(mut events: EventStream, json: bool) {
    let mut at_line_start = true;
    while let Some(event) = events.next().await {
        if json {
            outln!("{}", super::terminal::json(&event));
            continue;
        }
        human(&event, &mut at_line_start);
    }
}

fn human(event: &Event, at_line_start: &mut bool) {
    let clean = |text: &str| sanitize(text).into_owned();
    match &event.data {
        EventData::AssistantTextDelta(d) => {
            out!("{}", clean(&d.delta));
            if !d.delta.is_empty() {
                *at_line_start = d.delta.ends_with('\n');
            }
        }
        EventData::AssistantTextEnd(_) if !*at_line_start => {
            outln!();
            *at_line_start = true;
        }
        EventData::ToolCallStart(d) => {
            errln!(
                "● {}({})",
                clean(&d.name),
                sanitize(&short(&d.arguments.to_string(), 120))
            );
        }
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
            errln!("  {mark} {}{more}", short(first, 160));
        }
        EventData::TurnLimit(d) => errln!(
            "note: turn limit reached ({} = {})",
            d.limit.as_str(),
            d.value
        ),
        EventData::LoopDetection(_) => {
            errln!("note: the agent is repeating itself; it was asked to change approach")
        }
        EventData::ContextWarning(d) => {
            let pct = d.usage_percent * 100.0;
            errln!("note: the conversation uses about {pct:.0}% of the model's context window");
        }
        EventData::Warning(d) => errln!("warning: {}", clean(&d.message)),
        // Whoever asks shows the request (chat's prompt); nothing to add.
        EventData::PermissionRequired(_) => {}
        EventData::Error(d) => errln!("error: {}", clean(&d.error)),
        EventData::JobStarted(d) => errln!(
            "● background job {} started ({})",
            clean(&d.job_id),
            clean(&d.tool)
        ),
        EventData::JobFinished(d) => {
            errln!(
                "● background job {} {}",
                clean(&d.job_id),
                d.status.as_str()
            )
        }
        EventData::CompactionEnd(d) => {
            if d.messages_compressed > 0 {
                errln!(
                    "● compacted {} messages into {} summary batches (about {} → {} tokens)",
                    d.messages_compressed,
                    d.batches_created,
                    d.tokens_estimate_before,
                    d.tokens_estimate_after
                )
            } else {
                errln!("● nothing to compact")
            }
        }
        _ => {}
    }
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}
