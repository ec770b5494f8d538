//! The flight recording's format: what a session took from outside the
//! host — what the model streamed, what each tool answered, what jobs and
//! the operator injected, what the world looked like at start — in the
//! order the host took it. `sandcrab replay` re-runs the host's own logic
//! against it (see `replay/`). Each entry is one row of the store's
//! `recordings` table, chained like the turns.
//!
//! Never recorded: provider keys (they live in the transport, never in a
//! [`Request`]), granted secret values (a plugin's environment is not
//! part of any request or receipt), the summarizer's key.

use serde::{Deserialize, Serialize};

pub use super::world::World;
use crate::compaction::SummarizationConfig;
use crate::llm::{ErrorKind, LlmError, Message, Request, StreamEvent};
use crate::plugin::{ToolSpec, TruncationLimits};
use crate::tools::{Receipt, ToolOutcome, ToolStatus, TruncationPolicy};

/// The format this sandcrab writes. A newer sandcrab reads every older
/// format; an entry it cannot read is named with its field.
pub const FORMAT: u32 = 1;

pub use crate::store::RecordingMode;

/// One entry, in the order the host took it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    /// The session started (or was resumed) with these facts.
    Start(Box<Start>),
    /// An input began (None: a turn for finished jobs, or a retry).
    Input { text: Option<String> },
    /// Messages the operator steered in, drained before a request.
    Steering { texts: Vec<String> },
    /// Messages of finished background jobs, injected before a request.
    Jobs { messages: Vec<String> },
    /// The tools offered from here on.
    Tools { tools: Vec<ToolSpec> },
    /// One model request and what came back.
    Model(Box<ModelCall>),
    /// What one tool call answered.
    Tool(Box<ToolAnswer>),
    /// What the summarizer answered for one compaction batch.
    Summary {
        #[serde(with = "summary_result")]
        result: Result<String, String>,
        /// What its model call was charged (a replay charges the same).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        charges: Vec<crate::llm::spend::Charge>,
    },
    /// The operator raised a spend cap (chat's question).
    CapRaised {
        cap: crate::llm::spend::CapKind,
        by: f64,
    },
    /// Times the session read for its turns since the entry before.
    Clock { reads: Vec<String> },
    /// The operator asked for a compaction between inputs (`/compact`).
    Compact,
    /// The operator interrupted between rounds or during a tool round.
    Interrupt { at: InterruptPoint },
    /// Recording stopped here (the size cap was reached).
    Stopped { bytes: u64, cap: u64 },
    /// What the hooks of a session's moment answered (UserPromptSubmit,
    /// SessionStart, Stop): a replay takes it from here and runs none.
    Hooked {
        event: String,
        answer: crate::hooks::HookAnswer,
    },
    /// The session is a fork: where it came from and the history it
    /// starts with.
    Forked {
        origin: ForkOrigin,
        turns: Vec<super::turns::Turn>,
    },
}

impl Entry {
    /// The entry's kind, as the store keeps it.
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::Start(_) => "start",
            Entry::Input { .. } => "input",
            Entry::Steering { .. } => "steering",
            Entry::Jobs { .. } => "jobs",
            Entry::Tools { .. } => "tools",
            Entry::Model(_) => "model",
            Entry::Tool(_) => "tool",
            Entry::Summary { .. } => "summary",
            Entry::CapRaised { .. } => "cap_raised",
            Entry::Compact => "compact",
            Entry::Clock { .. } => "clock",
            Entry::Interrupt { .. } => "interrupt",
            Entry::Stopped { .. } => "stopped",
            Entry::Forked { .. } => "forked",
            Entry::Hooked { .. } => "hooked",
        }
    }
}

/// Where an interrupt landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptPoint {
    /// Before the next model request.
    Round,
    /// While tools ran (the calls without a recorded answer were cut).
    Tools,
}

/// What the host knew when the session started: the world it read and
/// the plugins' answers that shape every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// The recording format.
    pub format: u32,
    /// The sandcrab version that recorded it.
    pub sandcrab: String,
    pub mode: RecordingMode,
    /// The profile's facts and base instructions.
    pub profile: ProfileFacts,
    pub world: World,
    pub settings: Settings,
    /// The session's own tools (memory, jobs, subagents) by name: a
    /// replay runs those of them that act on the session again.
    #[serde(default)]
    pub own_tools: Vec<String>,
}

/// Where a forked session came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    pub session: String,
    /// The model call (1-based) whose state it starts from.
    pub model_call: u64,
    /// The source session's chain head when it was forked.
    pub head: String,
}

/// The profile, as far as requests depend on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFacts {
    pub id: String,
    pub context_window: u64,
    /// Provider tokens per estimated token, as the session started
    /// (above 1.0 when refusals taught that estimates were low).
    #[serde(default = "one")]
    pub window_ratio: f64,
    /// Where the window's size came from.
    #[serde(default = "profile_source")]
    pub window_source: super::window::WindowSource,
    pub parallel_tool_calls: bool,
    pub base_instructions: String,
}

/// The session settings requests and the loop depend on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub model: String,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub reasoning_effort: Option<String>,
    pub max_turns: u32,
    pub max_tool_rounds_per_input: u32,
    pub loop_detection_window: usize,
    pub context_warning_threshold: f64,
    pub user_instructions: Option<String>,
    pub parallel_tool_calls: bool,
    pub truncation: TruncationPolicy,
    /// Compaction's settings (None: the session had no store).
    pub summarization: Option<SummarizationConfig>,
    /// The spend caps and prices (a replay stops where the session did).
    #[serde(default)]
    pub budget: crate::llm::spend::Budget,
}

impl Settings {
    /// What `config` (and compaction's `summarization`) say.
    pub fn of(
        config: &super::config::SessionConfig,
        summarization: Option<SummarizationConfig>,
    ) -> Self {
        Settings {
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            temperature: config.temperature,
            reasoning_effort: config.reasoning_effort.clone(),
            max_turns: config.max_turns,
            max_tool_rounds_per_input: config.max_tool_rounds_per_input,
            loop_detection_window: config.loop_detection_window,
            context_warning_threshold: config.context_warning_threshold,
            user_instructions: config.user_instructions.clone(),
            parallel_tool_calls: config.parallel_tool_calls,
            truncation: config.truncation.clone(),
            summarization,
            budget: config.budget.clone(),
        }
    }

    /// A session's settings as recorded (the rest at their defaults).
    pub fn to_config(&self) -> super::config::SessionConfig {
        let mut config = super::config::SessionConfig::new(self.model.clone());
        config.max_tokens = self.max_tokens;
        config.temperature = self.temperature;
        config.reasoning_effort = self.reasoning_effort.clone();
        config.max_turns = self.max_turns;
        config.max_tool_rounds_per_input = self.max_tool_rounds_per_input;
        config.loop_detection_window = self.loop_detection_window;
        config.context_warning_threshold = self.context_warning_threshold;
        config.user_instructions = self.user_instructions.clone();
        config.parallel_tool_calls = self.parallel_tool_calls;
        config.truncation = self.truncation.clone();
        config.budget = self.budget.clone();
        config
    }
}

/// One model request and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    pub request: RecordedRequest,
    /// What the adapter yielded, with milliseconds since the request
    /// (digests mode: the final answer only).
    pub events: Vec<TimedEvent>,
    /// The error the call ended with, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    /// The operator interrupted it after `events`.
    #[serde(default)]
    pub interrupted: bool,
}

/// A request, as the change from the previous recorded one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Messages the previous recorded request also began with.
    pub kept: usize,
    /// The messages after those.
    pub messages: Vec<RecordedMessage>,
    /// Everything but the messages (tools as their digest).
    pub rest: serde_json::Value,
}

/// A message in full, or (digests mode) its digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedMessage {
    Digest { digest: String },
    Full(Message),
}

impl RecordedMessage {
    /// The digest of a message's normalized JSON.
    pub fn digest_of(message: &Message) -> String {
        let json = serde_json::to_string(message).unwrap_or_default();
        blake3::hash(json.as_bytes()).to_hex().to_string()
    }
}

/// The parts of a request other than its messages, normalized: tools by
/// name (the `tools` entries hold them whole), the rest as sent.
pub fn request_rest(request: &Request) -> serde_json::Value {
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    serde_json::json!({
        "model": request.model,
        "tools": tools,
        "tool_choice": request.tool_choice,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "reasoning_effort": request.reasoning_effort,
        "provider_options": request.provider_options,
    })
}

/// A streamed event and when it arrived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedEvent {
    pub ms: u64,
    pub event: StreamEvent,
}

/// A provider error, as the loop saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedError {
    pub kind: ErrorKind,
    pub provider: String,
    pub status: Option<u16>,
    pub message: String,
}

impl From<&LlmError> for RecordedError {
    fn from(e: &LlmError) -> Self {
        RecordedError {
            kind: e.kind,
            provider: e.provider.clone(),
            status: e.status,
            message: e.message.clone(),
        }
    }
}

impl RecordedError {
    /// The error again.
    pub fn to_error(&self) -> LlmError {
        let mut err = LlmError::new(self.kind, &self.provider, self.message.clone());
        err.status = self.status;
        err
    }
}

/// One tool call's answer, before truncation for the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolAnswer {
    pub call_id: String,
    pub name: String,
    pub content: String,
    pub status: ToolStatus,
    pub output_limit: Option<TruncationLimits>,
    pub receipt: Option<Receipt>,
}

impl ToolAnswer {
    /// The answer of `call_id` (`name`) that ended as `outcome`.
    pub fn of(call_id: &str, name: &str, outcome: &ToolOutcome) -> Self {
        ToolAnswer {
            call_id: call_id.to_string(),
            name: name.to_string(),
            content: outcome.content.clone(),
            status: outcome.status,
            output_limit: outcome.output_limit,
            receipt: outcome.receipt.clone(),
        }
    }

    /// The outcome again.
    pub fn to_outcome(&self) -> ToolOutcome {
        ToolOutcome {
            receipt: self.receipt.clone(),
            output_limit: self.output_limit,
            ..ToolOutcome::with_status(self.status, self.content.clone())
        }
    }
}

/// `Result<String, String>` as `{"ok": …}` or `{"error": …}`.
mod summary_result {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Ok(String),
        Error(String),
    }

    pub fn serialize<S: Serializer>(r: &Result<String, String>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Ok(t) => Shape::Ok(t.clone()),
            Err(e) => Shape::Error(e.clone()),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Result<String, String>, D::Error> {
        Ok(match Shape::deserialize(d)? {
            Shape::Ok(t) => Ok(t),
            Shape::Error(e) => Err(e),
        })
    }
}

/// Read one stored entry, naming the field it cannot interpret.
pub fn read_entry(seq: u64, kind: &str, body: &str) -> Result<Entry, UnreadableEntry> {
    let unreadable = |message: String| UnreadableEntry {
        seq,
        kind: kind.to_string(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| unreadable(format!("not JSON: {e}")))?;
    if let Some(format) = value
        .get("format")
        .and_then(|f| f.as_u64())
        .filter(|f| *f > FORMAT as u64)
    {
        return Err(unreadable(format!(
            "field `format`: {format} is newer than this sandcrab reads ({FORMAT}); replay it with the sandcrab that recorded it or a newer one"
        )));
    }
    // The large entries are read as their own structs, so an error
    // names the field inside them (a tagged enum loses the path).
    let fields = || {
        let mut fields = value.clone();
        if let Some(object) = fields.as_object_mut() {
            object.remove("entry");
        }
        fields
    };
    let read = match value.get("entry").and_then(|e| e.as_str()) {
        Some("start") => read_as(&fields()).map(|s| Entry::Start(Box::new(s))),
        Some("model") => read_as(&fields()).map(|c| Entry::Model(Box::new(c))),
        Some("tool") => read_as(&fields()).map(|a| Entry::Tool(Box::new(a))),
        _ => read_as(&value),
    };
    read.map_err(unreadable)
}

/// `value` as a `T`, or what is wrong and where.
fn read_as<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        if path == "." {
            message
        } else {
            format!("field `{path}`: {message}")
        }
    })
}

/// A recorded entry this sandcrab cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("recording entry {seq} ({kind}): {message}")]
pub struct UnreadableEntry {
    pub seq: u64,
    pub kind: String,
    pub message: String,
}

fn profile_source() -> super::window::WindowSource {
    super::window::WindowSource::Profile
}

fn one() -> f64 {
    1.0
}
