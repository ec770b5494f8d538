//! Computing the result of a parsed patch, without touching any file.

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

/// Check every operation against the workspace and compute every new file.
pub fn plan(ctx: &CallContext, ops: &[Op]) -> Result<Vec<Change>, String> {
    let resolve = |path: &str| -> Result<(String, String), String> {
        let guest = fs::resolve(ctx, path).map_err(|e| e.message().to_string())?;
        let shown = fs::display(ctx, &guest).to_string();
        Ok((guest, shown))
    };
    let mut changes = Vec::new();
    for op in ops {
        match op {
            Op::Add { path, content } => {
                let (guest, shown) = resolve(path)?;
                if std::fs::metadata(&guest).is_ok() {
                    return Err(format!(
                        "{shown}: cannot add, the file already exists (use *** Update File)"
                    ));
                }
                changes.push(Change::Write {
                    guest,
                    shown,
                    content: content.clone(),
                    added: true,
                });
            }
            Op::Delete { path } => {
                let (guest, shown) = resolve(path)?;
                match std::fs::metadata(&guest) {
                    Ok(m) if m.is_file() => changes.push(Change::Delete { guest, shown }),
                    Ok(_) => return Err(format!("{shown}: cannot delete, it is not a file")),
                    Err(_) => {
                        return Err(format!("{shown}: cannot delete, the file does not exist"));
                    }
                }
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let (guest, shown) = resolve(path)?;
                let (_, original) =
                    fs::read_text(ctx, path).map_err(|e| format!("{shown}: {}", e.message()))?;
                let content = apply_hunks(&original, hunks).map_err(|e| format!("{shown}: {e}"))?;
                match move_to {
                    Some(to) => {
                        let (to_guest, to_shown) = resolve(to)?;
                        if to_guest != guest && std::fs::metadata(&to_guest).is_ok() {
                            return Err(format!(
                                "{shown}: cannot move to {to_shown}, which already exists"
                            ));
                        }
                        changes.push(Change::Move {
                            from: guest,
                            from_shown: shown,
                            to: to_guest,
                            to_shown,
                            content,
                        });
                    }
                    None => changes.push(Change::Write {
                        guest,
                        shown,
                        content,
                        added: false,
                    }),
                }
            }
        }
    }
    Ok(changes)
}

/// Apply `hunks` in order to `text`.
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<String, String> {
    let had_newline = text.ends_with('\n');
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
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
    let mut out = lines.join("\n");
    if had_newline || text.is_empty() {
        out.push('\n');
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
