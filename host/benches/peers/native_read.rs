//! The native peer of the `read_file` tool, shared by the benchmarks.

use std::path::Path;

/// What the plugin's read_file does, the same way natively: read, check
/// for binary content, number the first `limit` lines in one pass, check
/// them as UTF-8 and count the others, finding lines with SIMD (memchr).
pub fn native_read(path: &Path, limit: usize) -> String {
    let bytes = std::fs::read(path).unwrap();
    assert!(!bytes[..bytes.len().min(8192)].contains(&0));
    let mut out = Vec::with_capacity(bytes.len().min(limit * 128) * 5 / 4 + 64);
    let mut shown = 0;
    let mut start = 0;
    for newline in memchr::memchr_iter(b'\n', &bytes).chain(std::iter::once(bytes.len())) {
        if shown == limit || (newline == bytes.len() && start == bytes.len()) {
            break;
        }
        let mut buf = [b' '; 24];
        let mut at = buf.len();
        let mut n = shown + 1;
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[at.min(buf.len() - 6)..]);
        out.push(b'\t');
        let line = &bytes[start..newline];
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
        shown += 1;
        start = (newline + 1).min(bytes.len());
    }
    let end = start;
    std::str::from_utf8(&bytes[..end]).unwrap();
    let mut out = String::from_utf8(out).unwrap();
    let rest = &bytes[end..];
    let more = memchr::memchr_iter(b'\n', rest).count()
        + usize::from(rest.last().is_some_and(|b| *b != b'\n'));
    if more > 0 {
        out.push_str(&format!(
            "\n({more} more lines; continue with offset={})\n",
            shown + 1
        ));
    }
    out
}
