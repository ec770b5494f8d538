//! Terminal payloads follow the tool's output limits (SPEC §4): within the
//! byte and line limits they travel inline; beyond, the whole payload goes
//! to a temp file and the message carries a preview and the path.

use super::record::Payload;
use crate::tools::{TruncationLimits, truncate};

/// Inline `output` if it fits `limits` (bytes = the tool's character limit,
/// and its line limit if any), otherwise spill it to a file under `dir`.
pub fn make_payload(
    output: &str,
    limits: TruncationLimits,
    spill: impl FnOnce(&str) -> std::io::Result<String>,
) -> Payload {
    let lines = output.split('\n').count();
    let fits = output.len() <= limits.chars && limits.lines.is_none_or(|max| lines <= max);
    if fits {
        return Payload::Inline {
            text: output.to_string(),
        };
    }
    let preview = truncate(
        output,
        TruncationLimits {
            chars: limits.chars.min(2000),
            mode: limits.mode,
            lines: Some(40),
        },
    );
    match spill(output) {
        Ok(path) => Payload::File {
            path,
            bytes: output.len(),
            lines,
            preview,
        },
        // Could not write the file: keep what the model would see inline.
        Err(e) => Payload::Inline {
            text: format!(
                "{}\n[the full output could not be saved: {e}]",
                truncate(output, limits)
            ),
        },
    }
}

/// The synthetic assistant message for a finished job.
pub fn render_message(job_id: &str, tool: &str, status: &str, payload: Option<&Payload>) -> String {
    let head = format!("[job {job_id} {tool} {status}]");
    match payload {
        None => head,
        Some(Payload::Inline { text }) if text.is_empty() => format!("{head} (no output)"),
        Some(Payload::Inline { text }) => format!("{head}\n{text}"),
        Some(Payload::File {
            path,
            bytes,
            lines,
            preview,
        }) => format!(
            "{head}\nThe output ({bytes} bytes, {lines} lines) is too large to show here; it was saved to {path}. Preview:\n{preview}"
        ),
    }
}
