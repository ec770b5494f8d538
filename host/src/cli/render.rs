//! Showing session events on a terminal: assistant text on stdout, tool
//! activity and notes on stderr, with control sequences made visible (see
//! [`super::terminal`]); or every event as one JSON line (escaped by JSON).

use futures::StreamExt;

use super::terminal::sanitize;
use crate::agent::{Event, EventKind, EventStream};

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
    let d = &event.data;
    let str_of = |key: &str| sanitize(d[key].as_str().unwrap_or_default()).into_owned();
    match event.kind {
        EventKind::AssistantTextDelta => {
            let delta = str_of("delta");
            out!("{delta}");
            if !delta.is_empty() {
                *at_line_start = delta.ends_with('\n');
            }
        }
        EventKind::AssistantTextEnd if !*at_line_start => {
            outln!();
            *at_line_start = true;
        }
        EventKind::ToolCallStart => {
            errln!(
                "● {}({})",
                str_of("name"),
                sanitize(&short(&d["arguments"].to_string(), 120))
            );
        }
        EventKind::ToolCallEnd => {
            let output = str_of("output");
            let first = output.lines().next().unwrap_or("");
            let lines = output.lines().count();
            let more = if lines > 1 {
                format!(" (+{} lines)", lines - 1)
            } else {
                String::new()
            };
            let mark = if d["is_error"].as_bool() == Some(true) {
                "✗"
            } else {
                "⎿"
            };
            errln!("  {mark} {}{more}", short(first, 160));
        }
        EventKind::TurnLimit => errln!(
            "note: turn limit reached ({} = {})",
            str_of("limit"),
            d["value"]
        ),
        EventKind::LoopDetection => {
            errln!("note: the agent is repeating itself; it was asked to change approach")
        }
        EventKind::ContextWarning => {
            let pct = d["usage_percent"].as_f64().unwrap_or(0.0) * 100.0;
            errln!("note: the conversation uses about {pct:.0}% of the model's context window");
        }
        EventKind::Warning => errln!("warning: {}", str_of("message")),
        EventKind::Error => errln!("error: {}", str_of("error")),
        EventKind::JobStarted => errln!(
            "● background job {} started ({})",
            str_of("job_id"),
            str_of("tool")
        ),
        EventKind::JobFinished => {
            errln!("● background job {} {}", str_of("job_id"), str_of("status"))
        }
        EventKind::CompactionEnd => {
            let n = |k: &str| d[k].as_u64().unwrap_or(0);
            if n("messagesCompressed") > 0 {
                errln!(
                    "● compacted {} messages into {} summary batches (about {} → {} tokens)",
                    n("messagesCompressed"),
                    n("batchesCreated"),
                    n("tokensEstimateBefore"),
                    n("tokensEstimateAfter")
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
