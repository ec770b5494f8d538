//! What each kind of session event carries: one payload type per kind, so
//! every consumer (the terminal, the bridge, a recording) reads fields by
//! type. [`EventData`] serializes to the payload alone — the `data` of an
//! event's JSON, unchanged since events were JSON values (pinned by the
//! tests of this module).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::compaction::CompactionStats;
use crate::jobs::JobStatus;
use crate::llm::Usage;
use crate::tools::{Receipt, ToolStatus};

/// A payload with no fields (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Nothing {}

/// SESSION_START.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStarted {
    pub session_id: String,
    /// The provider profile's id.
    pub profile: String,
    pub model: String,
    /// 0 for a top-level session, 1 for its subagents, …
    pub depth: usize,
    pub working_dir: PathBuf,
    /// The model's context window in tokens, and where that came from.
    #[serde(default)]
    pub context_window: u64,
    #[serde(default = "profile_source")]
    pub window_source: crate::agent::window::WindowSource,
}

fn profile_source() -> crate::agent::window::WindowSource {
    crate::agent::window::WindowSource::Profile
}

/// A text: USER_INPUT, ASSISTANT_TEXT_END, STEERING_INJECTED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Text {
    pub text: String,
}

/// ASSISTANT_TEXT_DELTA.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextDelta {
    pub delta: String,
}

/// TOOL_CALL_START.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallStarted {
    pub call_id: String,
    pub name: String,
    /// As the model gave them (an object, or the raw text it produced).
    pub arguments: serde_json::Value,
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// TOOL_CALL_OUTPUT_DELTA: live output of a program the call runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutputDelta {
    pub call_id: String,
    pub stream: Stream,
    pub text: String,
}

/// TOOL_CALL_END.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEnded {
    pub call_id: String,
    pub name: String,
    /// The whole output (the model may see it truncated).
    pub output: String,
    pub is_error: bool,
    /// Whether the model saw less than `output`.
    pub truncated: bool,
    /// How the call ended.
    pub status: ToolStatus,
    /// Who ran it under which grants (none for a call that never ran).
    pub receipt: Option<Box<Receipt>>,
    /// The files the call changed, each with its diff (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::checkpoint::FileChange>,
}

impl ToolCallEnded {
    /// The end of a call that never ran (`status` says why).
    pub fn not_run(call_id: &str, name: &str, status: ToolStatus, output: &str) -> Self {
        Self::cut_short(call_id, name, status, output, None)
    }

    /// The end of a call that did not finish (`status` says why), with its
    /// receipt when it had started.
    pub fn cut_short(
        call_id: &str,
        name: &str,
        status: ToolStatus,
        output: &str,
        receipt: Option<crate::tools::Receipt>,
    ) -> Self {
        ToolCallEnded {
            call_id: call_id.into(),
            name: name.into(),
            output: output.into(),
            is_error: status.is_error(),
            truncated: false,
            status,
            receipt: receipt.map(Box::new),
            changes: Vec::new(),
        }
    }
}

/// Which limit ended the processing of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnLimitKind {
    MaxToolRoundsPerInput,
    MaxTurns,
}

impl TurnLimitKind {
    /// The setting's name.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnLimitKind::MaxToolRoundsPerInput => "max_tool_rounds_per_input",
            TurnLimitKind::MaxTurns => "max_turns",
        }
    }

    /// Where the operator sets it: the flag and the configuration key.
    pub fn setting(self) -> &'static str {
        match self {
            TurnLimitKind::MaxToolRoundsPerInput => "--max-tool-rounds / [agent] max_tool_rounds",
            TurnLimitKind::MaxTurns => "--max-turns / [agent] max_turns",
        }
    }
}

/// TURN_LIMIT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnLimitReached {
    pub limit: TurnLimitKind,
    pub value: u32,
}

/// SPEND_CAP: a spend cap stopped the loop before a model call (the
/// request was not sent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpendCapReached {
    #[serde(flatten)]
    pub reached: crate::llm::spend::CapReached,
    /// The session's spend and caps then.
    pub spend: crate::llm::spend::SpendReport,
}

/// LOOP_DETECTION.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopDetected {
    pub pattern_length: usize,
    pub calls: usize,
    pub pattern: Vec<String>,
}

/// CONTEXT_WARNING.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextUsage {
    /// Of the context window, 0.0–1.0 (1.0 when the provider refused the
    /// request as too long).
    pub usage_percent: f64,
    pub estimated_tokens: u64,
    pub context_window: u64,
}

/// WARNING.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub message: String,
}

/// ERROR: a model call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// The error kind's name (`Authentication`, `RateLimit`, …).
    pub kind: String,
    pub provider: String,
    pub status: Option<u16>,
    pub message: String,
    /// The whole error, as one line.
    pub error: String,
    /// Whether the session closed because of it.
    pub closes_session: bool,
}

/// PROCESSING_END.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessingEnded {
    pub interrupted: bool,
    /// Tokens used while processing this input.
    pub usage: Usage,
    /// The model's context window as the session knows it now.
    #[serde(default)]
    pub context_window: u64,
    /// The largest request the provider answered in this session so far,
    /// in its tokens (as it counted them, else as estimated).
    #[serde(default)]
    pub largest_request: u64,
    /// The session's spend against its caps, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::llm::spend::SpendReport>,
    /// The cap that stopped this input before a model call, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend_cap: Option<crate::llm::spend::CapReached>,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The work asked for was done (a `run` that finished, a chat the
    /// operator left).
    Completed,
    /// Stopped before the work was done (an interrupt, a limit, a signal).
    Aborted,
    /// An error the session could not go on from.
    Error,
}

/// SESSION_END.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEnded {
    pub reason: EndReason,
}

/// JOB_STARTED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStarted {
    pub job_id: String,
    pub tool: String,
    pub call_id: String,
}

/// JOB_FINISHED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFinished {
    pub job_id: String,
    pub status: JobStatus,
}

/// PERMISSION_RESOLVED: how a permission request ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionResolved {
    pub id: String,
    pub call_id: String,
    /// `allow` or `deny`.
    pub decision: crate::approvals::Decision,
    pub scope: crate::approvals::Scope,
    /// `bridge`, `timeout`, …
    pub by: String,
}

/// Declares the kinds, their payloads, and the mapping between them, from
/// one table.
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $kind:ident($payload:ty)),+ $(,)?) => {
        /// The kinds of events.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum EventKind {
            $($(#[$doc])* $kind,)+
        }

        /// An event's payload, by kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventData {
            $($(#[$doc])* $kind($payload),)+
        }

        impl EventData {
            /// The kind of this payload.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(EventData::$kind(_) => EventKind::$kind,)+
                }
            }
        }

        impl Serialize for EventData {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(EventData::$kind(data) => data.serialize(s),)+
                }
            }
        }

        impl EventData {
            /// The payload of `kind` from its JSON (`data`).
            pub fn from_json(
                kind: EventKind,
                data: serde_json::Value,
            ) -> Result<EventData, serde_json::Error> {
                Ok(match kind {
                    $(EventKind::$kind => EventData::$kind(serde_json::from_value(data)?),)+
                })
            }
        }
    };
}

event_kinds! {
    SessionStart(SessionStarted),
    UserInput(Text),
    AssistantTextStart(Nothing),
    AssistantTextDelta(TextDelta),
    AssistantTextEnd(Text),
    /// More of the model's readable reasoning (where the provider shows
    /// it).
    AssistantReasoningDelta(TextDelta),
    ToolCallStart(ToolCallStarted),
    ToolCallOutputDelta(ToolOutputDelta),
    ToolCallEnd(ToolCallEnded),
    SteeringInjected(Text),
    TurnLimit(TurnLimitReached),
    /// A spend cap stopped the loop before a model call.
    SpendCap(SpendCapReached),
    LoopDetection(LoopDetected),
    ContextWarning(ContextUsage),
    Warning(Warning),
    Error(ErrorReport),
    ProcessingEnd(ProcessingEnded),
    SessionEnd(SessionEnded),
    /// A tool call became a background job.
    JobStarted(JobStarted),
    /// A background job reached a terminal status.
    JobFinished(JobFinished),
    /// Compaction of the history started.
    CompactionStart(Nothing),
    /// Compaction ended (its stats; all zero when nothing changed).
    CompactionEnd(CompactionStats),
    /// A call waits for the operator's approval.
    PermissionRequired(crate::approvals::PermissionRequest),
    /// The operator answered (or nobody did in time).
    PermissionResolved(PermissionResolved),
    /// News for the operator that is not a warning (a plugin loaded,
    /// reloaded or unloaded).
    Notice(Text),
}

impl EventData {
    /// A text payload.
    pub fn text(text: impl Into<String>) -> Text {
        Text { text: text.into() }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::Event;

    fn event(data: EventData) -> serde_json::Value {
        serde_json::to_value(Event {
            timestamp: "2026-11-23T10:00:00Z".into(),
            session_id: "s1".into(),
            data,
        })
        .unwrap()
    }

    /// Every kind's JSON, exactly as consumers (the bridge, `--json`,
    /// recordings) have read it. A change here is a change of the event
    /// format: version it instead.
    #[test]
    fn the_json_of_every_kind_is_pinned() {
        let receipt: Receipt = serde_json::from_value(json!({
            "call_id": "c1", "tool": "shell",
            "principal": {"kind": "host", "name": "shell"},
            "mode": "host", "grants": [], "denials": [], "programs": [],
            "approvals": [], "outcome": "ok", "status": "ok"
        }))
        .unwrap();
        let cases: Vec<(EventData, serde_json::Value)> = vec![
            (
                EventData::SessionStart(SessionStarted {
                    session_id: "s1".into(),
                    profile: "anthropic".into(),
                    model: "m".into(),
                    depth: 0,
                    working_dir: "/w".into(),
                    context_window: 8000,
                    window_source: crate::agent::window::WindowSource::Learned,
                }),
                json!({"session_id": "s1", "profile": "anthropic", "model": "m", "depth": 0, "working_dir": "/w",
                       "context_window": 8000, "window_source": "learned"}),
            ),
            (
                EventData::UserInput(EventData::text("hi")),
                json!({"text": "hi"}),
            ),
            (EventData::AssistantTextStart(Nothing {}), json!({})),
            (
                EventData::AssistantTextDelta(TextDelta { delta: "d".into() }),
                json!({"delta": "d"}),
            ),
            (
                EventData::AssistantTextEnd(EventData::text("t")),
                json!({"text": "t"}),
            ),
            (
                EventData::ToolCallStart(ToolCallStarted {
                    call_id: "c1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }),
                json!({"call_id": "c1", "name": "shell", "arguments": {"command": "ls"}}),
            ),
            (
                EventData::ToolCallOutputDelta(ToolOutputDelta {
                    call_id: "c1".into(),
                    stream: Stream::Stderr,
                    text: "x".into(),
                }),
                json!({"call_id": "c1", "stream": "stderr", "text": "x"}),
            ),
            (
                EventData::ToolCallEnd(ToolCallEnded {
                    call_id: "c1".into(),
                    name: "shell".into(),
                    output: "out".into(),
                    is_error: false,
                    truncated: false,
                    status: ToolStatus::Ok,
                    receipt: Some(Box::new(receipt.clone())),
                    changes: Vec::new(),
                }),
                json!({"call_id": "c1", "name": "shell", "output": "out", "is_error": false,
                       "truncated": false, "status": "ok", "receipt": serde_json::to_value(&receipt).unwrap()}),
            ),
            (
                EventData::ToolCallEnd(ToolCallEnded::not_run(
                    "c2",
                    "shell",
                    ToolStatus::Interrupted,
                    "[interrupted]",
                )),
                json!({"call_id": "c2", "name": "shell", "output": "[interrupted]", "is_error": true,
                       "truncated": false, "status": "interrupted", "receipt": null}),
            ),
            (
                EventData::SteeringInjected(EventData::text("s")),
                json!({"text": "s"}),
            ),
            (
                EventData::TurnLimit(TurnLimitReached {
                    limit: TurnLimitKind::MaxToolRoundsPerInput,
                    value: 3,
                }),
                json!({"limit": "max_tool_rounds_per_input", "value": 3}),
            ),
            (
                EventData::SpendCap(SpendCapReached {
                    reached: crate::llm::spend::CapReached {
                        cap: crate::llm::spend::CapKind::Tokens,
                        parents: false,
                        spent: 990.0,
                        limit: 1000.0,
                        raisable: true,
                        message: "spend cap reached".into(),
                    },
                    spend: crate::llm::spend::SpendReport {
                        tokens: 990,
                        max_tokens: Some(1000),
                        cost_usd: 0.0,
                        max_cost_usd: None,
                        elapsed_secs: 1.5,
                        max_duration_secs: None,
                        uncosted_calls: 0,
                    },
                }),
                json!({"cap": "tokens", "parents": false, "spent": 990.0, "limit": 1000.0, "raisable": true,
                       "message": "spend cap reached",
                       "spend": {"tokens": 990, "max_tokens": 1000, "cost_usd": 0.0, "elapsed_secs": 1.5}}),
            ),
            (
                EventData::LoopDetection(LoopDetected {
                    pattern_length: 1,
                    calls: 3,
                    pattern: vec!["a".into()],
                }),
                json!({"pattern_length": 1, "calls": 3, "pattern": ["a"]}),
            ),
            (
                EventData::ContextWarning(ContextUsage {
                    usage_percent: 0.5,
                    estimated_tokens: 10,
                    context_window: 20,
                }),
                json!({"usage_percent": 0.5, "estimated_tokens": 10, "context_window": 20}),
            ),
            (
                EventData::Warning(Warning {
                    message: "w".into(),
                }),
                json!({"message": "w"}),
            ),
            (
                EventData::Error(ErrorReport {
                    kind: "Authentication".into(),
                    provider: "anthropic".into(),
                    status: Some(401),
                    message: "no".into(),
                    error: "anthropic: no".into(),
                    closes_session: true,
                }),
                json!({"kind": "Authentication", "provider": "anthropic", "status": 401,
                       "message": "no", "error": "anthropic: no", "closes_session": true}),
            ),
            (
                EventData::ProcessingEnd(ProcessingEnded {
                    interrupted: false,
                    usage: Usage::default(),
                    context_window: 4096,
                    largest_request: 3000,
                    spend: None,
                    spend_cap: None,
                }),
                json!({"interrupted": false, "usage": serde_json::to_value(Usage::default()).unwrap(),
                       "context_window": 4096, "largest_request": 3000}),
            ),
            (
                EventData::SessionEnd(SessionEnded {
                    reason: EndReason::Aborted,
                }),
                json!({"reason": "aborted"}),
            ),
            (
                EventData::JobStarted(JobStarted {
                    job_id: "j1".into(),
                    tool: "shell".into(),
                    call_id: "c1".into(),
                }),
                json!({"job_id": "j1", "tool": "shell", "call_id": "c1"}),
            ),
            (
                EventData::JobFinished(JobFinished {
                    job_id: "j1".into(),
                    status: JobStatus::TimedOut,
                }),
                json!({"job_id": "j1", "status": "timed_out"}),
            ),
            (EventData::CompactionStart(Nothing {}), json!({})),
            (
                EventData::PermissionRequired(crate::approvals::PermissionRequest {
                    id: "p1".into(),
                    session_id: "s1".into(),
                    root_session_id: String::new(),
                    call_id: "c1".into(),
                    tool: "shell".into(),
                    arguments: json!({"command": "git push"}),
                    from: "agent".into(),
                    preview: "git push".into(),
                    diff: None,
                    sandbox: "workspace-write".into(),
                    network: false,
                    reason: "ask by mode on-risk".into(),
                    scopes: vec![crate::approvals::ScopeOffer {
                        scope: crate::approvals::Scope::Workspace,
                        allows: "shell:git push from now on in this workspace".into(),
                        rule: Some("shell:git push".into()),
                    }],
                    form: None,
                }),
                json!({"id": "p1", "session_id": "s1", "call_id": "c1", "tool": "shell",
                       "arguments": {"command": "git push"}, "from": "agent",
                       "preview": "git push", "diff": null,
                       "sandbox": "workspace-write", "reason": "ask by mode on-risk",
                       "scopes": [{"scope": "workspace",
                                   "allows": "shell:git push from now on in this workspace",
                                   "rule": "shell:git push"}]}),
            ),
            (
                EventData::PermissionResolved(PermissionResolved {
                    id: "p1".into(),
                    call_id: "c1".into(),
                    decision: crate::approvals::Decision::Deny,
                    scope: crate::approvals::Scope::Once,
                    by: "timeout".into(),
                }),
                json!({"id": "p1", "call_id": "c1", "decision": "deny", "scope": "once", "by": "timeout"}),
            ),
            (
                EventData::CompactionEnd(CompactionStats {
                    messages_compressed: 4,
                    batches_created: 1,
                    tokens_estimate_before: 100,
                    tokens_estimate_after: 40,
                }),
                json!({"messagesCompressed": 4, "batchesCreated": 1,
                       "tokensEstimateBefore": 100, "tokensEstimateAfter": 40}),
            ),
        ];
        let mut seen = std::collections::HashSet::new();
        for (data, want) in cases {
            let kind = data.kind();
            seen.insert(kind);
            let got = event(data.clone());
            let name = serde_json::to_value(kind).unwrap();
            assert_eq!(
                got,
                json!({"kind": name, "timestamp": "2026-11-23T10:00:00Z", "session_id": "s1", "data": want}),
                "{kind:?}"
            );
            // And back: a stored event reads as the same payload.
            assert_eq!(EventData::from_json(kind, want).unwrap(), data, "{kind:?}");
        }
        assert_eq!(seen.len(), 23, "every kind is pinned");
    }

    #[test]
    fn the_key_order_is_kind_timestamp_session_data() {
        let text = serde_json::to_string(&Event {
            timestamp: "t".into(),
            session_id: "s".into(),
            data: EventData::Warning(Warning {
                message: "m".into(),
            }),
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"kind":"WARNING","timestamp":"t","session_id":"s","data":{"message":"m"}}"#
        );
    }
}
