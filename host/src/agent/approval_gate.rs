//! Approvals at the moment a call is about to run: the verdict of the
//! rules (and of this conversation's answers); when they say to ask, the
//! operator's answer through the session's queue, or — with nobody to
//! ask — the refusal the model reads. Every verdict goes into the call's
//! receipt.

use super::event_data::{self as ed, EventData};
use super::session::Session;
use crate::approvals::{
    Decision, PermissionRequest, Scope, ScopeOffer, Subject, call_subject, receipt_line, refusal,
    rules_from_flags, suggestion,
};
use crate::llm::ToolCall;
use crate::tools::{Receipt, Standing, ToolOutcome, ToolRegistry, ToolStatus};

/// What the gate lets through.
pub(super) enum Gate {
    /// Run it; the line for its receipt.
    Run(String),
    /// Do not run it: the outcome the model gets.
    Refuse(Box<ToolOutcome>),
}

/// Decide `call` before it runs: by the rules (and this conversation's
/// answers), and when they say to ask, by the operator through the
/// session's queue (nobody to ask: refused).
pub(super) async fn decide(session: &Session, call: &ToolCall, registry: &ToolRegistry) -> Gate {
    let approvals = &session.config.approvals;
    let writes = registry.get(&call.name).map(|t| &t.spec.traits.writes);
    let subject = call_subject(
        &call.name,
        &call.arguments,
        writes,
        &session.workspace,
        &session.working_dir,
    );
    // This conversation's answers count beside the rules (none if their
    // lock was poisoned).
    let verdict = match session.granted.lock() {
        Ok(granted) => approvals.decide_with(&subject, &granted),
        Err(_) => approvals.decide(&subject),
    };
    let line = receipt_line(&verdict, approvals.mode);
    let refuse = |text: String, line: String| {
        let standing = registry
            .get(&call.name)
            .map(|t| t.executor.standing(&call.name))
            .unwrap_or_else(|| Standing::host(&call.name));
        let mut outcome = ToolOutcome::with_status(ToolStatus::Denied, text);
        outcome.receipt = Some(Receipt {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            standing,
            programs: Vec::new(),
            approvals: vec![line],
            outcome: ToolStatus::Denied.outcome().into(),
            status: Some(ToolStatus::Denied),
        });
        Gate::Refuse(Box::new(outcome))
    };
    match (verdict.decision, &session.config.asker) {
        (Decision::Allow, _) => Gate::Run(line),
        (Decision::Ask, Some(queue)) => {
            let offer = suggestion(&subject);
            let request = PermissionRequest {
                id: String::new(),
                session_id: session.id.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                preview: preview(&subject),
                sandbox: sandbox_of(registry, &call.name),
                reason: line.clone(),
                // A yes for the conversation only where one exact rule can
                // say what it allows.
                scopes: std::iter::once(ScopeOffer {
                    scope: Scope::Once,
                    allows: "this call".into(),
                })
                .chain(offer.as_ref().map(|offer| ScopeOffer {
                    scope: Scope::Session,
                    allows: format!("{offer} for the rest of this conversation"),
                }))
                .collect(),
            };
            let ticket = queue.submit(request);
            session.emit(EventData::PermissionRequired(ticket.request().clone()));
            let asked_id = ticket.request().id.clone();
            let answer = ticket.answer().await;
            session.emit(EventData::PermissionResolved(ed::PermissionResolved {
                id: asked_id.clone(),
                call_id: call.id.clone(),
                decision: if answer.allow {
                    Decision::Allow
                } else {
                    Decision::Deny
                },
                scope: answer.scope,
                by: answer.by.clone(),
            }));
            if !answer.allow {
                let note = answer
                    .note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default();
                return refuse(
                    format!(
                        "The operator denied this call{note}. Do not retry it as it is; change approach or ask the user."
                    ),
                    format!("{line}; denied by the operator via {}", answer.by),
                );
            }
            // A yes for the conversation where none was offered is a yes
            // for this call.
            let for_session = match (&answer.scope, &offer) {
                (Scope::Session, Some(offer)) => Some(offer.clone()),
                _ => None,
            };
            if let Some(offer) = &for_session
                && let Ok(rules) = rules_from_flags(std::slice::from_ref(offer))
                && let Ok(mut granted) = session.granted.lock()
            {
                granted.extend(rules.relabel(&format!(
                    "the operator's answer to {asked_id} via {}",
                    answer.by
                )));
            }
            let scope = match &for_session {
                None => "once".to_string(),
                Some(offer) => format!("{offer} for this conversation"),
            };
            Gate::Run(format!(
                "{line}; allowed by the operator via {} ({scope})",
                answer.by
            ))
        }
        (Decision::Ask, None) | (Decision::Deny, _) => {
            let text = refusal(&subject, &verdict);
            let note = if verdict.decision == Decision::Ask {
                format!("{line}; nobody to ask, refused")
            } else {
                line
            };
            refuse(text, note)
        }
    }
}

/// The sandbox a tool's calls run under, in a word.
fn sandbox_of(registry: &ToolRegistry, tool: &str) -> String {
    registry
        .get(tool)
        .map(|t| t.executor.standing(tool).mode)
        .unwrap_or_else(|| "host".into())
}

/// What the call would do, in a line.
fn preview(subject: &Subject) -> String {
    match subject {
        Subject::Call {
            command: Some(command),
            ..
        } => command.clone(),
        Subject::Call { paths, tool, .. } if !paths.is_empty() => {
            format!("{tool} writes {}", paths.join(", "))
        }
        Subject::Call { tool, .. } => tool.clone(),
        Subject::Grant { plugin, grant } => format!("{plugin} asks for {grant}"),
    }
}
