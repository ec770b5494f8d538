//! What one write did to one file: a typed record with a unified diff,
//! carried by the call's `TOOL_CALL_END` event and shown by `/diff` and
//! `/undo`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use similar::TextDiff;

/// Longest diff kept in a change (the rest is cut with a note).
const MAX_DIFF_CHARS: usize = 60_000;
/// Longest a diff may take to compute: a model can make two files that
/// share no line, for which an exact diff takes hours; past this the diff
/// is coarser (whole blocks replaced), never late.
pub const DIFF_TIME: Duration = Duration::from_millis(250);
/// Files with more lines than this on either side are not diffed.
const MAX_DIFF_LINES: usize = 100_000;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Modified,
    Deleted,
}

/// One file's change, with its diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The tool call that made it (empty for `/undo` and `/diff`).
    #[serde(default)]
    pub call_id: String,
    /// The file, relative to the workspace.
    pub path: String,
    pub kind: ChangeKind,
    /// A unified diff (`--- a/PATH`, `+++ b/PATH`, hunks); empty for a
    /// binary file.
    pub diff: String,
    /// Lines added and removed.
    pub added: usize,
    pub removed: usize,
    /// Either side is not UTF-8 text.
    pub binary: bool,
}

impl FileChange {
    /// A change of a file whose content is not shown (too large to read,
    /// or a link).
    pub fn unshown(path: &str, kind: ChangeKind) -> FileChange {
        FileChange {
            call_id: String::new(),
            path: path.to_string(),
            kind,
            diff: String::new(),
            added: 0,
            removed: 0,
            binary: true,
        }
    }

    /// The change from `before` to `after` (None: absent), if they differ.
    pub fn between(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> Option<FileChange> {
        if before == after {
            return None;
        }
        let kind = match (before, after) {
            (None, _) => ChangeKind::Created,
            (_, None) => ChangeKind::Deleted,
            _ => ChangeKind::Modified,
        };
        fn text(bytes: Option<&[u8]>) -> Option<&str> {
            match bytes {
                None => Some(""),
                Some(bytes) => std::str::from_utf8(bytes).ok(),
            }
        }
        let change = |diff: String, added, removed, binary| FileChange {
            call_id: String::new(),
            path: path.to_string(),
            kind,
            diff,
            added,
            removed,
            binary,
        };
        let (Some(old), Some(new)) = (text(before), text(after)) else {
            return Some(change(String::new(), 0, 0, true));
        };
        let (old_lines, new_lines) = (old.lines().count(), new.lines().count());
        if old_lines.max(new_lines) > MAX_DIFF_LINES {
            let note = format!("(over {MAX_DIFF_LINES} lines: not shown)\n");
            return Some(change(note, new_lines, old_lines, false));
        }
        let lines = TextDiff::configure()
            .timeout(DIFF_TIME)
            .diff_lines(old, new);
        let (mut added, mut removed) = (0, 0);
        for change in lines.iter_all_changes() {
            match change.tag() {
                similar::ChangeTag::Insert => added += 1,
                similar::ChangeTag::Delete => removed += 1,
                similar::ChangeTag::Equal => {}
            }
        }
        let old_name = if before.is_some() {
            format!("a/{path}")
        } else {
            "/dev/null".into()
        };
        let new_name = if after.is_some() {
            format!("b/{path}")
        } else {
            "/dev/null".into()
        };
        let mut diff = lines
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &new_name)
            .to_string();
        if diff.len() > MAX_DIFF_CHARS {
            let mut cut = MAX_DIFF_CHARS;
            while !diff.is_char_boundary(cut) {
                cut -= 1;
            }
            diff.truncate(cut);
            diff.push_str("\n… (diff cut)\n");
        }
        Some(change(diff, added, removed, false))
    }

    /// Its size in lines: `+A −R`, or `binary`.
    pub fn counts(&self) -> String {
        if self.binary {
            "binary".to_string()
        } else {
            format!("+{} −{}", self.added, self.removed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_counts_its_lines_and_names_its_sides() {
        let c = FileChange::between("a.txt", Some(b"one\ntwo\n"), Some(b"one\n2\n")).unwrap();
        assert_eq!((c.kind, c.added, c.removed), (ChangeKind::Modified, 1, 1));
        assert!(
            c.diff.starts_with("--- a/a.txt\n+++ b/a.txt\n@@"),
            "{}",
            c.diff
        );
        let new = FileChange::between("n.txt", None, Some(b"x\n")).unwrap();
        assert_eq!(new.kind, ChangeKind::Created);
        assert!(new.diff.starts_with("--- /dev/null\n+++ b/n.txt"));
        assert!(FileChange::between("same", Some(b"x"), Some(b"x")).is_none());
        let bin = FileChange::between("b", Some(b"\xff"), Some(b"x")).unwrap();
        assert!(bin.binary && bin.diff.is_empty());
    }

    /// Two large files that share no line: an exact diff would take
    /// hours; this one is bounded in time.
    #[test]
    fn a_diff_of_files_sharing_no_line_ends_in_time() {
        let old = "a\n".repeat(60_000);
        let new = "b\n".repeat(60_000);
        let started = std::time::Instant::now();
        let change =
            FileChange::between("big", Some(old.as_bytes()), Some(new.as_bytes())).unwrap();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!((change.added, change.removed), (60_000, 60_000));
    }
}
