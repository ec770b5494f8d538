//! Host-side views of what plugins export, independent of the ABI version
//! they were built against.

use serde::Serialize;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
}

/// Context handed to a tool call.
#[derive(Debug, Clone, Default)]
pub struct ToolCallContext {
    /// Session (thread) id.
    pub session_id: String,
    /// The model's tool call id.
    pub call_id: String,
}

/// A failure the tool itself reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolFailure {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("denied: {0}")]
    Denied(String),
    #[error("{0}")]
    Failed(String),
}

/// Facts a provider profile plugin exports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileInfo {
    pub id: String,
    pub adapter: String,
    pub default_model: String,
    pub context_window: u64,
    pub parallel_tool_calls: bool,
    pub tool_names: Vec<String>,
    pub project_doc_files: Vec<String>,
}

/// A message handed to a summarizer plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryMessage {
    pub role: String,
    pub content: String,
}
