//! Wire adapters: each turns the unified request into one provider's JSON,
//! and that provider's JSON and event stream back into unified types.

mod anthropic;
mod chat;
mod gemini;
mod gemini_schema;
mod openai;

use serde_json::Value;

use super::config::ProviderKind;
use super::error::{ErrorKind, LlmError};
use super::sse::SseEvent;
use super::types::{FinishReason, Request, Response, StreamEvent, Usage};

pub use anthropic::Anthropic;
pub use chat::ChatCompletions;
pub use gemini::Gemini;
pub use openai::OpenAiResponses;

/// One provider's wire format.
pub trait Adapter: Send + Sync {
    /// The URL to POST to, from the base URL without a version segment.
    fn endpoint(&self, root: &str, model: &str, stream: bool) -> String;
    /// Authentication and version headers.
    fn headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)>;
    /// The request body.
    fn build_body(&self, request: &Request, stream: bool) -> Value;
    /// A complete (non-streamed) response body.
    fn parse_response(&self, body: &Value) -> Result<Response, LlmError>;
    /// A fresh decoder for one streamed response.
    fn decoder(&self) -> Box<dyn StreamDecoder>;
}

/// What a stream says about the whole response besides its content.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub id: String,
    pub model: String,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    /// A thought signature that came on a text part (Gemini), to send
    /// back on the text.
    pub signature: Option<String>,
}

/// Decodes one provider's SSE events into unified events.
pub trait StreamDecoder: Send {
    /// The unified events for one SSE event; an error event or malformed
    /// data is an error.
    fn event(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>, LlmError>;
    /// The provider sent its end-of-response marker.
    fn done(&self) -> bool;
    /// The body may end now without the response being cut short.
    fn complete_at_eof(&self) -> bool;
    /// Id, model, usage and finish reason, once done.
    fn summary(&mut self) -> Summary;
}

/// The adapter for `kind`.
pub fn for_kind(kind: ProviderKind) -> Box<dyn Adapter> {
    match kind {
        ProviderKind::Anthropic => Box::new(Anthropic),
        ProviderKind::OpenAi => Box::new(OpenAiResponses),
        ProviderKind::OpenAiCompatible => Box::new(ChatCompletions),
        ProviderKind::Gemini => Box::new(Gemini),
    }
}

/// `Authorization: Bearer KEY`, when there is a key.
fn bearer(api_key: Option<&str>) -> Vec<(&'static str, String)> {
    api_key
        .map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// Parse an event's data as JSON, or a stream error naming the provider.
fn parse_data(provider: &str, data: &str) -> Result<Value, LlmError> {
    serde_json::from_str(data).map_err(|e| {
        let mut shown = data.to_string();
        shown.truncate(shown.floor_char_boundary(200));
        LlmError::new(
            ErrorKind::Stream,
            provider,
            format!("malformed event data ({e}): {shown}"),
        )
    })
}

/// Merge `options` into the top level of `body`.
fn merge_options(body: &mut Value, request: &Request) {
    if let Value::Object(map) = body {
        for (k, v) in &request.provider_options {
            map.insert(k.clone(), v.clone());
        }
    }
}

/// Tool-call arguments as the JSON text providers expect.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Tool-call arguments as a JSON object (providers that want objects).
fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(raw) => serde_json::from_str(raw).unwrap_or_else(|_| serde_json::json!({})),
        _ => serde_json::json!({}),
    }
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// An error carried inside a stream (`{"error": {"type"/"code", "message"}}`).
fn stream_error(provider: &str, error: &Value) -> LlmError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the provider reported an error")
        .to_string();
    let code = error
        .get("type")
        .or_else(|| error.get("code"))
        .or_else(|| error.get("status"))
        .map(|c| {
            c.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| c.to_string())
        })
        .unwrap_or_default();
    let kind = match code.as_str() {
        c if c.contains("rate_limit") || c == "429" || c == "RESOURCE_EXHAUSTED" => {
            ErrorKind::RateLimit
        }
        c if c.contains("overloaded")
            || c.contains("api_error")
            || c.contains("server_error")
            || c.starts_with('5')
            || c == "INTERNAL"
            || c == "UNAVAILABLE" =>
        {
            ErrorKind::Server
        }
        c if c.contains("authentication") || c == "401" || c == "UNAUTHENTICATED" => {
            ErrorKind::Authentication
        }
        c if c.contains("permission") || c == "403" || c == "PERMISSION_DENIED" => {
            ErrorKind::AccessDenied
        }
        _ if super::error::mentions_context_length(&message) => ErrorKind::ContextLength,
        c if c.contains("invalid_request") || c == "400" || c == "INVALID_ARGUMENT" => {
            ErrorKind::InvalidRequest
        }
        _ => ErrorKind::Stream,
    };
    LlmError::new(kind, provider, message)
}
