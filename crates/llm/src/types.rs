//! The unified request, response and stream-event model every adapter
//! speaks.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions; adapters move these to the provider's system field.
    System {
        text: String,
    },
    User {
        text: String,
    },
    Assistant {
        #[serde(default)]
        text: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
        #[serde(default)]
        reasoning: Option<Reasoning>,
    },
    /// The result of a tool call, answering the call with `call_id`.
    ToolResult {
        call_id: String,
        /// The tool's name (Gemini matches results by name).
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    pub fn system(text: impl Into<String>) -> Self {
        Message::System { text: text.into() }
    }

    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
            reasoning: None,
        }
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Parsed arguments; the raw text as a JSON string if it did not parse.
    pub arguments: Value,
    /// Opaque provider token attached to this call that must be sent back
    /// on it (Gemini's thought signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl ToolCall {
    /// A call without provider state.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            signature: None,
        }
    }
}

/// Reasoning ("thinking") the model returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Reasoning {
    /// The readable reasoning (thinking text or its summary).
    pub text: String,
    /// Opaque provider token that came with the answer's text and must be
    /// sent back on it (Gemini's thought signature on a text part).
    #[serde(default)]
    pub signature: Option<String>,
    /// Provider reasoning state to send back verbatim, in order.
    #[serde(default)]
    pub parts: Vec<ReasoningPart>,
}

/// One piece of provider reasoning state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningPart {
    /// An Anthropic `thinking` block and the signature issued for it.
    Thinking { thinking: String, signature: String },
    /// An Anthropic `redacted_thinking` block.
    RedactedThinking { data: String },
    /// An OpenAI Responses `reasoning` item, as returned (with its
    /// encrypted content).
    Item { item: Value },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    Required,
    Named(String),
}

/// A request to a model (its serialized form is the normalized request a
/// recording keeps).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Request {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    pub max_tokens: Option<u32>,
    /// The most the answer may take, reasoning included, where the window
    /// leaves no more (an adapter that grows `max_tokens` for reasoning
    /// stays below it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_ceiling: Option<u32>,
    pub temperature: Option<f32>,
    /// `low`, `medium` or `high`; mapped to each provider's knob.
    pub reasoning_effort: Option<String>,
    /// Extra top-level fields merged into the provider request body.
    pub provider_options: serde_json::Map<String, Value>,
}

impl Request {
    /// The system text (all system messages joined).
    pub fn system_text(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::System { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

/// Token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Output tokens spent on reasoning, where reported.
    pub reasoning_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// What the provider says the call cost, in millionths of a US dollar,
    /// where it reports one (OpenRouter's `usage.cost`); never computed
    /// here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
}

impl Usage {
    /// Add `other`'s counts to these.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_micros = match (self.cost_micros, other.cost_micros) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }

    /// Input and output tokens together, as a budget counts them.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// The counts from `earlier` to these (both totals of one counter).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
            cached_tokens: self.cached_tokens.saturating_sub(earlier.cached_tokens),
            reasoning_tokens: self
                .reasoning_tokens
                .saturating_sub(earlier.reasoning_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_sub(earlier.cache_write_tokens),
            cost_micros: match (self.cost_micros, earlier.cost_micros) {
                (Some(now), Some(then)) => Some(now.saturating_sub(then)),
                (now, _) => now,
            },
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    #[default]
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    pub model: String,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub reasoning: Option<Reasoning>,
    pub usage: Usage,
    pub finish_reason: FinishReason,
}

impl Response {
    /// The assistant message this response adds to a conversation.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            reasoning: self.reasoning.clone(),
        }
    }
}

/// What a stream yields, in order. A stream ends with `Finish` or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum StreamEvent {
    TextStart,
    TextDelta(String),
    TextEnd,
    ReasoningDelta(String),
    /// Reasoning state to keep and send back (a finished thinking block, a
    /// reasoning item).
    ReasoningPart(ReasoningPart),
    ToolCallStart {
        id: String,
        name: String,
    },
    ToolCallDelta {
        id: String,
        arguments: String,
    },
    ToolCallEnd(ToolCall),
    Finish(Response),
}

/// Parse tool-call argument text; keep it as a string if it is not JSON.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// The events of one streamed answer; the last item is `Finish` or an error.
pub type EventStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<StreamEvent, super::error::LlmError>> + Send>,
>;
