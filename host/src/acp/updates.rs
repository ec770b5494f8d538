//! What a session shows, as ACP `session/update`s: the model's text as
//! message chunks, each tool call with its kind, status, the places it
//! touches and what it returned (a file change as its unified diff), and
//! a stored history, replayed, as the same updates.

use serde_json::{Value, json};

use crate::agent::EventData;
use crate::agent::{Turn, TurnKind};

/// The ACP kind of a tool, by what it does.
pub fn tool_kind(tool: &str) -> &'static str {
    match tool {
        "read_file" | "list_dir" | "memory_read" => "read",
        "write_file" | "edit_file" | "apply_patch" => "edit",
        "grep" | "glob" | "find_files" => "search",
        "shell" | "exec" | "run_job" => "execute",
        "web_fetch" | "fetch" => "fetch",
        _ => "other",
    }
}

/// The files a call names, as ACP locations (absolute paths).
fn locations(arguments: &Value, workspace: &std::path::Path) -> Vec<Value> {
    ["file_path", "path"]
        .iter()
        .filter_map(|k| arguments.get(*k).and_then(Value::as_str))
        .map(|p| json!({"path": workspace.join(p).display().to_string()}))
        .collect()
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The update for one session event, if it shows as one.
pub fn for_event(data: &EventData, workspace: &std::path::Path) -> Option<Value> {
    Some(match data {
        EventData::AssistantTextDelta(delta) => {
            json!({"sessionUpdate": "agent_message_chunk", "content": text(&delta.delta)})
        }
        EventData::ToolCallStart(call) => json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call.call_id,
            "title": call.name,
            "kind": tool_kind(&call.name),
            "status": "in_progress",
            "rawInput": call.arguments,
            "locations": locations(&call.arguments, workspace),
        }),
        EventData::ToolCallEnd(end) => {
            let mut content = vec![json!({"type": "content", "content": text(&end.output)})];
            for change in &end.changes {
                content.push(json!({"type": "content", "content": text(&change.diff)}));
            }
            json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": end.call_id,
                "status": if end.is_error { "failed" } else { "completed" },
                "content": content,
                "rawOutput": {"receipt": end.receipt},
            })
        }
        EventData::Error(error) => json!({
            "sessionUpdate": "agent_message_chunk",
            "content": text(&format!("\n[sandcrab: {}]\n", error.message)),
        }),
        _ => return None,
    })
}

/// A stored history as the updates that show it again.
pub fn for_history(history: &[Turn]) -> Vec<Value> {
    let mut updates = Vec::new();
    for turn in history {
        match &turn.kind {
            TurnKind::User { text: said } => {
                updates.push(json!({"sessionUpdate": "user_message_chunk", "content": text(said)}))
            }
            TurnKind::Assistant {
                text: said,
                tool_calls,
                ..
            } => {
                if !said.is_empty() {
                    updates.push(
                        json!({"sessionUpdate": "agent_message_chunk", "content": text(said)}),
                    );
                }
                for call in tool_calls {
                    updates.push(json!({
                        "sessionUpdate": "tool_call",
                        "toolCallId": call.id,
                        "title": call.name,
                        "kind": tool_kind(&call.name),
                        "status": "pending",
                        "rawInput": call.arguments,
                    }));
                }
            }
            TurnKind::ToolResults { results } => {
                for result in results {
                    updates.push(json!({
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": result.call_id,
                        "status": if result.is_error { "failed" } else { "completed" },
                        "content": [{"type": "content", "content": text(&result.content)}],
                    }));
                }
            }
            TurnKind::Steering { .. } | TurnKind::System { .. } => {}
        }
    }
    updates
}
