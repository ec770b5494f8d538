//! A bracketed paste in the line editor, taken whole and not drawn key by
//! key: a short one goes into the line as it is; a long one (a log, a
//! file) stands in the line as `[Pasted text #1 +4000 lines]` and is put
//! back in its place when the line is sent, so a 300 KB paste does not
//! scroll 4,000 lines past the operator.

use std::sync::{Arc, Mutex};

use rustyline::{
    Cmd, ConditionalEventHandler, Event, EventContext, KeyCode, KeyEvent, Modifiers, RepeatCount,
};

/// A paste longer than this (characters) stands in the line as a mark.
const LONG_CHARS: usize = 1000;
/// A paste of more lines than this stands in the line as a mark.
const LONG_LINES: usize = 10;

/// Pastes of the line being edited.
#[derive(Debug, Default)]
pub struct Pastes {
    /// The paste coming in now, if one is.
    collecting: Option<String>,
    /// The long pastes of this line: the mark and the text it stands for.
    kept: Vec<(String, String)>,
}

/// Shared by the keys' handlers and the reader of the line.
pub type SharedPastes = Arc<Mutex<Pastes>>;

impl Pastes {
    /// Whether a paste is coming in.
    pub fn collecting(&self) -> bool {
        self.collecting.is_some()
    }

    /// Add `c` to the paste coming in.
    pub fn push(&mut self, c: char) {
        if let Some(text) = &mut self.collecting {
            text.push(c);
        }
    }

    /// The paste ended: what goes into the line.
    fn placed(&mut self) -> String {
        let text = self.collecting.take().unwrap_or_default();
        // A terminal sends line breaks as CR.
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines = text.lines().count();
        if text.chars().count() <= LONG_CHARS && lines <= LONG_LINES {
            return text;
        }
        let mark = format!("[Pasted text #{} +{lines} lines]", self.kept.len() + 1);
        self.kept.push((mark.clone(), text));
        mark
    }

    /// `line` with each mark replaced by its paste; the pastes are
    /// forgotten (the next line starts afresh).
    pub fn expand(&mut self, line: &str) -> String {
        let mut out = line.to_string();
        // The last mark first, found from the end: a paste's own text is
        // never searched for another mark.
        for (mark, text) in self.kept.drain(..).rev() {
            if let Some(at) = out.rfind(&mark) {
                out.replace_range(at..at + mark.len(), &text);
            }
        }
        self.collecting = None;
        out
    }

    /// Forget what this line pasted (it was not sent: Ctrl-C, Ctrl-D).
    pub fn forget(&mut self) {
        self.kept.clear();
        self.collecting = None;
    }
}

/// The handler of every key while a paste comes in (and of the keys that
/// start and end one); other keys go on as usual.
pub struct PasteCollector(pub SharedPastes);

impl ConditionalEventHandler for PasteCollector {
    fn handle(&self, evt: &Event, _: RepeatCount, _: bool, _: &EventContext) -> Option<Cmd> {
        let key = *evt.get(0)?;
        let mut pastes = self.0.lock().ok()?;
        match key {
            KeyEvent(KeyCode::BracketedPasteStart, _) => {
                pastes.collecting = Some(String::new());
                Some(Cmd::Noop)
            }
            KeyEvent(KeyCode::BracketedPasteEnd, _) if pastes.collecting() => {
                Some(Cmd::Insert(1, pastes.placed()))
            }
            key if pastes.collecting() => {
                if let Some(c) = pasted_char(key) {
                    pastes.push(c);
                }
                Some(Cmd::Noop)
            }
            _ => None,
        }
    }
}

/// The character a key of a paste stands for.
pub fn pasted_char(key: KeyEvent) -> Option<char> {
    match key {
        KeyEvent(KeyCode::Char(c), m) if m.is_empty() || m == Modifiers::SHIFT => Some(c),
        KeyEvent(KeyCode::Enter, _) => Some('\r'),
        KeyEvent(KeyCode::Char('J'), Modifiers::CTRL) => Some('\n'),
        KeyEvent(KeyCode::Tab, _) => Some('\t'),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pasted(text: &str) -> (String, Pastes) {
        let mut pastes = Pastes {
            collecting: Some(String::new()),
            kept: Vec::new(),
        };
        for c in text.chars() {
            pastes.push(c);
        }
        (pastes.placed(), pastes)
    }

    #[test]
    fn a_short_paste_goes_in_as_it_is_with_its_line_breaks() {
        let (placed, pastes) = pasted("one\r\ntwo\rthree");
        assert_eq!(placed, "one\ntwo\nthree");
        assert!(pastes.kept.is_empty());
    }

    #[test]
    fn a_long_paste_stands_as_a_mark_and_is_put_back_when_sent() {
        let text: String = (1..=4000).map(|i| format!("line {i}\r")).collect();
        let (placed, mut pastes) = pasted(&text);
        assert_eq!(placed, "[Pasted text #1 +4000 lines]");
        let sent = pastes.expand(&format!("look at this: {placed} and say"));
        assert!(sent.starts_with("look at this: line 1\nline 2\n"));
        assert!(sent.ends_with("line 4000\n and say"));
        // Forgotten once sent.
        assert_eq!(pastes.expand(&placed), placed);
    }
}
