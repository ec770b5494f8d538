//! An incremental Server-Sent Events parser that is correct on real
//! networks: bytes may arrive split anywhere (inside a line, inside a UTF-8
//! character, between `\r` and `\n`); lines end with LF, CRLF or CR;
//! `data:` may span lines; comments are skipped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The event's `id:` field, if it had one.
    pub id: Option<String>,
}

/// Largest event (all its lines together) accepted; a provider sending more
/// is broken or hostile, and the stream fails instead of growing memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The stream broke the SSE limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event is larger than {} MiB", MAX_EVENT_BYTES >> 20)]
pub struct EventTooLarge;

/// Feed bytes in, get complete events out.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The last byte seen was `\r`: a following `\n` belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    id: Option<String>,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consume `bytes`; return the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, EventTooLarge> {
        let mut events = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => {
                    if self.line.len() + self.data.len() >= MAX_EVENT_BYTES {
                        return Err(EventTooLarge);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(events)
    }

    /// Whether an event was started but not finished by a blank line.
    pub fn has_partial(&self) -> bool {
        self.has_data || !self.line.is_empty()
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                events.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                });
            }
            self.event.clear();
            self.id = None;
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return; // comment
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let value = &text[i + 1..];
                (&text[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (text.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {} // retry and unknown fields are ignored
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks.iter().flat_map(|c| p.feed(c).unwrap()).collect()
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
        }
    }

    #[test]
    fn parses_events_data_and_comments() {
        let text = b": keep-alive\nevent: ping\ndata: {}\n\ndata: a\ndata: b\n\nid: 7\nretry: 10\ndata:no-space\n\n";
        assert_eq!(
            parse_all(&[text]),
            vec![
                ev("ping", "{}"),
                ev("", "a\nb"),
                SseEvent {
                    id: Some("7".into()),
                    ..ev("", "no-space")
                }
            ]
        );
    }

    #[test]
    fn any_split_point_gives_the_same_events() {
        let text =
            "event: delta\r\ndata: {\"t\":\"héllo → 世界\"}\r\n\r\nevent: done\rdata: [DONE]\r\r"
                .as_bytes();
        let whole = parse_all(&[text]);
        assert_eq!(
            whole,
            vec![
                ev("delta", "{\"t\":\"héllo → 世界\"}"),
                ev("done", "[DONE]")
            ]
        );
        // One byte at a time.
        let mut p = SseParser::new();
        let bytewise: Vec<SseEvent> = text.iter().flat_map(|b| p.feed(&[*b]).unwrap()).collect();
        assert_eq!(bytewise, whole);
        // Every two-piece split, including inside multi-byte characters and
        // between \r and \n.
        for i in 0..text.len() {
            assert_eq!(parse_all(&[&text[..i], &text[i..]]), whole, "split at {i}");
        }
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: partial").unwrap().is_empty());
        assert!(p.has_partial());
        assert!(p.feed(b"\n").unwrap().is_empty());
        assert!(p.has_partial());
        assert_eq!(p.feed(b"\n").unwrap(), vec![ev("", "partial")]);
        assert!(!p.has_partial());
    }

    #[test]
    fn an_endless_event_is_refused() {
        let mut p = SseParser::new();
        let chunk = vec![b'x'; 1 << 20];
        let mut result = p.feed(b"data: ");
        for _ in 0..(MAX_EVENT_BYTES >> 20) {
            result = p.feed(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(EventTooLarge));
    }
}
