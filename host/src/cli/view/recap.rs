//! The last exchanges of a resumed conversation, drawn before its prompt:
//! what was asked (a few lines each), what the model answered (its
//! Markdown), and the tools it called, one row each.

use super::markdown::Markdown;
use super::style::{Look, Style, Styled, cut_to};
use crate::agent::{Turn, TurnKind};

/// Exchanges shown.
const EXCHANGES: usize = 3;
/// Lines of an input shown.
const INPUT_LINES: usize = 6;
/// Lines of an answer shown.
const ANSWER_LINES: usize = 16;

/// The last [`EXCHANGES`] exchanges of `history` (nothing when it has no
/// input yet), under a header naming how many there are in all.
pub fn recap(history: &[Turn], look: Look, session_id: &str) -> Styled {
    let mut out = Styled::new(look.color);
    let inputs: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, t)| matches!(t.kind, TurnKind::User { .. }))
        .map(|(i, _)| i)
        .collect();
    let Some(&from) = inputs.get(inputs.len().saturating_sub(EXCHANGES)) else {
        return out;
    };
    let shown = inputs.len().min(EXCHANGES);
    out.styled(
        Style::Dim,
        &format!(
            "── the last {shown} of {} exchanges (all of it: sandcrab sessions show {session_id}) ──\n",
            inputs.len()
        ),
    );
    let room = look.width.map_or(120, |w| w.saturating_sub(4).max(20));
    for turn in &history[from..] {
        match &turn.kind {
            TurnKind::User { text } => {
                let lines: Vec<&str> = text.lines().collect();
                for (i, line) in lines.iter().take(INPUT_LINES).enumerate() {
                    let mark = if i == 0 { "> " } else { "  " };
                    out.styled(Style::Bold, mark)
                        .text(&cut_to(line, room))
                        .text("\n");
                }
                if lines.len() > INPUT_LINES {
                    out.styled(
                        Style::Dim,
                        &format!("  … {} more lines\n", lines.len() - INPUT_LINES),
                    );
                }
            }
            TurnKind::Assistant {
                text, tool_calls, ..
            } => {
                answer(&mut out, text, look);
                for call in tool_calls {
                    out.styled(Style::BoldCyan, "● ")
                        .styled(Style::Bold, &cut_to(&call.name, 60))
                        .text("\n");
                }
            }
            _ => {}
        }
    }
    out.styled(Style::Dim, "── now ──\n");
    out
}

/// The model's text, its Markdown drawn, at most [`ANSWER_LINES`] lines.
fn answer(out: &mut Styled, text: &str, look: Look) {
    if text.trim().is_empty() {
        return;
    }
    let total = text.lines().count();
    let kept: String = text
        .lines()
        .take(ANSWER_LINES)
        .collect::<Vec<_>>()
        .join("\n");
    let mut markdown = Markdown::new(look);
    out.append(&markdown.push(&kept));
    let (rest, _) = markdown.finish();
    out.append(&rest);
    out.text("\n");
    if total > ANSWER_LINES {
        out.styled(
            Style::Dim,
            &format!("  … {} more lines\n", total - ANSWER_LINES),
        );
    }
}
