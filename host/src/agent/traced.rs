//! The session's spans and metrics ([`crate::telemetry`]): one
//! `invoke_agent` span per input, a `chat` span per model call and an
//! `execute_tool` span per tool call under it, each with the GenAI
//! conventions' attributes, and sandcrab's own from the call's receipt.
//! Content (messages, arguments, results) only where the operator turned
//! its capture on.

use crate::llm::{FinishReason, LlmError, Request, Response, ToolCall, Usage};
use crate::telemetry::{self, Content, MetricKind, Span, SpanKind, Value, names as n};
use crate::tools::{ToolOutcome, ToolStatus};

use super::session::Session;

impl Session {
    /// The span of one input, under the span that started this session
    /// (a subagent's: its parent's `spawn_agent` call).
    pub(super) fn agent_span(&self) -> Span {
        let mut span = Span::start(
            format!("{} sandcrab", n::OP_INVOKE_AGENT),
            SpanKind::Internal,
            self.trace_parent(),
        );
        span.set(n::OPERATION_NAME, n::OP_INVOKE_AGENT)
            .set(n::PROVIDER_NAME, self.provider_name())
            .set(n::AGENT_NAME, "sandcrab")
            .set(n::AGENT_ID, self.id.as_str())
            .set(n::CONVERSATION_ID, self.root_id.as_str())
            .set(n::REQUEST_MODEL, self.config.model.as_str())
            .set(n::SESSION_DEPTH, self.depth);
        span
    }

    /// Close the input's span with what it used and how it ended.
    pub(super) fn finish_agent_span(
        &self,
        span: &mut Span,
        used: &Usage,
        failed: Option<&LlmError>,
    ) {
        span.set(n::USAGE_INPUT_TOKENS, used.input_tokens)
            .set(n::USAGE_OUTPUT_TOKENS, used.output_tokens);
        if let Some(reached) = self.spend_stopped() {
            span.set(n::STOPPED_BY, format!("spend_cap:{}", word(&reached.cap)));
        } else if let Some(limit) = self.stopped_by() {
            span.set(n::STOPPED_BY, limit.as_str());
        }
        if let Some(err) = failed {
            span.fail(&format!("{:?}", err.kind));
        }
    }

    /// The span of one model call.
    pub(super) fn chat_span(&self, request: &Request) -> Span {
        let mut span = Span::start(
            format!("{} {}", n::OP_CHAT, request.model),
            SpanKind::Client,
            telemetry::current(),
        );
        span.set(n::OPERATION_NAME, n::OP_CHAT)
            .set(n::PROVIDER_NAME, self.provider_name())
            .set(n::REQUEST_MODEL, request.model.as_str())
            .set(n::CONVERSATION_ID, self.root_id.as_str());
        if let Some(max) = request.max_tokens {
            span.set(n::REQUEST_MAX_TOKENS, max);
        }
        if let Some(t) = request.temperature {
            span.set(n::REQUEST_TEMPERATURE, Value::Double(f64::from(t)));
        }
        if telemetry::captures(Content::InputMessages) {
            span.set(
                n::INPUT_MESSAGES,
                serde_json::to_string(&request.messages).unwrap_or_default(),
            );
        }
        span
    }

    /// Close a model call's span with its answer (or its error), and
    /// count its tokens and time.
    pub(super) fn finish_chat_span(
        &self,
        mut span: Span,
        started: std::time::Instant,
        answer: Result<&Response, &LlmError>,
    ) {
        let model = self.config.model.clone();
        let provider = self.provider_name();
        let base = [
            (n::OPERATION_NAME, Value::from(n::OP_CHAT)),
            (n::PROVIDER_NAME, Value::from(provider)),
            (n::REQUEST_MODEL, Value::from(model)),
        ];
        match answer {
            Ok(response) => {
                span.set(n::RESPONSE_ID, response.id.as_str())
                    .set(n::RESPONSE_MODEL, response.model.as_str())
                    .set(n::USAGE_INPUT_TOKENS, response.usage.input_tokens)
                    .set(n::USAGE_OUTPUT_TOKENS, response.usage.output_tokens)
                    .set(
                        n::RESPONSE_FINISH_REASONS,
                        vec![finish_reason(&response.finish_reason)],
                    );
                if telemetry::captures(Content::OutputMessages) {
                    span.set(
                        n::OUTPUT_MESSAGES,
                        serde_json::to_string(&response.to_message()).unwrap_or_default(),
                    );
                }
                for (kind, tokens) in [
                    ("input", response.usage.input_tokens),
                    ("output", response.usage.output_tokens),
                ] {
                    let mut attrs = base.to_vec();
                    attrs.push((n::TOKEN_TYPE, Value::from(kind)));
                    telemetry::record(
                        n::METRIC_TOKEN_USAGE,
                        MetricKind::Tokens,
                        &attrs,
                        tokens as f64,
                    );
                }
                telemetry::record(
                    n::METRIC_OPERATION_DURATION,
                    MetricKind::Seconds,
                    &base,
                    started.elapsed().as_secs_f64(),
                );
            }
            Err(err) => {
                let kind = format!("{:?}", err.kind);
                span.fail(&kind);
                let mut attrs = base.to_vec();
                attrs.push((n::ERROR_TYPE, Value::from(kind)));
                telemetry::record(
                    n::METRIC_OPERATION_DURATION,
                    MetricKind::Seconds,
                    &attrs,
                    started.elapsed().as_secs_f64(),
                );
            }
        }
    }

    /// The span of one tool call.
    pub(super) fn tool_span(&self, call: &ToolCall) -> Span {
        let mut span = Span::start(
            format!("{} {}", n::OP_EXECUTE_TOOL, call.name),
            SpanKind::Internal,
            telemetry::current(),
        );
        span.set(n::OPERATION_NAME, n::OP_EXECUTE_TOOL)
            .set(n::TOOL_NAME, call.name.as_str())
            .set(n::TOOL_CALL_ID, call.id.as_str())
            .set(n::TOOL_TYPE, "function")
            .set(n::CONVERSATION_ID, self.root_id.as_str());
        if telemetry::captures(Content::ToolArguments) {
            span.set(n::TOOL_CALL_ARGUMENTS, call.arguments.to_string());
        }
        span
    }
}

/// Close a tool call's span with what its receipt says, and count it.
pub(super) fn finish_tool_span(span: &mut Span, call: &ToolCall, outcome: &ToolOutcome) {
    let status = word(&outcome.status);
    span.set(n::TOOL_STATUS, status.as_str());
    if telemetry::captures(Content::ToolResults) {
        span.set(n::TOOL_CALL_RESULT, outcome.content.as_str());
    }
    let mut verdict = String::from("none");
    if let Some(receipt) = &outcome.receipt {
        let standing = &receipt.standing;
        span.set(n::PRINCIPAL_KIND, standing.principal.kind.to_string())
            .set(n::PRINCIPAL_NAME, standing.principal.name.as_str())
            .set(n::SANDBOX_MODE, standing.mode.to_string())
            .set(
                n::PROGRAMS_STARTED,
                receipt
                    .programs
                    .iter()
                    .filter(|p| p.refused.is_none())
                    .count(),
            )
            .set(
                n::PROGRAMS_REFUSED,
                receipt
                    .programs
                    .iter()
                    .filter(|p| p.refused.is_some())
                    .count(),
            )
            .set(
                n::HTTP_REQUESTS,
                receipt.http.len() as u64 + receipt.http_unlisted,
            )
            .set(n::DENIALS, standing.denials.len());
        if let Some(record) = receipt.approvals.iter().rev().find_map(|a| match a {
            sandcrab_core::approval::Approval::Record(r) => Some(r),
            _ => None,
        }) {
            verdict = decided(record);
            span.set(n::VERDICT, verdict.as_str())
                .set(n::RULE, rule_of(&record.by));
        }
        if !standing.denials.is_empty() {
            telemetry::record(
                n::METRIC_DENIALS,
                MetricKind::Counter,
                &[(n::TOOL_NAME, Value::from(call.name.as_str()))],
                standing.denials.len() as f64,
            );
        }
    }
    if outcome.is_error() && outcome.status != ToolStatus::Ok {
        span.fail(&status);
    }
    telemetry::record(
        n::METRIC_TOOL_CALLS,
        MetricKind::Counter,
        &[
            (n::TOOL_NAME, Value::from(call.name.as_str())),
            (n::VERDICT, Value::from(verdict)),
            (n::TOOL_STATUS, Value::from(status)),
        ],
        1.0,
    );
}

/// The verdict as it ended: `allow`, `deny`, or what asking came to.
fn decided(record: &sandcrab_core::approval::ApprovalRecord) -> String {
    use sandcrab_core::approval::{Answered, Decision};
    match (&record.decision, &record.answer) {
        (Decision::Ask, Some(Answered::Allowed { .. })) => "ask:allowed".into(),
        (Decision::Ask, Some(Answered::Denied { .. })) => "ask:denied".into(),
        (Decision::Ask, Some(Answered::NobodyToAsk)) => "ask:nobody".into(),
        (decision, _) => word(decision),
    }
}

/// What decided: the rule (where it is written and what it matches), the
/// mode, the operator, or a hook's event (never its command line).
fn rule_of(by: &sandcrab_core::approval::DecidedBy) -> String {
    use sandcrab_core::approval::DecidedBy;
    match by {
        DecidedBy::Rule { at, rule } => format!("{at}: {rule}"),
        DecidedBy::Mode { mode } => format!("mode {}", word(mode)),
        DecidedBy::Operator => "operator".into(),
        DecidedBy::Hook { event, .. } => format!("hook {event}"),
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

/// A value's one-word serde name (`ok`, `allow`, `tokens`).
fn word<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

impl Session {
    /// Where this session's input spans hang: the span that started it
    /// (a subagent's), else the work it runs in.
    fn trace_parent(&self) -> Option<telemetry::SpanContext> {
        self.trace_parent
            .lock()
            .ok()
            .and_then(|p| *p)
            .or_else(telemetry::current)
    }

    /// The provider as the GenAI conventions name it.
    fn provider_name(&self) -> String {
        match self.profile.info.id.as_str() {
            "gemini" => "gcp.gemini".into(),
            other => other.to_string(),
        }
    }
}
