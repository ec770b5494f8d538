//! Styled text for a terminal that cannot carry anyone else's control
//! sequences: a [`Styled`] buffer takes text only through [`Styled::text`]
//! (every control character and bidi override escaped visibly) and
//! styles only as sandcrab's own fixed SGR codes, so colours are ours and
//! everything a model, tool or file wrote stays visible text.

use unicode_width::UnicodeWidthChar;

use crate::terminal_safe::needs_escape;

/// What the terminal gets: colours and cursor work, or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// SGR colours and emphasis.
    pub color: bool,
    /// The terminal's width in columns, if it was measured.
    pub width: Option<usize>,
    /// The live output block may move the cursor over its own lines.
    pub live: bool,
}

impl Look {
    /// Plain text: no colour, no cursor movement, no wrapping.
    pub const PLAIN: Look = Look {
        color: false,
        width: None,
        live: false,
    };

    /// What stdout can take: plain for `--json`, `NO_COLOR`, `TERM=dumb`,
    /// or when stdout or stderr is not a terminal; else colour, with the
    /// width the terminal reports (none if it reports none).
    pub fn detect(json: bool) -> Look {
        let tty = |fd| {
            // SAFETY: isatty only inspects the descriptor.
            unsafe { libc::isatty(fd) == 1 }
        };
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        if json || dumb || !tty(1) || !tty(2) {
            return Look::PLAIN;
        }
        let width = terminal_width();
        // The live block moves the cursor: only where styles may be sent.
        Look {
            color: !no_color,
            width,
            live: !no_color && width.is_some(),
        }
    }
}

/// The width stdout's terminal reports now (None: it reports none).
pub fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(size.ws_col as usize)
}

/// sandcrab's own styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Bold,
    Dim,
    Italic,
    Underline,
    Red,
    Green,
    Yellow,
    Magenta,
    Cyan,
    BoldCyan,
}

impl Style {
    fn sgr(self) -> &'static str {
        match self {
            Style::Bold => "\x1b[1m",
            Style::Dim => "\x1b[2m",
            Style::Italic => "\x1b[3m",
            Style::Underline => "\x1b[4m",
            Style::Red => "\x1b[31m",
            Style::Green => "\x1b[32m",
            Style::Yellow => "\x1b[33m",
            Style::Magenta => "\x1b[35m",
            Style::Cyan => "\x1b[36m",
            Style::BoldCyan => "\x1b[1;36m",
        }
    }
}

const RESET: &str = "\x1b[0m";

/// Text being built for the terminal.
#[derive(Debug, Clone, Default)]
pub struct Styled {
    out: String,
    color: bool,
}

impl Styled {
    /// An empty buffer; styles are dropped unless `color`.
    pub fn new(color: bool) -> Styled {
        Styled {
            out: String::new(),
            color,
        }
    }

    /// Append `text`, anything that could drive the terminal escaped.
    pub fn text(&mut self, text: &str) -> &mut Self {
        for c in text.chars() {
            if needs_escape(c) {
                self.out.extend(c.escape_unicode());
            } else {
                self.out.push(c);
            }
        }
        self
    }

    /// Append `text` in `style`.
    pub fn styled(&mut self, style: Style, text: &str) -> &mut Self {
        if self.color && !text.is_empty() {
            self.out.push_str(style.sgr());
            self.text(text);
            self.out.push_str(RESET);
        } else {
            self.text(text);
        }
        self
    }

    /// Append another buffer.
    pub fn append(&mut self, other: &Styled) -> &mut Self {
        self.out.push_str(&other.out);
        self
    }

    /// Take the whole lines from the front (up to the last line break),
    /// leaving the unfinished line; none when no line is finished.
    pub fn take_lines(&mut self) -> Option<Styled> {
        let end = self.out.rfind('\n')?;
        let rest = self.out.split_off(end + 1);
        Some(Styled {
            out: std::mem::replace(&mut self.out, rest),
            color: self.color,
        })
    }

    /// Move the cursor to the start of the line `rows` up and clear from
    /// there down (the live block redrawing itself); nothing when plain.
    pub(super) fn erase_rows_above(&mut self, rows: usize) -> &mut Self {
        if self.color && rows > 0 {
            self.out.push_str(&format!("\r\x1b[{rows}A\x1b[J"));
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// What to write to the terminal.
    pub fn as_terminal_bytes(&self) -> &str {
        &self.out
    }
}

/// `text` as one row of visible characters: control characters (line
/// breaks and tabs included) and bidi overrides written as escapes.
pub fn one_row(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// How many columns `text` takes as [`Styled::text`] shows it: a
/// character written as an escape takes the escape's width, a tab at most
/// a tab stop's.
pub fn width_of(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            '\t' => 8,
            c if needs_escape(c) => c.escape_unicode().count(),
            c => c.width().unwrap_or(0),
        })
        .sum()
}

/// `text` (one paragraph) in lines of at most `columns` columns, broken
/// between words; a word longer than a line is broken inside.
pub fn word_wrap(text: &str, columns: usize) -> Vec<String> {
    let columns = columns.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = width_of(&line) + usize::from(!line.is_empty()) + width_of(word);
        if !line.is_empty() && needed > columns {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        for c in word.chars() {
            if width_of(&line) + width_of(c.encode_utf8(&mut [0; 4])) > columns && !line.is_empty()
            {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` made safe (as [`Styled::text`] would show it) and cut to at
/// most `columns` columns, with `…` when cut; line breaks and tabs are
/// escaped too, so the result is always one row.
pub fn cut_to(text: &str, columns: usize) -> String {
    let text = &one_row(text);
    if width_of(text) <= columns {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > columns {
            break;
        }
        used += w;
        out.push(c);
    }
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn word_wrap_breaks_between_words_and_inside_only_words_too_long() {
        assert_eq!(
            word_wrap("put back the files the last turn changed", 16),
            ["put back the", "files the last", "turn changed"]
        );
        assert_eq!(word_wrap("abcdefgh ij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(word_wrap("", 10), [""]);
    }

    use super::*;

    #[test]
    fn only_our_own_escapes_reach_the_terminal() {
        let mut s = Styled::new(true);
        s.styled(Style::Bold, "\x1b]52;c;aGk=\x07 \u{202e}x")
            .text("\x1b[2J");
        let out = s.as_terminal_bytes();
        // Ours: the bold and the reset. Theirs: visible text.
        assert_eq!(out.matches('\x1b').count(), 2, "{out:?}");
        assert!(out.starts_with("\x1b[1m\\u{1b}]52;c;aGk=\\u{7}"));
        assert!(out.contains("\\u{202e}x") && out.ends_with("\\u{1b}[2J"));
        let mut plain = Styled::new(false);
        plain.styled(Style::Red, "x").erase_rows_above(3);
        assert_eq!(plain.as_terminal_bytes(), "x");
    }

    #[test]
    fn cutting_counts_columns_not_bytes() {
        assert_eq!(cut_to("héllo wörld", 7), "héllo…");
        assert_eq!(cut_to("表表表表", 5), "表表…");
        assert_eq!(cut_to("short", 10), "short");
        // Escapes are counted as shown: one row, never wider.
        let cut = cut_to(&"\x01".repeat(300), 20);
        assert!(width_of(&cut) <= 20 && cut.starts_with("\\u{1}"), "{cut}");
        assert_eq!(cut_to("a\nb", 10), "a\\nb");
    }

    #[test]
    fn text_shown_as_escapes_is_measured_as_shown() {
        let shown = |text: &str| {
            let mut s = Styled::new(false);
            s.text(text);
            s.as_terminal_bytes().chars().count()
        };
        for text in ["a\u{202e}b", "\x1b[2J", "x\u{9b}y"] {
            assert_eq!(width_of(text), shown(text), "{text:?}");
        }
        assert_eq!(width_of("\tx"), 9, "a tab counts as a whole tab stop");
    }
}
