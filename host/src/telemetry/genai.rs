//! One model call as the GenAI conventions describe it: a `chat` span
//! with the request's and the answer's attributes, and the token and
//! duration metrics; the one way every model call sandcrab makes for a
//! session is told (the agent loop's, and those MCP servers ask for).

use std::time::Instant;

use super::names as n;
use super::{Content, MetricKind, Span, SpanContext, SpanKind, Value};
use crate::llm::{FinishReason, LlmError, Request, Response};

/// The provider as the conventions name it, from sandcrab's id.
pub fn provider_name(id: &str) -> &str {
    match id {
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// A model call being told.
pub struct ModelCall {
    span: Span,
    started: Instant,
    base: [(&'static str, Value); 3],
}

impl ModelCall {
    /// Start telling a call of `request` to `provider` (sandcrab's id) for
    /// conversation `conversation` (empty: none to name), under `parent`.
    pub fn start(
        provider: &str,
        conversation: &str,
        request: &Request,
        parent: Option<SpanContext>,
    ) -> ModelCall {
        let provider = provider_name(provider);
        let mut span = Span::start(
            format!("{} {}", n::OP_CHAT, request.model),
            SpanKind::Client,
            parent,
        );
        span.set(n::OPERATION_NAME, n::OP_CHAT)
            .set(n::PROVIDER_NAME, provider)
            .set(n::REQUEST_MODEL, request.model.as_str());
        if !conversation.is_empty() {
            span.set(n::CONVERSATION_ID, conversation);
        }
        if let Some(max) = request.max_tokens {
            span.set(n::REQUEST_MAX_TOKENS, max);
        }
        if let Some(t) = request.temperature {
            span.set(n::REQUEST_TEMPERATURE, Value::Double(f64::from(t)));
        }
        if super::captures(Content::InputMessages) {
            span.set(
                n::INPUT_MESSAGES,
                serde_json::to_string(&request.messages).unwrap_or_default(),
            );
        }
        ModelCall {
            span,
            started: Instant::now(),
            base: [
                (n::OPERATION_NAME, Value::from(n::OP_CHAT)),
                (n::PROVIDER_NAME, Value::from(provider)),
                (n::REQUEST_MODEL, Value::from(request.model.as_str())),
            ],
        }
    }

    /// End it with the answer or the error; its tokens and time counted.
    pub fn finish(mut self, answer: Result<&Response, &LlmError>) {
        let seconds = self.started.elapsed().as_secs_f64();
        let mut attrs = self.base.to_vec();
        match answer {
            Ok(response) => {
                self.span
                    .set(n::RESPONSE_ID, response.id.as_str())
                    .set(n::RESPONSE_MODEL, response.model.as_str())
                    .set(n::USAGE_INPUT_TOKENS, response.usage.input_tokens)
                    .set(n::USAGE_OUTPUT_TOKENS, response.usage.output_tokens)
                    .set(
                        n::RESPONSE_FINISH_REASONS,
                        vec![finish_reason(&response.finish_reason)],
                    );
                if super::captures(Content::OutputMessages) {
                    self.span.set(
                        n::OUTPUT_MESSAGES,
                        serde_json::to_string(&response.to_message()).unwrap_or_default(),
                    );
                }
                for (kind, tokens) in [
                    ("input", response.usage.input_tokens),
                    ("output", response.usage.output_tokens),
                ] {
                    let mut attrs = attrs.clone();
                    attrs.push((n::TOKEN_TYPE, Value::from(kind)));
                    super::record(
                        n::METRIC_TOKEN_USAGE,
                        MetricKind::Tokens,
                        &attrs,
                        tokens as f64,
                    );
                }
            }
            Err(err) => {
                let kind = format!("{:?}", err.kind);
                self.span.fail(&kind);
                attrs.push((n::ERROR_TYPE, Value::from(kind)));
            }
        }
        super::record(
            n::METRIC_OPERATION_DURATION,
            MetricKind::Seconds,
            &attrs,
            seconds,
        );
    }
}

fn finish_reason(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}
