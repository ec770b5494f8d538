//! Which characters a terminal must never receive raw — control
//! characters (but newline and tab) and bidirectional overrides — and
//! JSON text with each written as a `\uXXXX` escape (the same data, safe
//! to print). The command line's printing (`cli::terminal`) and files
//! sandcrab writes for people to read (a session export) share this.

/// Whether `c` must not reach a terminal raw.
pub fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `json` (text serde_json wrote) with every such character escaped as
/// `\uXXXX`. Outside strings JSON has only ASCII punctuation and white
/// space, so every such character is inside a string, where `\u` is valid.
pub fn json_text(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if needs_escape(c) && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
