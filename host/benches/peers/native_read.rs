//! The native peer of the `read_file` tool, shared by the benchmarks.

use std::path::Path;

/// What the plugin's read_file does, natively: read, check, number lines.
pub fn native_read(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    assert!(!bytes[..bytes.len().min(8192)].contains(&0));
    let text = String::from_utf8(bytes).unwrap();
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in text.lines().enumerate() {
        let mut buf = [b' '; 24];
        let mut at = buf.len();
        let mut n = i + 1;
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.push_str(std::str::from_utf8(&buf[at.min(buf.len() - 6)..]).unwrap());
        out.push('\t');
        out.push_str(line);
        out.push('\n');
    }
    out
}
