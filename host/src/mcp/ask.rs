//! Asking the MCP client: for `mcp serve`, the client is the operator. A
//! call the approval rules say to ask about is put to the client as an
//! elicitation (a form: allow this call?, and a note for a denial), when
//! the client declared it can answer one; otherwise it is refused with
//! what would allow it, as in `run`.

use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};

use crate::approvals::Reach;
use crate::pipeline::Asked;

/// How long the client has to answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// Who answers through this channel, as receipts name it.
pub const VIA: &str = "mcp client";

/// Ask the client behind `peer` whether `tool` may run; `what` is the
/// call in a line, `why` the rule or mode that asks, `sandbox` where it
/// would run. None: the client cannot be asked (no form elicitation). A
/// yes reaches this call only.
pub async fn ask_client(
    peer: &Peer<RoleServer>,
    tool: &str,
    what: &str,
    why: &str,
    sandbox: &str,
) -> Option<Asked> {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let Ok(schema) = serde_json::from_value::<ElicitationSchema>(serde_json::json!({
        "type": "object",
        "properties": {
            "allow": {"type": "boolean", "title": "Allow this call once?", "default": false},
            "note": {"type": "string", "title": "Note for the model (with a denial)"}
        },
        "required": ["allow"]
    })) else {
        return None;
    };
    let message = format!(
        "sandcrab asks before running {tool}: {what}\nwhy: {why}\nit would run under the {sandbox} sandbox"
    );
    let answer = peer
        .create_elicitation_with_timeout(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            },
            Some(ASK_TIMEOUT),
        )
        .await;
    let at = crate::time::now_rfc3339();
    let denied = |note: Option<String>, at: String| Asked::Denied {
        via: VIA.into(),
        at,
        note,
    };
    Some(match answer {
        Ok(result) if result.action == ElicitationAction::Accept => {
            let content = result.content.unwrap_or_default();
            let note = content["note"]
                .as_str()
                .filter(|n| !n.trim().is_empty())
                .map(|n| n.chars().take(crate::approvals::MAX_NOTE_CHARS).collect());
            if content["allow"].as_bool() == Some(true) {
                Asked::Allowed {
                    via: VIA.into(),
                    at,
                    reach: Reach::Once,
                }
            } else {
                denied(note, at)
            }
        }
        Ok(_) => denied(None, at),
        Err(err) => denied(Some(format!("the client did not answer: {err}")), at),
    })
}
