//! The session's spans and metrics ([`crate::telemetry`]): one
//! `invoke_agent` span per input, a `chat` span per model call and an
//! `execute_tool` span per tool call under it, each with the GenAI
//! conventions' attributes, and sandcrab's own from the call's receipt.
//! Content (messages, arguments, results) only where the operator turned
//! its capture on.

use crate::llm::{LlmError, Request, ToolCall, Usage};
use crate::telemetry::genai::ModelCall;
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
            .set(
                n::PROVIDER_NAME,
                telemetry::genai::provider_name(&self.profile.info.id),
            )
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
            span.set(n::STOPPED_BY, format!("spend_cap:{}", reached.cap.as_str()));
        } else if let Some(limit) = self.stopped_by() {
            span.set(n::STOPPED_BY, limit.as_str());
        }
        if let Some(err) = failed {
            span.fail(&format!("{:?}", err.kind));
        }
    }

    /// The telling of one model call.
    pub(super) fn model_call(&self, request: &Request) -> ModelCall {
        ModelCall::start(
            &self.profile.info.id,
            &self.root_id,
            request,
            telemetry::current(),
        )
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
    let status = outcome.status.name();
    span.set(n::TOOL_STATUS, status.as_str());
    if telemetry::captures(Content::ToolResults) {
        span.set(n::TOOL_CALL_RESULT, outcome.content.as_str());
    }
    let mut verdict = String::from("none");
    if let Some(receipt) = &outcome.receipt {
        let standing = &receipt.standing;
        if let Some(signer) = &standing.principal.signer {
            span.set(n::PRINCIPAL_SIGNER, signer.as_str());
        }
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
        (decision, _) => decision.as_str().into(),
    }
}

/// What decided: the rule (where it is written and its kind — what it
/// matches can be a whole command line, so it stays in the receipt), the
/// mode, the operator, or a hook's event (never its command line).
fn rule_of(by: &sandcrab_core::approval::DecidedBy) -> String {
    use sandcrab_core::approval::DecidedBy;
    match by {
        DecidedBy::Rule { at, rule } => {
            // `tool X`, `shell …`, `command …`, `path …`, `TOOL path …`.
            let mut words = rule.split(' ');
            let first = words.next().unwrap_or_default();
            let kind = if words.next() == Some("path") {
                "path"
            } else {
                first
            };
            format!("{at} ({kind})")
        }
        DecidedBy::Mode { mode } => format!("mode {}", mode.as_str()),
        DecidedBy::Operator => "operator".into(),
        DecidedBy::Hook { event, .. } => format!("hook {event}"),
    }
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
}
