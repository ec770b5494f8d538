//! A file change as the terminal shows it: a header line sandcrab writes
//! itself (`● changed PATH (+A −R)`, so a model's text cannot pass for
//! one), then the unified diff, coloured, each line cut to the width and
//! at most a number of lines.

use super::style::{Look, Style, Styled, cut_to, one_row};
use crate::checkpoint::{ChangeKind, FileChange};

/// One line of a unified diff, coloured by its first character.
pub fn diff_line(line: &str, out: &mut Styled) {
    let style = if line.starts_with("+++") || line.starts_with("---") {
        Style::Bold
    } else if line.starts_with("@@") {
        Style::Cyan
    } else if line.starts_with('+') {
        Style::Green
    } else if line.starts_with('-') {
        Style::Red
    } else {
        Style::Dim
    };
    out.styled(style, line);
}

/// `change` with at most `max_lines` lines of its diff (0: the header
/// only), every line ending in a newline.
pub fn render_change(change: &FileChange, look: Look, max_lines: usize) -> Styled {
    let verb = match change.kind {
        ChangeKind::Created => "created",
        ChangeKind::Modified => "changed",
        ChangeKind::Deleted => "deleted",
    };
    render_titled(change, verb, look, max_lines)
}

/// Like [`render_change`], the header saying `verb` (`restored`).
pub fn render_titled(change: &FileChange, verb: &str, look: Look, max_lines: usize) -> Styled {
    let mut out = Styled::new(look.color);
    out.styled(Style::BoldCyan, "● ")
        .styled(Style::Bold, &format!("{verb} {}", one_row(&change.path)))
        .styled(Style::Dim, &format!(" ({})", change.counts()))
        .text("\n");
    if change.binary || max_lines == 0 {
        return out;
    }
    // The two header lines repeat the path: the hunks are what matters.
    let lines: Vec<&str> = change
        .diff
        .lines()
        .filter(|l| !l.starts_with("--- ") && !l.starts_with("+++ "))
        .collect();
    let columns = look.width.map(|w| w.saturating_sub(4).max(20));
    for line in lines.iter().take(max_lines) {
        out.styled(Style::Dim, "  │ ");
        match columns {
            Some(c) => diff_line(&cut_to(line, c), &mut out),
            None => diff_line(line, &mut out),
        }
        out.text("\n");
    }
    if lines.len() > max_lines {
        out.styled(
            Style::Dim,
            &format!(
                "  │ … {} more lines (/diff shows every change)\n",
                lines.len() - max_lines
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_shows_our_header_and_its_coloured_hunks() {
        let change =
            FileChange::between("src/a.rs", Some(b"one\ntwo\n"), Some(b"one\n2\n")).unwrap();
        let look = Look {
            color: true,
            width: Some(80),
            live: true,
        };
        let out = render_change(&change, look, 50);
        let out = out.as_terminal_bytes();
        assert!(out.contains("changed src/a.rs"), "{out:?}");
        assert!(out.contains("\x1b[31m-two\x1b[0m") && out.contains("\x1b[32m+2\x1b[0m"));
        let plain = render_change(&change, Look::PLAIN, 1);
        assert_eq!(
            plain.as_terminal_bytes(),
            "● changed src/a.rs (+1 −1)\n  │ @@ -1,2 +1,2 @@\n  │ … 3 more lines (/diff shows every change)\n"
        );
    }
}
