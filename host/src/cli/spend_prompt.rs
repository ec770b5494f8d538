//! `chat`'s question when a spend cap stopped a turn before a model call:
//! raise the cap by as much again and go on, or leave it stopped.

use super::line_input::{Line, LineInput};
use crate::agent::Session;
use crate::llm::spend::{CapKind, CapReached};

/// Ask whether to raise the cap `reached` names; when the operator says
/// yes it is raised on `session` and true is returned (the caller goes on
/// with the turn).
pub(super) async fn ask_to_raise(
    session: &Session,
    reached: &CapReached,
    input: &mut LineInput,
) -> bool {
    if reached.parents || !reached.raisable {
        // Only the session that holds a cap may raise it, and only where
        // raising it helps (not when earlier calls' cost is unknown).
        return false;
    }
    let by = reached.limit;
    let question = format!(
        "── spend cap: raise it by {} (to {}) and go on? [y/N] ",
        amount(reached.cap, by),
        amount(reached.cap, reached.limit + by)
    );
    super::tty_mode::discard_typeahead();
    let yes = match input.read_answer(&question).await {
        Ok(Line::Text(line)) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        _ => false,
    };
    if yes {
        session.raise_cap(reached.cap, by);
    } else {
        errln!("   (the cap stays; the next input starts from here)");
    }
    yes
}

/// `by` in the cap's unit, for people.
fn amount(cap: CapKind, by: f64) -> String {
    match cap {
        CapKind::Tokens => format!("{} tokens", by as u64),
        CapKind::Cost => format!("${by:.2}"),
        CapKind::Duration => format!("{} s", by as u64),
    }
}
