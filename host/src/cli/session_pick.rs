//! Choosing a saved session: by its place in this workspace's list (`2`),
//! by its id or the start of it no other id has (`9a171cc7`), or from a
//! numbered list on the terminal.

use std::io::{BufRead, IsTerminal, Write};

use crate::store::{SessionRecord, Store, StoreError};

/// Most sessions a list shows.
pub const SHOWN: usize = 20;

/// This workspace's sessions, newest first.
pub fn recent(store: &dyn Store, workspace: &str) -> Result<Vec<SessionRecord>, StoreError> {
    store.sessions(Some(workspace))
}

/// One numbered row per session (at most [`SHOWN`]), `current` marked.
pub fn rows(list: &[SessionRecord], current: Option<&str>) -> Vec<String> {
    list.iter()
        .take(SHOWN)
        .enumerate()
        .map(|(i, s)| {
            let mark = if Some(s.id.as_str()) == current {
                " (this one)"
            } else {
                ""
            };
            format!(
                "{:>3}  {}  {}  {:>9}  {}{mark}",
                i + 1,
                s.id,
                s.updated_at,
                super::terminal::count(s.turns, "turn"),
                super::terminal::one_line(s.title.as_deref().unwrap_or("(untitled)"), 60)
            )
        })
        .collect()
}

/// The session `given` names: a number is its place in this workspace's
/// list (as [`rows`] shows it), anything else an id or the start of one.
pub fn chosen(store: &dyn Store, workspace: &str, given: &str) -> Result<String, StoreError> {
    let given = given.trim();
    if given.len() <= 2
        && let Ok(n) = given.parse::<usize>()
    {
        let list = recent(store, workspace)?;
        return match n.checked_sub(1).and_then(|i| list.get(i)) {
            Some(s) => Ok(s.id.clone()),
            None => Err(StoreError::UnknownSession(format!(
                "{given} (this workspace has {} saved)",
                list.len()
            ))),
        };
    }
    store.resolve_id(given)
}

/// Whether [`pick`] asks (a terminal to ask on), rather than taking the
/// newest.
pub fn will_ask() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// On a terminal: show this workspace's sessions, numbered, and read which
/// to continue (Enter: the newest). Elsewhere (a script): the newest.
pub fn pick(store: &dyn Store, workspace: &str) -> anyhow::Result<Option<String>> {
    let list = recent(store, workspace)?;
    if list.is_empty() {
        return Ok(None);
    }
    if list.len() == 1 || !will_ask() {
        return Ok(Some(list[0].id.clone()));
    }
    for row in rows(&list, None) {
        errln!("{row}");
    }
    super::terminal::write_err("resume which [1]: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim();
    if answer.is_empty() {
        return Ok(Some(list[0].id.clone()));
    }
    Ok(Some(chosen(store, workspace, answer)?))
}
