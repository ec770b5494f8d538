//! The session history: typed turns with stable ids and timestamps, and
//! their conversion to model messages.

use serde::{Deserialize, Serialize};

use crate::llm::{Message, Reasoning, ToolCall, Usage};

/// One entry of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Stable id (compaction replaces turns by id).
    pub id: String,
    /// RFC 3339, UTC.
    pub timestamp: String,
    #[serde(flatten)]
    pub kind: TurnKind,
}

/// What a turn holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnKind {
    User {
        text: String,
    },
    Assistant {
        text: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
        #[serde(default)]
        reasoning: Option<Reasoning>,
        #[serde(default)]
        usage: Usage,
    },
    ToolResults {
        results: Vec<ToolResult>,
    },
    /// A message injected between tool rounds (sent as a user message).
    Steering {
        text: String,
    },
    /// Context the host adds (sent as system text).
    System {
        text: String,
    },
}

/// A tool result as the model sees it (truncated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    pub is_error: bool,
    /// The call's receipt (stored with the result; never sent to the
    /// model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::tools::Receipt>,
}

/// Where a turn's time comes from: the session's clock while it works (a
/// recorded session records each read, a replay answers from the
/// recording — turn times reach requests through compaction), else the
/// system clock.
pub type TurnClock = std::sync::Arc<dyn Fn() -> String + Send + Sync>;

tokio::task_local! {
    static CLOCK: TurnClock;
}

/// Run `work` with turns stamped by `clock`.
pub async fn with_clock<F: std::future::Future>(clock: TurnClock, work: F) -> F::Output {
    CLOCK.scope(clock, work).await
}

pub(super) fn turn_time() -> String {
    CLOCK
        .try_with(|clock| clock())
        .unwrap_or_else(|_| crate::time::now_rfc3339())
}

impl Turn {
    pub fn new(kind: TurnKind) -> Self {
        Turn {
            id: uuid::Uuid::new_v4().to_string(),
            timestamp: turn_time(),
            kind,
        }
    }

    /// The text of a user, assistant or steering turn.
    pub fn text(&self) -> Option<&str> {
        match &self.kind {
            TurnKind::User { text }
            | TurnKind::Assistant { text, .. }
            | TurnKind::Steering { text }
            | TurnKind::System { text } => Some(text),
            TurnKind::ToolResults { .. } => None,
        }
    }

    /// How many messages [`Self::messages`] gives.
    pub fn message_count(&self) -> usize {
        match &self.kind {
            TurnKind::ToolResults { results } => results.len(),
            _ => 1,
        }
    }

    /// The messages this turn contributes.
    pub fn messages(&self) -> Vec<Message> {
        match &self.kind {
            TurnKind::User { text } | TurnKind::Steering { text } => {
                vec![Message::user(text.clone())]
            }
            TurnKind::System { text } => vec![Message::system(text.clone())],
            TurnKind::Assistant {
                text,
                tool_calls,
                reasoning,
                ..
            } => vec![Message::Assistant {
                text: text.clone(),
                tool_calls: tool_calls.clone(),
                reasoning: reasoning.clone(),
            }],
            TurnKind::ToolResults { results } => results
                .iter()
                .map(|r| Message::ToolResult {
                    call_id: r.call_id.clone(),
                    name: r.name.clone(),
                    content: r.content.clone(),
                    is_error: r.is_error,
                })
                .collect(),
        }
    }
}

/// How many of `history`'s turns are the operator's inputs (a turn, as
/// `sessions list` counts them).
pub fn inputs(history: &[Turn]) -> usize {
    history
        .iter()
        .filter(|t| matches!(t.kind, TurnKind::User { .. }))
        .count()
}

/// Every message of `turns`, in order.
pub fn to_messages(turns: &[Turn]) -> Vec<Message> {
    turns.iter().flat_map(Turn::messages).collect()
}
