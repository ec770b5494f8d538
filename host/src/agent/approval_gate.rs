//! Asking the operator about a call the rules say to ask about: through
//! the session's queue (the terminal, the bridge), with the events that
//! tell whoever watches, and keeping how far a yes reaches (this
//! conversation, or a rule written for this workspace).

use std::path::Path;

use super::event_data::{self as ed, EventData};
use super::session::Session;
use crate::approvals::{
    Answer, ApprovalRecord, Decision, PermissionRequest, Reach, Scope, ScopeOffer, Subject,
    describe_call, edit_diff, rules_from_flags, suggestion,
};
use crate::pipeline::Asked;
use crate::tools::PreparedCall;

/// Put `call` to the operator through the session's queue (None: nobody
/// to ask), and keep how far a yes reaches.
pub(super) async fn ask(
    session: &Session,
    call: &PreparedCall,
    subject: &Subject,
    judged: &ApprovalRecord,
) -> Option<Asked> {
    let queue = session.config.asker.as_ref()?;
    let offer = suggestion(subject);
    let remember_in = session.config.remember_in.as_ref();
    let request = PermissionRequest {
        id: String::new(),
        session_id: session.id.clone(),
        root_session_id: session.asking_root(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone().unwrap_or_else(|_| call.raw.clone()),
        from: if session.depth == 0 {
            "agent".into()
        } else {
            format!("subagent {}", session.id)
        },
        preview: describe_call(subject),
        diff: edit_diff(call, &session.workspace),
        sandbox: call.standing.mode.to_string(),
        network: call.asks_network,
        reason: judged.verdict_line(),
        scopes: scope_offers(offer.as_deref(), remember_in.map(|f| f.as_path())),
        form: None,
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
    let decision = if answer.allow {
        Decision::Allow
    } else {
        Decision::Deny
    };
    pending.emit(decision, answer.scope, &answer.by);
    if !answer.allow {
        return Some(Asked::Denied {
            via: answer.by.clone(),
            at: answer.at.clone(),
            note: answer.note.clone(),
        });
    }
    let reach = remember(session, &answer, offer.as_deref(), &asked_id);
    Some(Asked::Allowed {
        via: answer.by.clone(),
        at: answer.at.clone(),
        reach,
    })
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
/// that was not offered is a yes for this call.
fn remember(session: &Session, answer: &Answer, offer: Option<&str>, asked_id: &str) -> Reach {
    let Some(offer) = offer else {
        return Reach::Once;
    };
    let label = format!("the operator's answer to {asked_id} via {}", answer.by);
    let keep = |rules: crate::approvals::Rules| {
        if let Ok(mut granted) = session.granted.lock() {
            granted.extend(rules);
        }
    };
    let rule = offer.to_string();
    match (answer.scope, &session.config.remember_in) {
        (Scope::Session, _) => match rules_from_flags(std::slice::from_ref(&rule)) {
            Ok(rules) => {
                keep(rules.relabel(&label));
                Reach::Conversation { rule }
            }
            // An offer no rule can say (a path outside the workspace):
            // this call only, and said so.
            Err(err) => {
                session.warn(&format!("the rule {offer} cannot be kept: {err}"));
                Reach::Unwritten {
                    rule,
                    error: err.to_string(),
                }
            }
        },
        (Scope::Workspace, Some(file)) => {
            let why = format!(
                "allowed always in this workspace by {label} at {}",
                answer.at
            );
            match crate::config::remembered::remember_rule(file, offer, &session.workspace, &why) {
                Ok(written) => {
                    let written_at = written.at.clone();
                    keep(crate::approvals::Rules::from_rules(vec![written]));
                    Reach::Workspace { rule, written_at }
                }
                Err(err) => {
                    session.warn(&format!("the rule for {offer} could not be written: {err}"));
                    Reach::Unwritten {
                        rule,
                        error: err.to_string(),
                    }
                }
            }
        }
        _ => Reach::Once,
    }
}
