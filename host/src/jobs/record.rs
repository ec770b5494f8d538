//! A background job's record and the errors of job operations.

use serde::{Deserialize, Serialize};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Running,
    /// Cancellation was requested; the job may still finish (best effort).
    PendingCancel,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl JobStatus {
    /// Every status.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Running,
        JobStatus::PendingCancel,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::Cancelled,
        JobStatus::TimedOut,
    ];

    /// Completed, failed, cancelled or timed out.
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Running | JobStatus::PendingCancel)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::PendingCancel => "pending_cancel",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
            JobStatus::TimedOut => "timed_out",
        }
    }
}

impl std::str::FromStr for JobStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        JobStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown job status '{s}'"))
    }
}

/// Who asked for a cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    User,
    Agent,
}

/// A job's terminal payload: inline text, or a file holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payload {
    Inline {
        text: String,
    },
    File {
        path: String,
        bytes: usize,
        lines: usize,
        preview: String,
    },
}

/// Everything known about a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: String,
    pub tool_call_id: String,
    /// The conversation (session) the job belongs to.
    pub thread_id: String,
    pub tool_name: String,
    pub status: JobStatus,
    pub started_at: String,
    pub completed_at: Option<String>,
    /// Order of completion across the registry (ties between equal
    /// timestamps are broken by this sequence).
    pub completion_seq: Option<u64>,
    pub payload: Option<Payload>,
    /// Whether its terminal message was handed to the conversation.
    pub terminal_message_emitted: bool,
    pub cancel_requested_by: Option<Actor>,
    /// Retryable errors the job saw and recovered from (internal only).
    pub internal_errors: Vec<String>,
}

/// Why a job operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("job not found in this thread: {0}")]
    NotFoundInThread(String),
    #[error("tool call {0} already started a background job")]
    DuplicateToolCall(String),
    #[error("a job with id {0} already exists")]
    DuplicateJobId(String),
    #[error("manual retry not supported")]
    ManualRetryNotSupported,
    #[error("job {0} has already finished")]
    AlreadyFinished(String),
}
