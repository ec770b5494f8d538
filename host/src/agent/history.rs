//! The one invariant that keeps a conversation valid for every provider:
//! each tool call of an assistant turn is answered by exactly one result,
//! in the turn right after it, in call order. Checked (and repaired)
//! before every model request, so no path — an interrupt, a crash in the
//! middle of a round, a bug — can send a history a provider rejects.

use super::turns::{ToolResult, Turn, TurnKind};

/// Stands first when what is kept of a compacted conversation starts
/// with the model's turn (providers want the operator's first).
pub const EARLIER_TURNS: &str =
    "(The conversation before this point is summarized above; it continues here.)";

/// The result recorded for a call that never finished.
pub const INTERRUPTED: &str =
    "[interrupted by the user before this tool call finished; its effects, if any, are unknown]";

/// Make `turns` valid: every assistant turn with tool calls is followed by
/// one tool-results turn answering exactly those calls, in order (missing
/// answers become [`INTERRUPTED`] errors; answers to unknown calls and
/// duplicates are dropped). Returns how many results were added.
pub fn repair(turns: &mut Vec<Turn>) -> usize {
    let mut added = 0;
    let mut i = 0;
    while i < turns.len() {
        let calls = match &turns[i].kind {
            TurnKind::Assistant { tool_calls, .. } if !tool_calls.is_empty() => tool_calls.clone(),
            TurnKind::ToolResults { .. } => {
                // Results not right after the calls they answer.
                turns.remove(i);
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let given = match turns.get(i + 1).map(|t| &t.kind) {
            Some(TurnKind::ToolResults { results }) => Some(results.clone()),
            _ => None,
        };
        let given = given.unwrap_or_default();
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|call| {
                given
                    .iter()
                    .find(|r| r.call_id == call.id)
                    .cloned()
                    .unwrap_or_else(|| {
                        added += 1;
                        ToolResult {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            content: INTERRUPTED.to_string(),
                            is_error: true,
                            receipt: None,
                        }
                    })
            })
            .collect();
        let valid = results.len() == given.len()
            && results
                .iter()
                .zip(&given)
                .all(|(a, b)| a.call_id == b.call_id);
        match turns.get_mut(i + 1) {
            Some(Turn {
                kind: TurnKind::ToolResults { results: existing },
                ..
            }) => {
                if !valid {
                    *existing = results;
                }
            }
            _ => turns.insert(i + 1, Turn::new(TurnKind::ToolResults { results })),
        }
        i += 2;
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: json!({}),
            signature: None,
        }
    }

    fn assistant(ids: &[&str]) -> Turn {
        Turn::new(TurnKind::Assistant {
            text: String::new(),
            tool_calls: ids.iter().map(|i| call(i)).collect(),
            reasoning: None,
            usage: Default::default(),
        })
    }

    fn results(ids: &[&str]) -> Turn {
        Turn::new(TurnKind::ToolResults {
            results: ids
                .iter()
                .map(|i| ToolResult {
                    call_id: i.to_string(),
                    name: "t".into(),
                    content: format!("ok {i}"),
                    is_error: false,
                    receipt: None,
                })
                .collect(),
        })
    }

    fn shape(turns: &[Turn]) -> Vec<String> {
        turns
            .iter()
            .map(|t| match &t.kind {
                TurnKind::Assistant { tool_calls, .. } => format!(
                    "A[{}]",
                    tool_calls
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                TurnKind::ToolResults { results } => format!(
                    "R[{}]",
                    results
                        .iter()
                        .map(|r| if r.content == INTERRUPTED {
                            format!("{}!", r.call_id)
                        } else {
                            r.call_id.clone()
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                TurnKind::User { .. } => "U".into(),
                _ => "?".into(),
            })
            .collect()
    }

    #[test]
    fn interrupted_rounds_get_a_result_per_unanswered_call() {
        let user = || Turn::new(TurnKind::User { text: "x".into() });
        let mut turns = vec![user(), assistant(&["a", "b"]), user()];
        assert_eq!(repair(&mut turns), 2);
        assert_eq!(shape(&turns), ["U", "A[a,b]", "R[a!,b!]", "U"]);

        // A partial round keeps what finished, in call order.
        let mut turns = vec![user(), assistant(&["a", "b", "c"]), results(&["c", "a"])];
        assert_eq!(repair(&mut turns), 1);
        assert_eq!(shape(&turns), ["U", "A[a,b,c]", "R[a,b!,c]"]);

        // Stray and duplicate results go.
        let mut turns = vec![
            user(),
            results(&["z"]),
            assistant(&["a"]),
            results(&["a", "a", "q"]),
        ];
        repair(&mut turns);
        assert_eq!(shape(&turns), ["U", "A[a]", "R[a]"]);

        // A valid history is left alone.
        let mut turns = vec![user(), assistant(&["a"]), results(&["a"]), user()];
        let before = shape(&turns);
        assert_eq!(repair(&mut turns), 0);
        assert_eq!(shape(&turns), before);
    }
}
