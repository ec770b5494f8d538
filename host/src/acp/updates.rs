//! What a session shows, as ACP `session/update`s: the model's text as
//! message chunks, each tool call with its kind, status, the places it
//! touches and what it returned (a file change as its unified diff), and
//! a stored history, replayed, as the same updates.

use serde_json::{Value, json};

use crate::agent::EventData;
use crate::agent::{Turn, TurnKind};
use crate::checkpoint::{ChangeKind, FileChange};

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
        EventData::AssistantReasoningDelta(delta) => {
            json!({"sessionUpdate": "agent_thought_chunk", "content": text(&delta.delta)})
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
            let mut content =
                vec![json!({"type": "content", "content": text(&shown_output(&end.output))})];
            for change in &end.changes {
                content.push(diff(change, workspace));
            }
            json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": end.call_id,
                "status": if end.is_error { "failed" } else { "completed" },
                "content": content,
                "rawOutput": {"receipt": end.receipt},
            })
        }
        EventData::Warning(warning) => json!({
            "sessionUpdate": "agent_message_chunk",
            "content": text(&format!("\n[sandcrab warning: {}]\n", warning.message)),
        }),
        EventData::Error(error) => json!({
            "sessionUpdate": "agent_message_chunk",
            "content": text(&format!("\n[sandcrab: {}]\n", error.message)),
        }),
        _ => return None,
    })
}

/// Most of a tool's output an editor is sent (the rest is in the store
/// and `sandcrab sessions show`).
const SHOWN_OUTPUT: usize = 64 * 1024;

/// Longest chunk of text joined while an editor does not read.
const LONGEST_CHUNK: usize = 1024 * 1024;

/// `output`, at most [`SHOWN_OUTPUT`] bytes of it (its start and end).
fn shown_output(output: &str) -> std::borrow::Cow<'_, str> {
    if output.len() <= SHOWN_OUTPUT {
        return output.into();
    }
    let head = output.floor_char_boundary(SHOWN_OUTPUT / 2);
    let tail = output.ceil_char_boundary(output.len() - SHOWN_OUTPUT / 2);
    format!(
        "{}\n[… {} bytes not shown here; the session's store keeps the whole output …]\n{}",
        &output[..head],
        tail - head,
        &output[tail..]
    )
    .into()
}

/// What waits to be sent to an editor, in order.
#[derive(Debug, Default)]
pub struct Waiting {
    queue: std::collections::VecDeque<Next>,
}

/// One thing to send: an update, or a barrier (whoever waits on it may
/// go once every update before it went).
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Update(Value),
    Barrier(u64),
}

impl Waiting {
    /// Queue `update`; a chunk of text following one of the same kind
    /// joins it.
    pub fn push(&mut self, update: Value) {
        let kind = update["sessionUpdate"].clone();
        let is_chunk = kind == "agent_message_chunk" || kind == "agent_thought_chunk";
        if is_chunk
            && let Some(Next::Update(last)) = self.queue.back_mut()
            && last["sessionUpdate"] == kind
            && let (Some(more), Some(Value::String(text))) = (
                update["content"]["text"].as_str(),
                last.pointer_mut("/content/text"),
            )
            && text.len() + more.len() <= LONGEST_CHUNK
        {
            text.push_str(more);
            return;
        }
        self.queue.push_back(Next::Update(update));
    }

    pub fn barrier(&mut self, id: u64) {
        self.queue.push_back(Next::Barrier(id));
    }

    pub fn pop(&mut self) -> Option<Next> {
        self.queue.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// A file change as an ACP diff: the changed parts of the file before
/// and after (the hunks of its unified diff, with their context; parts
/// apart are joined by a line `⋯`), or, for a binary file, its diff's
/// note as text.
pub fn diff(change: &FileChange, workspace: &std::path::Path) -> Value {
    if change.binary || change.diff.is_empty() {
        return json!({"type": "content", "content": text(&format!("{} ({:?})", change.path, change.kind))});
    }
    let (mut old, mut new) = (String::new(), String::new());
    let mut hunks = 0;
    for line in change.diff.lines() {
        if line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        if line.starts_with("@@") {
            if hunks > 0 {
                old.push_str("⋯\n");
                new.push_str("⋯\n");
            }
            hunks += 1;
            continue;
        }
        let mut chars = line.chars();
        let side = chars.next();
        let rest = chars.as_str();
        match side {
            Some('-') => {
                old.push_str(rest);
                old.push('\n');
            }
            Some('+') => {
                new.push_str(rest);
                new.push('\n');
            }
            Some(' ') => {
                for text in [&mut old, &mut new] {
                    text.push_str(rest);
                    text.push('\n');
                }
            }
            // "\ No newline at end of file", a note of a cut diff.
            _ => {}
        }
    }
    // No hunk: the diff is a note ("over N lines: not shown"), not a
    // change to show as one.
    if hunks == 0 {
        return json!({"type": "content", "content": text(&format!("{}: {}", change.path, change.diff))});
    }
    json!({
        "type": "diff",
        "path": workspace.join(&change.path).display().to_string(),
        "oldText": if change.kind == ChangeKind::Created { Value::Null } else { json!(old) },
        "newText": new,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_waiting_for_a_slow_editor_joins_into_one_chunk_and_order_holds() {
        let chunk = |kind: &str, t: &str| json!({"sessionUpdate": kind, "content": text(t)});
        let mut waiting = Waiting::default();
        for t in ["a", "b", "c"] {
            waiting.push(chunk("agent_message_chunk", t));
        }
        waiting.push(chunk("agent_thought_chunk", "x"));
        waiting.push(chunk("agent_message_chunk", "d"));
        waiting.barrier(7);
        let mut out = Vec::new();
        while let Some(next) = waiting.pop() {
            out.push(next);
        }
        assert_eq!(
            out,
            [
                Next::Update(chunk("agent_message_chunk", "abc")),
                Next::Update(chunk("agent_thought_chunk", "x")),
                Next::Update(chunk("agent_message_chunk", "d")),
                Next::Barrier(7),
            ]
        );
    }

    #[test]
    fn a_cut_diff_a_note_and_a_huge_output_show_without_a_panic() {
        let before = "line\n".repeat(30_000);
        let after = "other\n".repeat(30_000);
        let change =
            FileChange::between("big.txt", Some(before.as_bytes()), Some(after.as_bytes()))
                .unwrap();
        assert!(
            change.diff.contains('…'),
            "the diff was cut: {}",
            change.diff.len()
        );
        assert_eq!(diff(&change, std::path::Path::new("/w"))["type"], "diff");
        let mut note = change.clone();
        note.diff = "(over 100000 lines: not shown)".into();
        let shown = diff(&note, std::path::Path::new("/w"));
        assert_eq!(shown["type"], "content", "{shown}");
        let output = "é".repeat(100_000);
        let shown = shown_output(&output);
        assert!(shown.len() < SHOWN_OUTPUT + 200 && shown.contains("not shown here"));
    }

    #[test]
    fn a_change_becomes_an_acp_diff_of_its_hunks() {
        let before = "a\nb\nc\n".repeat(20);
        let after = before.replacen("b\n", "B\n", 1);
        let change =
            FileChange::between("src/x.txt", Some(before.as_bytes()), Some(after.as_bytes()))
                .unwrap();
        let diff = diff(&change, std::path::Path::new("/w"));
        assert_eq!(diff["type"], "diff");
        assert_eq!(diff["path"], "/w/src/x.txt");
        let (old, new) = (
            diff["oldText"].as_str().unwrap(),
            diff["newText"].as_str().unwrap(),
        );
        assert!(
            old.starts_with("a\nb\nc\n") && new.starts_with("a\nB\nc\n"),
            "{old:?} {new:?}"
        );
        let created = FileChange::between("new.txt", None, Some(b"hello\n")).unwrap();
        let diff = super::diff(&created, std::path::Path::new("/w"));
        assert!(diff["oldText"].is_null());
        assert_eq!(diff["newText"], "hello\n");
    }
}
