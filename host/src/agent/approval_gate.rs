//! Approvals at the moment a call is about to run: what the call is to the
//! rules (its tool, its shell command, the workspace paths it writes), the
//! verdict, and — with nobody to ask yet — the refusal the model reads.
//! Every verdict goes into the call's receipt.

use std::path::Path;

use super::event_data::{self as ed, EventData};
use super::session::Session;
use crate::approvals::{
    Decision, PermissionRequest, SHELL_TOOL, Scope, ScopeOffer, Subject, receipt_line, refusal,
    rules_from_flags, suggestion,
};
use crate::llm::ToolCall;
use crate::plugin::Writes;
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
    let subject = subject(call, registry, &session.workspace, &session.working_dir);
    let granted = session
        .granted
        .lock()
        .map(|g| g.clone())
        .unwrap_or_default();
    let verdict = approvals.decide_with(&subject, &granted);
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
                scopes: vec![
                    ScopeOffer {
                        scope: Scope::Once,
                        allows: "this call".into(),
                    },
                    ScopeOffer {
                        scope: Scope::Session,
                        allows: format!("{offer} for the rest of this conversation"),
                    },
                ],
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
            if answer.scope == Scope::Session
                && let Ok(rules) = rules_from_flags(std::slice::from_ref(&offer))
                && let Ok(mut granted) = session.granted.lock()
            {
                granted.extend(rules.relabel(&format!(
                    "the operator's answer to {asked_id} via {}",
                    answer.by
                )));
            }
            let scope = match answer.scope {
                Scope::Once => "once".to_string(),
                Scope::Session => format!("{offer} for this conversation"),
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

/// The call as the rules see it.
fn subject(
    call: &ToolCall,
    registry: &ToolRegistry,
    workspace: &Path,
    working_dir: &Path,
) -> Subject {
    let args = match &call.arguments {
        serde_json::Value::String(raw) => serde_json::from_str(raw).unwrap_or_default(),
        other => other.clone(),
    };
    let command = (call.name == SHELL_TOOL)
        .then(|| args["command"].as_str().map(String::from))
        .flatten();
    let paths = match registry.get(&call.name).map(|t| &t.spec.traits.writes) {
        Some(Writes::Paths(names)) => names
            .iter()
            .filter_map(|name| args[name.as_str()].as_str())
            .map(|p| relative(p, workspace, working_dir))
            .collect(),
        _ => Vec::new(),
    };
    Subject::Call {
        tool: call.name.clone(),
        command,
        paths,
    }
}

/// `path` relative to the workspace (as given when it is not inside it,
/// so no glob matches it).
fn relative(path: &str, workspace: &Path, working_dir: &Path) -> String {
    let full = working_dir.join(path);
    full.strip_prefix(workspace)
        .map(|rel| rel.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_judged_relative_to_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(relative("src/a.rs", ws, Path::new("/w")), "src/a.rs");
        assert_eq!(relative("a.rs", ws, Path::new("/w/src")), "src/a.rs");
        assert_eq!(relative("/w/src/a.rs", ws, Path::new("/w/x")), "src/a.rs");
        assert_eq!(relative("/etc/passwd", ws, Path::new("/w")), "/etc/passwd");
    }
}
