//! The assistant's Markdown, drawn as it streams: each complete line is
//! rendered (headings, lists, quotes, rules, emphasis, inline code, links,
//! fenced code with highlighting), wrapped to the measured width; the
//! unfinished last line waits for its end. Plain output passes the text
//! through unchanged (only made safe).

use super::highlight::highlight;
use super::style::{Look, Style, Styled, width_of};

/// A streaming Markdown renderer for one answer.
pub struct Markdown {
    look: Look,
    pending: String,
    /// Inside a fenced code block: its fence and language.
    fence: Option<(String, String)>,
}

impl Markdown {
    pub fn new(look: Look) -> Markdown {
        Markdown {
            look,
            pending: String::new(),
            fence: None,
        }
    }

    /// The terminal changed (its width, after a resize).
    pub fn set_look(&mut self, look: Look) {
        self.look = look;
    }

    /// Render what `delta` completes.
    pub fn push(&mut self, delta: &str) -> Styled {
        let mut out = Styled::new(self.look.color);
        if !self.look.color {
            out.text(delta);
            return out;
        }
        self.pending.push_str(delta);
        while let Some(end) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=end).collect();
            self.line(line.trim_end_matches(['\n', '\r']), &mut out);
            out.text("\n");
        }
        out
    }

    /// Render the rest (the answer ended); true in the second value if the
    /// output ended mid-line.
    pub fn finish(&mut self) -> (Styled, bool) {
        let mut out = Styled::new(self.look.color);
        let rest = std::mem::take(&mut self.pending);
        let open = !rest.is_empty();
        if open {
            self.line(&rest, &mut out);
        }
        self.fence = None;
        (out, open)
    }

    fn line(&mut self, line: &str, out: &mut Styled) {
        let trimmed = line.trim_start();
        if let Some((fence, lang)) = &self.fence {
            if trimmed.starts_with(fence.as_str()) && trimmed.trim_end() == fence.as_str() {
                out.styled(Style::Dim, "  └─");
                self.fence = None;
            } else {
                out.text("  ");
                highlight(lang, line, out);
            }
            return;
        }
        for fence in ["```", "~~~"] {
            if let Some(lang) = trimmed.strip_prefix(fence) {
                let lang = lang.trim().to_string();
                out.styled(Style::Dim, &format!("  ┌─ {lang}"));
                self.fence = Some((fence.to_string(), lang));
                return;
            }
        }
        if let Some((level, title)) = heading(trimmed) {
            // Bold cyan is sandcrab's own marker (● of a call or a
            // change): a heading never takes it.
            let style = if level == 1 {
                Style::Underline
            } else {
                Style::Bold
            };
            out.styled(style, title);
            return;
        }
        if is_rule(trimmed) {
            let n = self.look.width.unwrap_or(40).min(60);
            out.styled(Style::Dim, &"─".repeat(n));
            return;
        }
        let indent = &line[..line.len() - trimmed.len()];
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or(trimmed.strip_prefix(">").filter(|r| r.is_empty()))
        {
            self.wrapped(&[(Some(Style::Dim), "│ ".into())], rest, "│ ", out);
            return;
        }
        if let Some(rest) = ["- ", "* ", "+ "]
            .iter()
            .find_map(|m| trimmed.strip_prefix(m))
        {
            let bullet = format!("{indent}• ");
            let hang = " ".repeat(width_of(&bullet));
            self.wrapped(&[(Some(Style::Cyan), bullet)], rest, &hang, out);
            return;
        }
        if let Some((number, rest)) = numbered(trimmed) {
            let mark = format!("{indent}{number} ");
            let hang = " ".repeat(width_of(&mark));
            self.wrapped(&[(Some(Style::Cyan), mark)], rest, &hang, out);
            return;
        }
        self.wrapped(&[(None, indent.to_string())], trimmed, indent, out);
    }

    /// `text`'s inline Markdown after `lead`, wrapped to the width with
    /// `hang` before every continuation line.
    fn wrapped(&self, lead: &[(Option<Style>, String)], text: &str, hang: &str, out: &mut Styled) {
        let mut spans = lead.to_vec();
        spans.extend(inline(text));
        wrap(&spans, hang, self.look.width, out);
    }
}

fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    let rest = line.get(level..)?;
    ((1..=6).contains(&level) && rest.starts_with(' ')).then(|| (level, rest.trim()))
}

fn is_rule(line: &str) -> bool {
    let line = line.trim_end();
    line.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|m| line.chars().all(|c| c.to_string() == *m))
}

fn numbered(line: &str) -> Option<(&str, &str)> {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let rest = &line[digits..];
    let rest = rest.strip_prefix(". ").or(rest.strip_prefix(") "))?;
    Some((&line[..digits + 1], rest))
}

/// Inline Markdown as styled spans: `code`, **strong**, *emphasis*,
/// [text](url).
fn inline(text: &str) -> Vec<(Option<Style>, String)> {
    let mut spans: Vec<(Option<Style>, String)> = Vec::new();
    let mut plain = String::new();
    let mut rest = text;
    let flush = |plain: &mut String, spans: &mut Vec<(Option<Style>, String)>| {
        if !plain.is_empty() {
            spans.push((None, std::mem::take(plain)));
        }
    };
    while let Some(c) = rest.chars().next() {
        let styled = match c {
            '`' => closed(rest, "`").map(|(inner, after)| (Style::Cyan, inner, after, None)),
            '*' if rest.starts_with("**") => {
                closed(rest, "**").map(|(inner, after)| (Style::Bold, inner, after, None))
            }
            '_' if rest.starts_with("__") => {
                closed(rest, "__").map(|(inner, after)| (Style::Bold, inner, after, None))
            }
            '*' => closed(rest, "*")
                .filter(|(inner, _)| !inner.starts_with(' ') && !inner.ends_with(' '))
                .map(|(inner, after)| (Style::Italic, inner, after, None)),
            '[' => {
                link(rest).map(|(label, url, after)| (Style::Underline, label, after, Some(url)))
            }
            _ => None,
        };
        match styled {
            Some((style, inner, after, url)) if !inner.is_empty() => {
                flush(&mut plain, &mut spans);
                spans.push((Some(style), inner.to_string()));
                if let Some(url) = url {
                    spans.push((Some(Style::Dim), format!(" ({url})")));
                }
                rest = after;
            }
            _ => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    flush(&mut plain, &mut spans);
    spans
}

/// `text` starts with `mark`: the text up to the next `mark`, and after it.
fn closed<'a>(text: &'a str, mark: &str) -> Option<(&'a str, &'a str)> {
    let body = text.strip_prefix(mark)?;
    let end = body.find(mark)?;
    Some((&body[..end], &body[end + mark.len()..]))
}

/// `[label](url)` at the start of `text`.
fn link(text: &str) -> Option<(&str, &str, &str)> {
    let close = text.find("](")?;
    let label = &text[1..close];
    let after = &text[close + 2..];
    let end = after.find(')')?;
    if label.contains('[') || after[..end].contains(char::is_whitespace) {
        return None;
    }
    Some((label, &after[..end], &after[end + 1..]))
}

/// Spans laid out in lines of at most `width` columns (words are not
/// split unless one alone is wider), `hang` before continuation lines.
fn wrap(spans: &[(Option<Style>, String)], hang: &str, width: Option<usize>, out: &mut Styled) {
    let Some(width) = width.filter(|w| *w > width_of(hang) + 10) else {
        for (style, text) in spans {
            put(out, *style, text);
        }
        return;
    };
    let hang_width = width_of(hang);
    let mut column = 0;
    let mut space: Option<(Option<Style>, &str)> = None;
    for (style, text) in spans {
        for word in split_keeping_spaces(text) {
            if word.trim().is_empty() {
                if column == 0 {
                    put(out, *style, word);
                    column += width_of(word);
                } else {
                    space = Some((*style, word));
                }
                continue;
            }
            let w = width_of(word);
            let gap = space.map(|(_, s)| width_of(s)).unwrap_or(0);
            if column > hang_width && column + gap + w > width {
                out.text("\n");
                out.text(hang);
                column = hang_width;
                space = None;
            }
            if let Some((style, s)) = space.take() {
                put(out, style, s);
                column += gap;
            }
            put(out, *style, word);
            column += w;
        }
    }
}

fn put(out: &mut Styled, style: Option<Style>, text: &str) {
    match style {
        Some(style) => out.styled(style, text),
        None => out.text(text),
    };
}

/// Words and the runs of spaces between them, in order.
fn split_keeping_spaces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c == ' ';
        if in_space.is_some_and(|s| s != space) {
            out.push(&text[start..i]);
            start = i;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, width: Option<usize>) -> String {
        let mut md = Markdown::new(Look {
            color: true,
            width,
            live: false,
        });
        let mut out = md.push(text);
        out.append(&md.finish().0);
        out.as_terminal_bytes().to_string()
    }

    fn visible(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn markdown_becomes_styles_not_asterisks() {
        let out = render(
            "# Title\nSome **bold** and *it* and `code`.\n- one\n2. two\n",
            None,
        );
        assert_eq!(
            visible(&out),
            "Title\nSome bold and it and code.\n• one\n2. two\n"
        );
        assert!(out.contains("\x1b[1mbold\x1b[0m") && out.contains("\x1b[36mcode\x1b[0m"));
        let link = visible(&render("see [docs](https://x.y/z) now", None));
        assert_eq!(link, "see docs (https://x.y/z) now");
    }

    #[test]
    fn code_blocks_are_highlighted_and_never_wrapped() {
        let out = render(
            "```rust\nfn main() { let s = \"x\"; } // done\n```\nafter\n",
            Some(20),
        );
        let shown = visible(&out);
        assert!(
            shown.contains("  fn main() { let s = \"x\"; } // done\n"),
            "{shown}"
        );
        assert!(
            out.contains("\x1b[35mfn\x1b[0m"),
            "keyword coloured: {out:?}"
        );
        assert!(shown.ends_with("└─\nafter\n"));
    }

    #[test]
    fn paragraphs_wrap_to_the_measured_width_with_hanging_lists() {
        let shown = visible(&render(
            "- alpha beta gamma delta epsilon zeta eta theta\n",
            Some(24),
        ));
        for line in shown.lines() {
            assert!(width_of(line) <= 24, "{line:?}");
        }
        assert!(shown.lines().nth(1).unwrap().starts_with("  "), "{shown}");
    }

    #[test]
    fn plain_output_is_the_text_itself() {
        let mut md = Markdown::new(Look::PLAIN);
        let out = md.push("**x** \x1b[2J");
        assert_eq!(out.as_terminal_bytes(), "**x** \\u{1b}[2J");
    }

    #[test]
    fn a_line_arriving_in_pieces_is_drawn_once_whole() {
        let mut md = Markdown::new(Look {
            color: true,
            width: None,
            live: false,
        });
        assert!(md.push("**bo").is_empty());
        let out = md.push("ld**\n");
        assert_eq!(out.as_terminal_bytes(), "\x1b[1mbold\x1b[0m\n");
    }
}
