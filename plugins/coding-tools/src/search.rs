//! Finding the matching lines of one file fast: the regex runs over the
//! whole buffer (SIMD literal scans, no per-line calls), and only around a
//! match are line bounds found and the line checked on its own — so the
//! answer is exactly "the lines for which the line regex matches", the
//! same as testing every line, at a fraction of the cost.

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{Hir, HirKind, Look};

/// The two forms of one pattern.
pub struct Matcher {
    /// Over a whole buffer: `^`/`$` at line bounds.
    buffer: Regex,
    /// Over one line (the definition of a matching line).
    line: Regex,
    /// The pattern anchors to the whole text (`\A`, `\z`, `(?-m)^`), which
    /// a buffer search would read differently: test line by line.
    per_line: bool,
    /// The pattern anchors to line ends (`$`): a carriage return before
    /// `\n` would hide them from a buffer search, so files holding one are
    /// tested line by line. Other patterns need no such check, which
    /// spares a pass over every file.
    line_end: bool,
}

impl Matcher {
    pub fn new(pattern: &str, case_insensitive: bool) -> Result<Self, regex::Error> {
        let build = |multi: bool| {
            RegexBuilder::new(pattern)
                .case_insensitive(case_insensitive)
                .multi_line(multi)
                .build()
        };
        let buffer = build(true)?;
        let line = build(false)?;
        // The pattern is valid (it just compiled), so it parses.
        let hir = regex_syntax::ParserBuilder::new()
            .multi_line(true)
            .case_insensitive(case_insensitive)
            .build()
            .parse(pattern)
            .map_err(|e| regex::Error::Syntax(e.to_string()))?;
        let anchors = Anchors::of(&hir);
        Ok(Matcher {
            buffer,
            line,
            per_line: anchors.text,
            line_end: anchors.line_end,
        })
    }

    /// The reference way: every line tested (used when a buffer search
    /// could read the pattern differently).
    fn each_line(&self, text: &[u8], mut found: impl FnMut(usize, &[u8]) -> bool) {
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        if text.is_empty() {
            return;
        }
        for (i, line) in body.split(|b| *b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if self.line.is_match(line) && !found(i + 1, line) {
                return;
            }
        }
    }

    /// Call `found(line_number, line)` for each matching line of `text`
    /// (lines split on `\n`, a trailing `\r` removed), in order, until it
    /// returns false.
    pub fn each_match(&self, text: &[u8], mut found: impl FnMut(usize, &[u8]) -> bool) {
        // Carriage returns change what `$` and `.` see at a line's end
        // (a CRLF file): such files, and whole-text anchors, go line by line.
        if self.per_line || (self.line_end && memchr::memchr(b'\r', text).is_some()) {
            return self.each_line(text, found);
        }
        let mut at = 0;
        // Line number of the line starting at `counted`.
        let mut counted = 0;
        let mut number = 1;
        while at < text.len() {
            let Some(m) = self.buffer.find_at(text, at) else {
                return;
            };
            let start = memchr::memrchr(b'\n', &text[..m.start()]).map_or(0, |i| i + 1);
            // A match may begin at the very end of a line (an empty match
            // before the newline): its line is the one it is on.
            let start = start.max(at);
            if start >= text.len() {
                // After the final newline: no line there.
                return;
            }
            let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
            number += memchr::memchr_iter(b'\n', &text[counted..start]).count();
            counted = start;
            let line = &text[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // A match inside the line is a match of the line: every
            // assertion reads the same there (a line's edges look like the
            // text's edges to `^`, `$` and `\b`). Only a match running past
            // the line's end needs the line tested on its own.
            let inside = m.start() >= start && m.end() <= start + line.len();
            if (inside || self.line.is_match(line)) && !found(number, line) {
                return;
            }
            at = end + 1;
        }
    }
}

/// Which anchors a pattern uses.
#[derive(Default)]
struct Anchors {
    /// Start or end of the whole text.
    text: bool,
    /// End of a line.
    line_end: bool,
}

impl Anchors {
    fn of(hir: &Hir) -> Anchors {
        let mut found = Anchors::default();
        found.visit(hir);
        found
    }

    fn visit(&mut self, hir: &Hir) {
        match hir.kind() {
            HirKind::Look(look) => match look {
                Look::Start | Look::End => self.text = true,
                Look::EndLF | Look::EndCRLF => self.line_end = true,
                _ => {}
            },
            HirKind::Repetition(r) => self.visit(&r.sub),
            HirKind::Capture(c) => self.visit(&c.sub),
            HirKind::Concat(all) | HirKind::Alternation(all) => {
                all.iter().for_each(|h| self.visit(h))
            }
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: test every line.
    fn reference(pattern: &str, ci: bool, text: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let re = RegexBuilder::new(pattern)
            .case_insensitive(ci)
            .build()
            .unwrap();
        let mut out = Vec::new();
        // Lines as `str::lines` splits them.
        let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
        if text.ends_with(b"\n") || text.is_empty() {
            lines.pop();
        }
        for (i, line) in lines.into_iter().enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if re.is_match(line) {
                out.push((i + 1, line.to_vec()));
            }
        }
        out
    }

    fn fast(pattern: &str, ci: bool, text: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        Matcher::new(pattern, ci).unwrap().each_match(text, |n, l| {
            out.push((n, l.to_vec()));
            true
        });
        out
    }

    #[test]
    fn the_buffer_search_finds_exactly_the_matching_lines() {
        let texts: &[&[u8]] = &[
            b"alpha\nbeta\ngamma\n",
            b"no newline at end: beta",
            b"crlf beta\r\nline two\r\nbeta\r\n",
            b"\n\n\nbeta\n\n",
            b"a\nb\na b\nab\n",
            b"bad utf8 \xff\xfe beta\nok\n",
            b"x beta beta beta\nbeta\n",
            b"",
            b"end$\nend\r\n",
            b"lone\rcarriage a\rb\n",
            b"first\nsecond\n",
            b"beta \r\nx\r\nsecond\r\n",
            b"a\r\nb\r\n-\r\n",
        ];
        let patterns = [
            "beta",
            "^beta$",
            "a\\sb",
            "a\\s*b",
            "^$",
            "^",
            "$",
            "b.*",
            "(?i)BETA",
            "end$",
            "\\bline\\b",
            "[^x]",
            "a|b",
            ".",
            "a.b",
            "\\Afirst",
            "\\Asecond",
            "second\\z",
            "(?-m)^first",
            "(?-m)^second",
            "second(?-m)$",
            "x$|nothing",
            "(beta|x)\\s*$",
            "a\\rb",
            "\\r",
            "a\\b",
            "-\\B",
            "\\W$",
            "\\bbeta\\b",
            "\\s",
            "a\\s+b",
            "beta\\s*",
            "\\B",
            "[a-z]+\\s*\\n?",
        ];
        for text in texts {
            for p in patterns {
                for ci in [false, true] {
                    assert_eq!(
                        fast(p, ci, text),
                        reference(p, ci, text),
                        "/{p}/ ci={ci} in {:?}",
                        String::from_utf8_lossy(text)
                    );
                }
            }
        }
    }

    #[test]
    fn the_callback_stops_the_search() {
        let mut seen = 0;
        Matcher::new("x", false)
            .unwrap()
            .each_match(b"x\nx\nx\n", |_, _| {
                seen += 1;
                seen < 2
            });
        assert_eq!(seen, 2);
    }
}
