//! What a hook answered, read by Claude Code's contract: exit code 0 with
//! optional JSON on stdout, exit code 2 to block (its stderr is the
//! reason), anything else a failure. JSON fields: `continue`/`stopReason`,
//! `decision` (`block`, or the older `approve`), `reason`,
//! `systemMessage`, and `hookSpecificOutput` (`permissionDecision`
//! allow/deny/ask with `permissionDecisionReason`, `updatedInput`,
//! `additionalContext`, and for PermissionRequest `decision.behavior`).

use serde_json::Value;

use super::settings::HookEvent;
use crate::tools::HookVerdict;

/// Most bytes of a reason or a context taken from one hook.
const MAX_TEXT: usize = 16 * 1024;

/// What one hook said (or all of an event's hooks, combined; as a
/// recording keeps it).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct HookAnswer {
    /// Its decision (None: it ran and decided nothing).
    pub decision: Option<Decided>,
    /// Why (for the model and the operator).
    pub reason: Option<String>,
    /// Context for the model.
    pub context: Option<String>,
    /// The tool call's arguments as the hook rewrote them.
    pub updated_input: Option<Value>,
    /// `continue: false`: stop the session's turn, with this reason.
    pub stop: Option<String>,
    /// A message for the operator.
    pub system_message: Option<String>,
    /// It could not be read as an answer: crashed, timed out, garbage.
    pub failure: Option<String>,
}

/// A hook's decision.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Decided {
    Allow,
    Ask,
    /// Deny a tool call, or block what the event is about.
    Deny,
}

impl Decided {
    /// As a receipt says it.
    pub fn verdict(self) -> HookVerdict {
        match self {
            Decided::Allow => HookVerdict::Allow,
            Decided::Ask => HookVerdict::Ask,
            Decided::Deny => HookVerdict::Deny,
        }
    }
}

/// How the hook's program ended.
#[derive(Debug, Clone)]
pub struct Ended<'a> {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: &'a [u8],
    pub stderr: &'a [u8],
}

/// Read what a hook of `event` answered when it ended as `ended`.
pub fn read(event: HookEvent, ended: &Ended<'_>) -> HookAnswer {
    let stderr = clip(String::from_utf8_lossy(ended.stderr).trim());
    let stdout = String::from_utf8_lossy(ended.stdout);
    let stdout = stdout.trim();
    if ended.timed_out {
        return failed("it timed out");
    }
    match ended.exit_code {
        Some(0) => {}
        Some(2) => {
            return HookAnswer {
                decision: Some(Decided::Deny),
                reason: Some(if stderr.is_empty() {
                    format!("blocked by a {event} hook")
                } else {
                    stderr
                }),
                ..Default::default()
            };
        }
        Some(code) => return failed(&with_stderr(format!("it exited with {code}"), &stderr)),
        None => return failed(&with_stderr("it was killed by a signal".into(), &stderr)),
    }
    if stdout.starts_with('{') {
        return match serde_json::from_str::<Value>(stdout) {
            Ok(json) => from_json(event, &json).unwrap_or_else(|why| failed(&why)),
            Err(e) => failed(&format!("its output is not valid JSON ({e})")),
        };
    }
    // Plain text: context where the contract says so.
    let mut answer = HookAnswer::default();
    if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart) && !stdout.is_empty()
    {
        answer.context = Some(clip(stdout));
    }
    answer
}

fn failed(why: &str) -> HookAnswer {
    HookAnswer {
        failure: Some(why.to_string()),
        ..Default::default()
    }
}

fn with_stderr(what: String, stderr: &str) -> String {
    if stderr.is_empty() {
        what
    } else {
        format!("{what}: {stderr}")
    }
}

fn clip(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &text[..end], text.len() - end)
}

/// A text field, if present (a field of the wrong type is garbage).
fn text(json: &Value, key: &str) -> Result<Option<String>, String> {
    match json.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(clip(s))),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

fn from_json(event: HookEvent, json: &Value) -> Result<HookAnswer, String> {
    let mut answer = HookAnswer {
        reason: text(json, "reason")?,
        system_message: text(json, "systemMessage")?,
        ..Default::default()
    };
    match json.get("continue") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            answer.stop = Some(
                text(json, "stopReason")?.unwrap_or_else(|| format!("stopped by a {event} hook")),
            )
        }
        Some(other) => return Err(format!("`continue` must be true or false, not {other}")),
    }
    answer.decision = match text(json, "decision")?.as_deref() {
        None => None,
        Some("block") => Some(Decided::Deny),
        Some("approve") => Some(Decided::Allow),
        Some(other) => {
            return Err(format!(
                "`decision` must be \"block\" (or \"approve\"), not \"{other}\""
            ));
        }
    };
    if let Some(specific) = json.get("hookSpecificOutput").filter(|v| !v.is_null()) {
        specific_output(event, specific, &mut answer)?;
    }
    Ok(answer)
}

fn specific_output(
    event: HookEvent,
    specific: &Value,
    answer: &mut HookAnswer,
) -> Result<(), String> {
    if !specific.is_object() {
        return Err("`hookSpecificOutput` must be an object".into());
    }
    if let Some(named) = text(specific, "hookEventName")?
        && named != event.name()
    {
        return Err(format!(
            "`hookSpecificOutput.hookEventName` is \"{named}\" in the answer to a {event} hook"
        ));
    }
    if let Some(context) = text(specific, "additionalContext")? {
        answer.context = Some(context);
    }
    if let Some(decision) = text(specific, "permissionDecision")? {
        answer.decision = Some(match decision.as_str() {
            "allow" => Decided::Allow,
            "deny" => Decided::Deny,
            "ask" => Decided::Ask,
            other => {
                return Err(format!(
                    "`permissionDecision` must be allow, deny or ask, not \"{other}\""
                ));
            }
        });
        if let Some(reason) = text(specific, "permissionDecisionReason")? {
            answer.reason = Some(reason);
        }
    }
    answer.updated_input = input(specific)?.or(answer.updated_input.take());
    if let Some(decision) = specific.get("decision").filter(|v| !v.is_null()) {
        // PermissionRequest: {behavior, message, updatedInput}.
        answer.decision = Some(match text(decision, "behavior")?.as_deref() {
            Some("allow") => Decided::Allow,
            Some("deny") => Decided::Deny,
            other => {
                return Err(format!(
                    "`decision.behavior` must be allow or deny, not {other:?}"
                ));
            }
        });
        if let Some(message) = text(decision, "message")? {
            answer.reason = Some(message);
        }
        answer.updated_input = input(decision)?.or(answer.updated_input.take());
    }
    Ok(())
}

fn input(json: &Value) -> Result<Option<Value>, String> {
    match json.get("updatedInput") {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
        Some(_) => Err("`updatedInput` must be an object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(code: i32, stdout: &str, stderr: &str) -> HookAnswer {
        read(
            HookEvent::PreToolUse,
            &Ended {
                exit_code: Some(code),
                timed_out: false,
                stdout: stdout.as_bytes(),
                stderr: stderr.as_bytes(),
            },
        )
    }

    #[test]
    fn exit_codes_and_json_answers_read_as_the_contract_says() {
        assert_eq!(ended(0, "", ""), HookAnswer::default());
        let blocked = ended(2, "", "no rm -rf here");
        assert_eq!(blocked.decision, Some(Decided::Deny));
        assert_eq!(blocked.reason.as_deref(), Some("no rm -rf here"));
        assert!(
            ended(1, "", "boom")
                .failure
                .unwrap()
                .contains("exited with 1: boom")
        );
        let json = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not that","updatedInput":{"command":"ls"}}}"#;
        let answer = ended(0, json, "");
        assert_eq!(answer.decision, Some(Decided::Deny));
        assert_eq!(answer.reason.as_deref(), Some("not that"));
        assert_eq!(answer.updated_input.unwrap()["command"], "ls");
        let old = ended(0, r#"{"decision":"approve","reason":"fine"}"#, "");
        assert_eq!(old.decision, Some(Decided::Allow));
        let stop = ended(0, r#"{"continue":false,"stopReason":"enough"}"#, "");
        assert_eq!(stop.stop.as_deref(), Some("enough"));
        // Garbage is a failure, never a silent yes.
        assert!(ended(0, "{not json", "").failure.is_some());
        assert!(
            ended(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"maybe"}}"#,
                ""
            )
            .failure
            .is_some()
        );
        assert!(ended(0, r#"{"decision":"yes"}"#, "").failure.is_some());
        // Plain text is context only where the contract says so.
        let context = read(
            HookEvent::UserPromptSubmit,
            &Ended {
                exit_code: Some(0),
                timed_out: false,
                stdout: b"branch: main\n",
                stderr: b"",
            },
        );
        assert_eq!(context.context.as_deref(), Some("branch: main"));
        assert_eq!(ended(0, "hello", ""), HookAnswer::default());
        let permission = read(
            HookEvent::PermissionRequest,
            &Ended {
                exit_code: Some(0),
                timed_out: false,
                stdout: br#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"no"}}}"#,
                stderr: b"",
            },
        );
        assert_eq!(permission.decision, Some(Decided::Deny));
        assert_eq!(permission.reason.as_deref(), Some("no"));
    }
}
