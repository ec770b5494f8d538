//! The error taxonomy of model calls.

use std::time::Duration;

/// What kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// 401: the key is missing or wrong.
    Authentication,
    /// 403: the key may not use this resource.
    AccessDenied,
    /// 404: wrong model or endpoint.
    NotFound,
    /// 400 / 422: the request is malformed.
    InvalidRequest,
    /// 413, or the provider says the prompt is too long.
    ContextLength,
    /// 429.
    RateLimit,
    /// 5xx.
    Server,
    /// Connect or read timed out.
    Timeout,
    /// Could not reach the provider.
    Network,
    /// The event stream was malformed or ended early.
    Stream,
    /// Sandcrab is not set up to talk to a provider.
    Configuration,
}

impl ErrorKind {
    fn label(self) -> &'static str {
        match self {
            ErrorKind::Authentication => "authentication failed",
            ErrorKind::AccessDenied => "access denied",
            ErrorKind::NotFound => "not found",
            ErrorKind::InvalidRequest => "invalid request",
            ErrorKind::ContextLength => "context length exceeded",
            ErrorKind::RateLimit => "rate limited",
            ErrorKind::Server => "server error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Network => "network error",
            ErrorKind::Stream => "stream error",
            ErrorKind::Configuration => "configuration error",
        }
    }
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{provider}: {}{}: {message}", kind.label(), status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct LlmError {
    pub kind: ErrorKind,
    /// Provider id (`anthropic`, `openai`, ...).
    pub provider: String,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    pub message: String,
    /// What the provider asked us to wait (Retry-After).
    pub retry_after: Option<Duration>,
}

impl LlmError {
    pub fn new(kind: ErrorKind, provider: &str, message: impl Into<String>) -> Self {
        LlmError {
            kind,
            provider: provider.to_string(),
            status: None,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Whether trying again may help.
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::RateLimit | ErrorKind::Server | ErrorKind::Timeout | ErrorKind::Network
        )
    }

    /// The error for an HTTP error status and its body.
    pub fn from_status(
        provider: &str,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
    ) -> Self {
        let message = error_message(body);
        let kind = match status {
            401 => ErrorKind::Authentication,
            403 => ErrorKind::AccessDenied,
            404 => ErrorKind::NotFound,
            413 => ErrorKind::ContextLength,
            429 => ErrorKind::RateLimit,
            400 | 422 if mentions_context_length(&message) => ErrorKind::ContextLength,
            400 | 422 => ErrorKind::InvalidRequest,
            500..=599 => ErrorKind::Server,
            _ => ErrorKind::InvalidRequest,
        };
        LlmError {
            kind,
            provider: provider.to_string(),
            status: Some(status),
            message,
            retry_after,
        }
    }
}

/// The human message inside a provider's error body (`error.message`,
/// `message`), or the body itself, shortened.
pub fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.pointer("/error"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    let text = found.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        return "(empty response body)".into();
    }
    text[..text.floor_char_boundary(2000)].to_string()
}

/// Whether a provider's message says the prompt was too long.
pub fn mentions_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceeds the maximum number of tokens",
        "token limit",
        // llama.cpp: "request (4476 tokens) exceeds the available context
        // size (4096 tokens)", type `exceed_context_size_error`.
        "context size",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        let k = |s, body: &str| LlmError::from_status("p", s, body, None).kind;
        assert_eq!(k(401, "{}"), ErrorKind::Authentication);
        assert_eq!(k(403, "{}"), ErrorKind::AccessDenied);
        assert_eq!(k(404, "{}"), ErrorKind::NotFound);
        assert_eq!(
            k(400, r#"{"error":{"message":"bad field"}}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(k(422, "{}"), ErrorKind::InvalidRequest);
        assert_eq!(k(413, "{}"), ErrorKind::ContextLength);
        assert_eq!(
            k(
                400,
                r#"{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
            ),
            ErrorKind::ContextLength
        );
        assert_eq!(k(429, "{}"), ErrorKind::RateLimit);
        assert_eq!(k(503, "{}"), ErrorKind::Server);
    }

    #[test]
    fn messages_are_extracted_and_errors_say_who_and_what() {
        let e = LlmError::from_status(
            "anthropic",
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            None,
        );
        assert_eq!(
            e.to_string(),
            "anthropic: authentication failed (HTTP 401): invalid x-api-key"
        );
        assert!(!e.retryable());
        assert!(LlmError::from_status("x", 500, "oops", None).retryable());
        assert_eq!(error_message("  "), "(empty response body)");
    }
}
