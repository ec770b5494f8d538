//! A call waiting for approval, put to the editor as ACP's
//! `session/request_permission`. The options are sandcrab's own words for
//! what each yes allows; what the host knows for certain (the tool, the
//! sandbox, the rule that asks, each option's scope) travels in `_meta`
//! apart from what the model wrote (the call's arguments). Only an answer
//! that names an option offered for this very request allows anything:
//! an unknown option, a cancelled question, an error or a vanished client
//! is a denial.

use serde_json::{Value, json};

use super::updates::tool_kind;
use crate::approvals::{Answer, PermissionRequest, Scope};

/// Who answered, as receipts name it.
pub const VIA: &str = "acp";

const DENY: &str = "deny";

fn option_id(scope: Scope) -> &'static str {
    match scope {
        Scope::Once => "allow-once",
        Scope::Session => "allow-conversation",
        Scope::Workspace => "allow-workspace",
    }
}

/// The params of `session/request_permission` for `request`.
pub fn params(session_id: &str, request: &PermissionRequest) -> Value {
    let mut options: Vec<Value> = request
        .scopes
        .iter()
        .map(|offer| {
            json!({
                "optionId": option_id(offer.scope),
                "name": format!("Allow {}", one_line(&offer.allows)),
                "kind": if offer.scope == Scope::Once { "allow_once" } else { "allow_always" },
                "_meta": {"sandcrab": {"scope": offer.scope, "rule": offer.rule}},
            })
        })
        .collect();
    options.push(json!({"optionId": DENY, "name": "Deny", "kind": "reject_once"}));
    let mut content =
        vec![json!({"type": "content", "content": {"type": "text", "text": request.preview}})];
    if let Some(diff) = &request.diff {
        content.push(json!({"type": "content", "content": {"type": "text", "text": diff}}));
    }
    json!({
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": request.call_id,
            "title": request.tool,
            "kind": tool_kind(&request.tool),
            "status": "pending",
            "rawInput": request.arguments,
            "content": content,
        },
        "options": options,
        "_meta": {"sandcrab": {
            "requestId": request.id,
            "tool": request.tool,
            "from": request.from,
            "sandbox": request.sandbox,
            "network": request.network,
            "reason": request.reason,
            "form": request.form,
        }},
    })
}

/// `text` on one line of at most 200 characters (an option's name quotes
/// the model's command, which may hold anything).
fn one_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if text.chars().count() > 200 {
        format!("{line}…")
    } else {
        line
    }
}

/// A no from the editor, with `note` for the model.
pub fn deny(note: Option<String>) -> Answer {
    Answer {
        allow: false,
        scope: Scope::Once,
        note,
        by: VIA.into(),
        at: crate::time::now_rfc3339(),
        content: None,
    }
}

/// The answer the client's `outcome` gives `request` (anything but an
/// offered option is a denial).
pub fn answer(outcome: Result<&Value, String>, request: &PermissionRequest) -> Answer {
    let outcome = match outcome {
        Ok(result) => &result["outcome"],
        Err(why) => return deny(Some(format!("the editor did not answer: {why}"))),
    };
    if outcome["outcome"] != "selected" {
        return deny(Some("the editor cancelled the question".into()));
    }
    let chosen = outcome["optionId"].as_str().unwrap_or_default();
    match request.scopes.iter().find(|o| option_id(o.scope) == chosen) {
        Some(offer) => Answer {
            allow: true,
            scope: offer.scope,
            note: None,
            by: VIA.into(),
            at: crate::time::now_rfc3339(),
            content: None,
        },
        None if chosen == DENY => deny(None),
        None => deny(Some(format!(
            "the editor chose '{}', which was not offered",
            chosen.chars().take(80).collect::<String>()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::ScopeOffer;

    fn request() -> PermissionRequest {
        PermissionRequest {
            id: "r1".into(),
            session_id: "s".into(),
            root_session_id: "s".into(),
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"command": "git push"}),
            from: "agent".into(),
            preview: "git push".into(),
            diff: None,
            sandbox: "workspace-write".into(),
            network: false,
            reason: "mode on-risk".into(),
            scopes: vec![
                ScopeOffer {
                    scope: Scope::Once,
                    allows: "this call".into(),
                    rule: None,
                },
                ScopeOffer {
                    scope: Scope::Session,
                    allows: "shell:git push for this conversation".into(),
                    rule: Some("shell:git push".into()),
                },
            ],
            form: None,
        }
    }

    fn chosen(id: &str) -> Value {
        json!({"outcome": {"outcome": "selected", "optionId": id}})
    }

    #[test]
    fn only_an_offered_option_allows_and_only_as_far_as_it_reaches() {
        let r = request();
        let offered: Vec<String> = params("s", &r)["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["optionId"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(offered, ["allow-once", "allow-conversation", "deny"]);
        let once = answer(Ok(&chosen("allow-once")), &r);
        assert!(once.allow && once.scope == Scope::Once && once.by == VIA);
        let conversation = answer(Ok(&chosen("allow-conversation")), &r);
        assert!(conversation.allow && conversation.scope == Scope::Session);
        // Not offered here (no workspace scope), forged, cancelled, failed.
        for outcome in [
            chosen("allow-workspace"),
            chosen("allow"),
            json!({"outcome": {"outcome": "cancelled"}}),
            json!({"outcome": "selected"}),
            json!(null),
        ] {
            assert!(!answer(Ok(&outcome), &r).allow, "{outcome}");
        }
        assert!(!answer(Err("gone".into()), &r).allow);
        assert!(!answer(Ok(&chosen("deny")), &r).allow);
    }
}
