//! Text for a terminal: model output, tool output and anything else a
//! plugin or provider controls is printed without control sequences, so it
//! cannot set the clipboard (OSC 52), retitle the window, plant hyperlinks,
//! move the cursor over earlier lines or reorder text with bidi controls.

use std::borrow::Cow;

/// `text` with every control character except newline and tab, and every
/// bidirectional-override character, replaced by a visible escape.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reach_the_terminal_only_as_text() {
        let hostile = "ok\x1b]52;c;cHduZWQ=\x07\x1b[2J\r\u{9b}31m\u{202e}evil\ttab\nnext";
        let shown = sanitize(hostile);
        assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
        assert!(!shown.contains('\u{9b}') && !shown.contains('\u{202e}'));
        assert!(shown.contains("\\u{1b}]52;c;cHduZWQ=") && shown.contains("\ttab\nnext"));
        assert!(matches!(sanitize("plain text\n"), Cow::Borrowed(_)));
    }
}
