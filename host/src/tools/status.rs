//! How a tool call ended, as a type: the event, the receipt, the bridge
//! and MCP all carry it, so "denied" or "invalid arguments" never has to
//! be read back out of the message text.

use serde::{Deserialize, Serialize};

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolStatus {
    /// The tool did its work.
    Ok,
    /// The tool stopped its work for lack of time; the output is partial.
    TimedOut,
    /// The call moved to the background; the result arrives later.
    Background,
    /// No tool has the name the model called.
    UnknownTool,
    /// The arguments were not JSON, did not fit the schema, or the tool
    /// found them unusable.
    InvalidArguments,
    /// The sandbox or the policy refused something the call needed.
    Denied,
    /// Anything else went wrong (the tool failed, its plugin crashed or
    /// ran out of time or memory).
    Failed,
    /// The user interrupted the turn before the call ended.
    Interrupted,
    /// The model's answer was cut off by its output limit, so the call was
    /// not run.
    CutOff,
}

impl ToolStatus {
    /// Whether the model sees the result as an error.
    pub fn is_error(self) -> bool {
        !matches!(
            self,
            ToolStatus::Ok | ToolStatus::TimedOut | ToolStatus::Background
        )
    }

    /// The status's own word, as it is spelled in JSON (`denied`,
    /// `interrupted`, `timed-out`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The receipt's coarse outcome (`ok`, `error`, `timed-out`), as
    /// receipts have always spelled it.
    pub fn outcome(self) -> &'static str {
        match self {
            ToolStatus::TimedOut => "timed-out",
            s if s.is_error() => "error",
            _ => "ok",
        }
    }
}

/// Why an executor could not give a result: the status and the message
/// the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub status: ToolStatus,
    pub message: String,
}

impl ToolError {
    /// A failure of kind `status`.
    pub fn new(status: ToolStatus, message: impl Into<String>) -> Self {
        ToolError {
            status,
            message: message.into(),
        }
    }

    /// A plain failure.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::new(ToolStatus::Failed, message)
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_their_wire_names_and_error_sense() {
        let names: Vec<String> = [
            ToolStatus::Ok,
            ToolStatus::TimedOut,
            ToolStatus::InvalidArguments,
            ToolStatus::Denied,
            ToolStatus::CutOff,
        ]
        .iter()
        .map(|s| {
            serde_json::to_value(s)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
        assert_eq!(
            names,
            ["ok", "timed-out", "invalid-arguments", "denied", "cut-off"]
        );
        assert!(ToolStatus::Denied.is_error() && !ToolStatus::TimedOut.is_error());
        assert_eq!(ToolStatus::Denied.outcome(), "error");
        assert_eq!(ToolStatus::TimedOut.outcome(), "timed-out");
    }
}
