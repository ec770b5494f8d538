//! Computing the result of a parsed patch, without touching any file.
//! Operations apply in order to the planned state of the files, so several
//! operations on one file compose (an update after an add, two updates of
//! one file, a move then an update of the new name).

use std::collections::BTreeMap;

use sandcrab_sdk::CallContext;

use super::parse::{Hunk, Line, Op};
use crate::fs;

/// A file change ready to be written.
pub enum Change {
    Write {
        guest: String,
        shown: String,
        content: String,
        added: bool,
    },
    Move {
        from: String,
        from_shown: String,
        to: String,
        to_shown: String,
        content: String,
    },
    Delete {
        guest: String,
        shown: String,
    },
}

/// The planned state of the files a patch touches: new content, or None
/// for deleted; a file not in the plan is as it is on disk.
struct Planned<'a> {
    ctx: &'a CallContext,
    files: BTreeMap<String, Option<String>>,
    /// Files as they were on disk (the ones updated or deleted).
    existed: BTreeMap<String, bool>,
    shown: BTreeMap<String, String>,
    /// Guest paths in first-touched order, and the moves done.
    order: Vec<String>,
    moves: Vec<(String, String)>,
}

impl Planned<'_> {
    fn resolve(&mut self, path: &str) -> Result<(String, String), String> {
        let guest = fs::resolve(self.ctx, path).map_err(|e| e.message().to_string())?;
        let shown = fs::display(self.ctx, &guest).to_string();
        self.shown
            .entry(guest.clone())
            .or_insert_with(|| shown.clone());
        Ok((guest, shown))
    }

    fn on_disk(&mut self, guest: &str) -> bool {
        *self
            .existed
            .entry(guest.to_string())
            .or_insert_with(|| std::fs::symlink_metadata(guest).is_ok())
    }

    /// Whether `guest` exists in the planned state.
    fn exists(&mut self, guest: &str) -> bool {
        match self.files.get(guest) {
            Some(state) => state.is_some(),
            None => self.on_disk(guest),
        }
    }

    /// The planned text of `guest` (read from disk, as UTF-8, if untouched).
    fn text(&mut self, guest: &str, path: &str, shown: &str) -> Result<String, String> {
        if let Some(state) = self.files.get(guest) {
            return state
                .clone()
                .ok_or_else(|| format!("{shown}: the patch deleted it earlier"));
        }
        self.on_disk(guest);
        let (_, text) =
            fs::read_utf8(self.ctx, path).map_err(|e| format!("{shown}: {}", e.message()))?;
        Ok(text)
    }

    fn set(&mut self, guest: &str, content: Option<String>) {
        if !self.order.iter().any(|g| g == guest) {
            self.order.push(guest.to_string());
        }
        self.files.insert(guest.to_string(), content);
    }
}

/// Check every operation against the workspace and compute every new file.
pub fn plan(ctx: &CallContext, ops: &[Op]) -> Result<Vec<Change>, String> {
    let mut p = Planned {
        ctx,
        files: BTreeMap::new(),
        existed: BTreeMap::new(),
        shown: BTreeMap::new(),
        order: Vec::new(),
        moves: Vec::new(),
    };
    for op in ops {
        match op {
            Op::Add { path, content } => {
                let (guest, shown) = p.resolve(path)?;
                if p.exists(&guest) {
                    return Err(format!(
                        "{shown}: cannot add, the file already exists (use *** Update File)"
                    ));
                }
                p.set(&guest, Some(content.clone()));
            }
            Op::Delete { path } => {
                let (guest, shown) = p.resolve(path)?;
                if !p.exists(&guest) {
                    return Err(format!("{shown}: cannot delete, the file does not exist"));
                }
                if !p.files.contains_key(&guest)
                    && !std::fs::metadata(&guest).is_ok_and(|m| m.is_file())
                {
                    return Err(format!("{shown}: cannot delete, it is not a file"));
                }
                p.set(&guest, None);
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let (guest, shown) = p.resolve(path)?;
                let original = p.text(&guest, path, &shown)?;
                let content = apply_hunks(&original, hunks).map_err(|e| format!("{shown}: {e}"))?;
                match move_to {
                    Some(to) => {
                        let (to_guest, to_shown) = p.resolve(to)?;
                        if to_guest != guest && p.exists(&to_guest) {
                            return Err(format!(
                                "{shown}: cannot move to {to_shown}, which already exists"
                            ));
                        }
                        p.set(&guest, None);
                        p.set(&to_guest, Some(content));
                        p.moves.push((guest, to_guest));
                    }
                    None => p.set(&guest, Some(content)),
                }
            }
        }
    }
    let mut changes = Vec::new();
    for guest in &p.order {
        let shown = p.shown[guest].clone();
        let existed = p.existed.get(guest).copied().unwrap_or(false)
            || std::fs::symlink_metadata(guest).is_ok();
        match &p.files[guest] {
            Some(content) => {
                let moved_from = p.moves.iter().find(|(_, to)| to == guest).map(|(f, _)| f);
                changes.push(match moved_from {
                    Some(from) => Change::Move {
                        from: from.clone(),
                        from_shown: p.shown[from].clone(),
                        to: guest.clone(),
                        to_shown: shown,
                        content: content.clone(),
                    },
                    None => Change::Write {
                        guest: guest.clone(),
                        shown,
                        content: content.clone(),
                        added: !existed,
                    },
                });
            }
            None if existed && !p.moves.iter().any(|(from, _)| from == guest) => {
                changes.push(Change::Delete {
                    guest: guest.clone(),
                    shown,
                })
            }
            None => {}
        }
    }
    Ok(changes)
}

/// Apply `hunks` in order to `text`, keeping its line endings (CRLF files
/// stay CRLF, added lines included) and whether it ends with a newline.
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<String, String> {
    let crlf = fs::uses_crlf(text);
    let had_newline = text.ends_with('\n');
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    let mut cursor = 0;
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for (n, hunk) in hunks.iter().enumerate() {
        let label = if hunks.len() > 1 {
            format!("hunk {} of {}", n + 1, hunks.len())
        } else {
            "the hunk".to_string()
        };
        if let Some(hint) = &hunk.hint {
            let found = seek_hint(&lines, hint, cursor)
                .ok_or_else(|| format!("{label}: could not find the line '@@ {hint}'"))?;
            cursor = found;
        }
        let old = hunk.old_lines();
        let at = if old.is_empty() {
            if hunk.end_of_file || hunk.hint.is_none() {
                lines.len()
            } else {
                cursor + 1
            }
        } else {
            seek(&lines, &old, cursor, hunk.end_of_file).ok_or_else(|| {
                format!(
                    "{label} did not match: could not find the lines starting with '{}' (searched from line {})",
                    old[0],
                    cursor + 1
                )
            })?
        };
        replacements.push((at, old.len(), new_lines(hunk, &lines[at..at + old.len()])));
        cursor = at + old.len();
    }
    for (at, len, new) in replacements.into_iter().rev() {
        lines.splice(at..at + len, new);
    }
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(eol);
    if had_newline || text.is_empty() {
        out.push_str(eol);
    }
    Ok(out)
}

/// The lines replacing a matched region: context lines keep the file's own
/// text (which may differ from the patch in whitespace), added lines come
/// from the patch.
fn new_lines(hunk: &Hunk, matched: &[String]) -> Vec<String> {
    let mut original = matched.iter();
    let mut out = Vec::new();
    for line in &hunk.lines {
        match line {
            Line::Context(text) => {
                out.push(original.next().cloned().unwrap_or_else(|| text.clone()))
            }
            Line::Remove(_) => {
                original.next();
            }
            Line::Add(text) => out.push(text.clone()),
        }
    }
    out
}

/// First line at or after `from` that is the hint (ignoring surrounding
/// whitespace), or contains it.
fn seek_hint(lines: &[String], hint: &str, from: usize) -> Option<usize> {
    let hint = hint.trim();
    (from..lines.len())
        .find(|&i| lines[i].trim() == hint)
        .or_else(|| (from..lines.len()).find(|&i| lines[i].contains(hint)))
}

/// Where `old` occurs at or after `from`: exactly, then ignoring trailing
/// whitespace, then ignoring surrounding whitespace. At end of file, a
/// match ending on the last line is preferred.
fn seek(lines: &[String], old: &[&str], from: usize, end_of_file: bool) -> Option<usize> {
    let passes: [fn(&str) -> &str; 3] = [|s| s, str::trim_end, str::trim];
    for norm in passes {
        let matches = |at: usize| {
            old.iter()
                .enumerate()
                .all(|(k, want)| norm(&lines[at + k]) == norm(want))
        };
        if old.len() > lines.len() {
            return None;
        }
        let last_start = lines.len() - old.len();
        if end_of_file && last_start >= from && matches(last_start) {
            return Some(last_start);
        }
        if let Some(at) = (from..=last_start).find(|&at| matches(at)) {
            return Some(at);
        }
    }
    None
}
