//! Approvals at the moment a call is about to run: the verdict of the
//! rules (and of this conversation's answers); when they say to ask, the
//! operator's answer through the session's queue, or — with nobody to
//! ask — the refusal the model reads. Every verdict goes into the call's
//! receipt.

use std::path::Path;

use super::event_data::{self as ed, EventData};
use super::session::Session;
use crate::approvals::{
    Answer, Decision, PermissionRequest, Scope, ScopeOffer, call_subject, describe_call, edit_diff,
    operator_denial, receipt_line, refusal, rules_from_flags, suggestion,
};
use crate::llm::ToolCall;
use crate::plugin::Writes;
use crate::tools::{Receipt, ToolOutcome, ToolRegistry, ToolStatus};

/// What the gate lets through.
pub(super) enum Gate {
    /// Run it; the line for its receipt, and whether the call was given
    /// the network it asked for.
    Run { line: String, network: bool },
    /// Do not run it: the outcome the model gets.
    Refuse(Box<ToolOutcome>),
}

/// Decide `call` before it runs: by the rules (and this conversation's
/// answers), and when they say to ask, by the operator through the
/// session's queue (nobody to ask: refused).
pub(super) async fn decide(session: &Session, call: &ToolCall, registry: &ToolRegistry) -> Gate {
    let approvals = &session.config.approvals;
    let traits = registry.get(&call.name).map(|t| &t.spec.traits);
    let writes = traits.map(|t| &t.writes);
    let subject = call_subject(
        &call.name,
        &call.arguments,
        traits,
        &session.workspace,
        &session.working_dir,
    );
    let network = matches!(
        subject,
        crate::approvals::Subject::Call { network: true, .. }
    );
    // This conversation's answers count beside the rules (none if their
    // lock was poisoned).
    let verdict = match session.granted.lock() {
        Ok(granted) => approvals.decide_with(&subject, &granted),
        Err(_) => approvals.decide(&subject),
    };
    let line = receipt_line(&verdict, approvals.mode);
    let refuse = |text: String, line: String| {
        let standing = registry.standing(&call.name);
        let mut outcome = ToolOutcome::with_status(ToolStatus::Denied, text);
        outcome.receipt = Some(Receipt {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            standing,
            programs: Vec::new(),
            http: Vec::new(),
            http_unlisted: 0,
            files_refused: Vec::new(),
            approvals: vec![line],
            outcome: ToolStatus::Denied.outcome().into(),
            status: Some(ToolStatus::Denied),
        });
        Gate::Refuse(Box::new(outcome))
    };
    match (verdict.decision, &session.config.asker) {
        (Decision::Allow, _) => Gate::Run { line, network },
        (Decision::Ask, Some(queue)) => {
            let offer = suggestion(&subject);
            let remember_in = session.config.remember_in.as_ref();
            let request = PermissionRequest {
                id: String::new(),
                session_id: session.id.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                from: if session.depth == 0 {
                    "agent".into()
                } else {
                    format!("subagent {}", session.id)
                },
                preview: describe_call(&subject),
                diff: writes
                    .filter(|w| !matches!(w, Writes::Nothing))
                    .and_then(|_| {
                        edit_diff(&call.arguments, &session.workspace, &session.working_dir)
                    }),
                sandbox: registry.standing(&call.name).mode,
                reason: line.clone(),
                scopes: scope_offers(offer.as_deref(), remember_in.map(|f| f.as_path())),
            };
            let ticket = queue.submit(request);
            session.emit(EventData::PermissionRequired(ticket.request().clone()));
            let asked_id = ticket.request().id.clone();
            // Withdrawn (the call interrupted) before an answer: say so too.
            let mut pending = Resolution {
                session,
                id: asked_id.clone(),
                call_id: call.id.clone(),
                answered: false,
            };
            let answer = ticket.answer().await;
            pending.answered = true;
            pending.emit(
                if answer.allow {
                    Decision::Allow
                } else {
                    Decision::Deny
                },
                answer.scope,
                &answer.by,
            );
            let who = format!("the operator via {} at {}", answer.by, answer.at);
            if !answer.allow {
                return refuse(
                    operator_denial(answer.note.as_deref()),
                    format!("{line}; denied by {who}"),
                );
            }
            let scope = remember(session, &answer, offer.as_deref(), &asked_id);
            Gate::Run {
                line: format!("{line}; allowed by {who} ({scope})"),
                network,
            }
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

/// The session's PERMISSION_RESOLVED of one request (for whoever reads
/// the session's events; the bridge hears the queue itself): sent with
/// the answer, or — when the waiting call is dropped first (interrupted) —
/// as a denial `by` "withdrawn".
struct Resolution<'a> {
    session: &'a Session,
    id: String,
    call_id: String,
    answered: bool,
}

impl Resolution<'_> {
    fn emit(&self, decision: Decision, scope: Scope, by: &str) {
        self.session
            .emit(EventData::PermissionResolved(ed::PermissionResolved {
                id: self.id.clone(),
                call_id: self.call_id.clone(),
                decision,
                scope,
                by: by.to_string(),
            }));
    }
}

impl Drop for Resolution<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.emit(Decision::Deny, Scope::Once, "withdrawn");
        }
    }
}

/// The yeses to offer: this call; where one rule can say what the call
/// is, that rule for the conversation, and — when there is an operator's
/// file to write it to — for this workspace from now on.
fn scope_offers(offer: Option<&str>, remember_in: Option<&Path>) -> Vec<ScopeOffer> {
    let mut offers = vec![ScopeOffer {
        scope: Scope::Once,
        allows: "this call".into(),
        rule: None,
    }];
    if let Some(offer) = offer {
        offers.push(ScopeOffer {
            scope: Scope::Session,
            allows: format!("{offer} for the rest of this conversation"),
            rule: Some(offer.to_string()),
        });
        if let Some(file) = remember_in {
            offers.push(ScopeOffer {
                scope: Scope::Workspace,
                allows: format!(
                    "{offer} from now on in this workspace (an allow rule written to {})",
                    file.display()
                ),
                rule: Some(offer.to_string()),
            });
        }
    }
    offers
}

/// Keep what a yes reaches beyond this call: a conversation's answer in
/// the session's rules, a workspace's in the operator's file (and in the
/// session's rules, since this session read the file before). A scope
/// that was not offered is a yes for this call. The scope, in words.
fn remember(session: &Session, answer: &Answer, offer: Option<&str>, asked_id: &str) -> String {
    let Some(offer) = offer else {
        return "once".into();
    };
    let label = format!("the operator's answer to {asked_id} via {}", answer.by);
    let keep = |rules: crate::approvals::Rules| {
        if let Ok(mut granted) = session.granted.lock() {
            granted.extend(rules);
        }
    };
    match (answer.scope, &session.config.remember_in) {
        (Scope::Session, _) => {
            if let Ok(rules) = rules_from_flags(&[offer.to_string()]) {
                keep(rules.relabel(&label));
            }
            format!("{offer} for this conversation")
        }
        (Scope::Workspace, Some(file)) => {
            let why = format!(
                "allowed always in this workspace by {label} at {}",
                answer.at
            );
            match crate::config::remembered::remember_rule(file, offer, &session.workspace, &why) {
                Ok(rule) => {
                    let at = rule.at.clone();
                    keep(crate::approvals::Rules::from_rules(vec![rule]));
                    format!("{offer} always in this workspace: rule written at {at}")
                }
                Err(err) => {
                    session.warn(&format!("the rule for {offer} could not be written: {err}"));
                    format!("once; the rule for {offer} could not be written: {err}")
                }
            }
        }
        _ => "once".into(),
    }
}
