//! The hook stages of the call path: PreToolUse before the approval (it
//! may refuse the call, rewrite its arguments, let it through or have the
//! operator asked), PermissionRequest and Notification when the operator
//! is about to be asked, PostToolUse after the run (it may tell the model
//! something). Each hook's run is a record on the call's receipt.

use serde_json::{Map, Value, json};

use super::front::CallFront;
use crate::approvals::DecidedBy;
use crate::hooks::{Decided, Fired, HookEvent};
use crate::tools::{HookRecord, PreparedCall, ToolOutcome, ToolStatus};

/// What the hooks said of a call, gathered as it goes.
#[derive(Debug, Default)]
pub(super) struct HookNotes {
    pub records: Vec<HookRecord>,
    /// PreToolUse's allow or ask, and which hook said it.
    pub decided: Option<(Decided, DecidedBy)>,
}

/// What PreToolUse made of a call.
pub(super) enum Before {
    /// Go on (with these arguments, when a hook rewrote them).
    Go(Option<PreparedCall>),
    /// Refused, with this outcome.
    Refused(ToolOutcome),
}

/// The fields a tool event's input adds about `call`, its paths taken
/// from `cwd`.
fn tool_fields(call: &PreparedCall, cwd: &std::path::Path) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("tool_name".into(), Value::String(call.name.clone()));
    fields.insert(
        "tool_input".into(),
        crate::hooks::tool_input(&call.arguments_or_empty(), cwd),
    );
    fields.insert("tool_use_id".into(), Value::String(call.id.clone()));
    fields
}

/// Fire `event` for `call` with `more` fields (besides the call's own,
/// for a tool event), noting the records and telling the operator what
/// the hooks warn of.
async fn fire(
    front: &dyn CallFront,
    event: HookEvent,
    call: &PreparedCall,
    more: Map<String, Value>,
    notes: &mut HookNotes,
) -> Option<Fired> {
    let scene = front.hooks()?;
    if !scene.hooks.has(event) {
        return None;
    }
    let (name, mut fields) = if event.matches_tools() {
        (Some(call.name.as_str()), tool_fields(call, scene.facts.cwd))
    } else {
        (None, Map::new())
    };
    fields.extend(more);
    let fired = scene.hooks.fire(event, name, &scene.facts, fields).await;
    for warning in &fired.warnings {
        front.warn(warning);
    }
    notes.records.extend(fired.records.iter().cloned());
    Some(fired)
}

/// Who made `fired`'s decision, for the approval record.
fn decided_by(fired: &Fired, event: HookEvent) -> DecidedBy {
    let verdict = fired.answer.decision.map(Decided::verdict);
    let command = fired
        .records
        .iter()
        .find(|r| Some(r.verdict) == verdict)
        // A guard that could not judge refused as a deny.
        .or_else(|| fired.records.iter().find(|r| r.verdict.is_failure()))
        .map(|r| r.command.clone())
        .unwrap_or_default();
    DecidedBy::Hook {
        event: event.name().to_string(),
        command,
    }
}

/// PreToolUse.
pub(super) async fn before(
    front: &dyn CallFront,
    call: &PreparedCall,
    notes: &mut HookNotes,
) -> Before {
    let Some(fired) = fire(front, HookEvent::PreToolUse, call, Map::new(), notes).await else {
        return Before::Go(None);
    };
    let answer = &fired.answer;
    match answer.decision {
        Some(Decided::Deny) => {
            let reason = answer.reason.clone().unwrap_or_default();
            return Before::Refused(ToolOutcome::with_status(
                ToolStatus::Denied,
                format!("Refused by a PreToolUse hook: {reason}"),
            ));
        }
        Some(d) => notes.decided = Some((d, decided_by(&fired, HookEvent::PreToolUse))),
        None => {}
    }
    if let Some(reason) = &answer.stop {
        front.stop_turn(reason);
        return Before::Refused(ToolOutcome::with_status(
            ToolStatus::Denied,
            format!("Stopped by a PreToolUse hook: {reason}"),
        ));
    }
    Before::Go(
        answer
            .updated_input
            .as_ref()
            .and_then(|args| front.reprepare(call, args)),
    )
}

/// What a PermissionRequest hook answered instead of the operator.
pub(super) struct Permission {
    pub decided: Decided,
    pub by: DecidedBy,
    pub reason: Option<String>,
    /// The call as the hook rewrote it (to be judged again).
    pub rewritten: Option<PreparedCall>,
}

/// PermissionRequest (and Notification) before the operator is asked: a
/// hook's allow or deny answers instead of the operator; `continue:
/// false` refuses the call and ends the turn.
pub(super) async fn permission(
    front: &dyn CallFront,
    call: &PreparedCall,
    notes: &mut HookNotes,
) -> Option<Permission> {
    let more = {
        let mut m = Map::new();
        m.insert("permission_suggestions".into(), json!([]));
        m
    };
    let fired = fire(front, HookEvent::PermissionRequest, call, more, notes).await;
    if let Some(fired) = fired {
        let by = || decided_by(&fired, HookEvent::PermissionRequest);
        if let Some(reason) = &fired.answer.stop {
            front.stop_turn(reason);
            return Some(Permission {
                decided: Decided::Deny,
                by: by(),
                reason: Some(reason.clone()),
                rewritten: None,
            });
        }
        if let Some(decided @ (Decided::Allow | Decided::Deny)) = fired.answer.decision {
            let rewritten = match (&fired.answer.updated_input, decided) {
                (Some(args), Decided::Allow) => match front.reprepare(call, args) {
                    Some(again) => Some(again),
                    // Allowed as rewritten, and it cannot be: refused.
                    None => {
                        return Some(Permission {
                            decided: Decided::Deny,
                            by: by(),
                            reason: Some("its rewritten arguments cannot be used here".into()),
                            rewritten: None,
                        });
                    }
                },
                _ => None,
            };
            return Some(Permission {
                decided,
                by: by(),
                reason: fired.answer.reason.clone(),
                rewritten,
            });
        }
    }
    let mut fields = Map::new();
    fields.insert(
        "message".into(),
        Value::String(format!(
            "sandcrab needs your permission to use {}",
            call.name
        )),
    );
    fields.insert("notification_type".into(), "permission_prompt".into());
    fire(front, HookEvent::Notification, call, fields, notes).await;
    None
}

/// PostToolUse: what a hook says about the result reaches the model with
/// it.
pub(super) async fn after(
    front: &dyn CallFront,
    call: &PreparedCall,
    outcome: &mut ToolOutcome,
    notes: &mut HookNotes,
) {
    let mut more = Map::new();
    more.insert(
        "tool_response".into(),
        json!({
            "content": outcome.content,
            "status": outcome.status.name(),
            "success": outcome.status == ToolStatus::Ok,
        }),
    );
    let Some(fired) = fire(front, HookEvent::PostToolUse, call, more, notes).await else {
        return;
    };
    let answer = fired.answer;
    if let Some(reason) = &answer.stop {
        front.stop_turn(reason);
    }
    if answer.decision == Some(Decided::Deny) {
        let reason = answer.reason.unwrap_or_default();
        outcome
            .content
            .push_str(&format!("\n\n[PostToolUse hook] {reason}"));
    }
    if let Some(context) = answer.context {
        outcome
            .content
            .push_str(&format!("\n\n[PostToolUse hook context] {context}"));
    }
}
