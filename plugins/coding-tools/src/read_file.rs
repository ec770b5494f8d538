//! `read_file(file_path, offset?, limit? = 2000)`: numbered lines.

use sandcrab_sdk::prelude::*;

use crate::fs;

/// Longest line shown in full; longer ones are cut with a marker.
const MAX_LINE: usize = 2000;
const DEFAULT_LIMIT: usize = 2000;

pub struct ReadFile;

#[derive(Deserialize)]
pub struct Args {
    file_path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 50_000,
            lines: None,
            keep: Keep::HeadAndTail,
        })
    }
    const DESCRIPTION: &'static str = "Read a text file from the workspace. Returns lines prefixed with their 1-based line numbers (`     3\\tline`). By default reads up to 2000 lines from the start; use offset (1-based first line) and limit for large files. Lines longer than 2000 characters are cut. Binary files and directories are refused (use list_dir for directories).";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .required("file_path", fs::file_path_schema())
            .optional(
                "offset",
                Schema::integer("1-based line number to start at").minimum(1),
            )
            .optional(
                "limit",
                Schema::integer("Maximum number of lines to return (default 2000)").minimum(1),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        // The host counts the lines and hands over only the window; when
        // it cannot (a directory, a FIFO, a missing file), the whole-file
        // path names what is wrong.
        let (guest, Numbered { mut text, total }, empty) =
            match fs::read_window(ctx, &args.file_path, offset, limit)? {
                Some((guest, window)) => {
                    if fs::looks_binary(&window.head) {
                        return Err(fs::binary_error(fs::display(ctx, &guest), window.size));
                    }
                    let numbered = Numbered {
                        text: numbered(&window.text, offset, limit).0,
                        total: window.total as usize,
                    };
                    (guest, numbered, window.size == 0)
                }
                None => {
                    let (guest, bytes) = fs::read_bytes(ctx, &args.file_path)?;
                    let numbered = number_lines(&bytes, offset, limit);
                    (guest, numbered, bytes.is_empty())
                }
            };
        let shown = fs::display(ctx, &guest);
        if empty {
            return Ok(format!("({shown} is empty)"));
        }
        if offset > total {
            return Err(ToolError::invalid(format!(
                "offset {offset} is past the end of {shown}, which has {total} lines"
            )));
        }
        let last = (offset - 1).saturating_add(limit).min(total);
        if last < total {
            text.push_str(&format!(
                "\n({} more lines in {shown}; continue with offset={})\n",
                total - last,
                last + 1
            ));
        }
        Ok(text)
    }
}

/// Lines of a file, numbered.
struct Numbered {
    /// The lines asked for, each `     N\tline\n`.
    text: String,
    /// How many lines the file has.
    total: usize,
}

/// Number `limit` lines of `bytes` from line `offset` (1-based). Only the
/// lines shown are checked as UTF-8 (invalid sequences shown as U+FFFD);
/// the others are only counted, with SIMD (memchr).
fn number_lines(bytes: &[u8], offset: usize, limit: usize) -> Numbered {
    let skipped = offset.saturating_sub(1);
    let start = match skipped {
        0 => Some(0),
        n => memchr::memchr_iter(b'\n', bytes).nth(n - 1).map(|i| i + 1),
    };
    let Some(start) = start else {
        return Numbered {
            text: String::new(),
            total: count_lines(bytes),
        };
    };
    let rest = &bytes[start..];
    let (text, end, shown) = numbered(rest, offset, limit);
    Numbered {
        text,
        total: skipped + shown + count_lines(&rest[end..]),
    }
}

/// The first `limit` lines of `rest` numbered from `first`, checked as
/// UTF-8 (invalid sequences shown as U+FFFD); where the last line shown
/// ends in `rest`, and how many lines were shown.
fn numbered(rest: &[u8], first: usize, limit: usize) -> (String, usize, usize) {
    let (out, end, shown) = number_window(rest, first, limit);
    // The lines shown are checked after numbering, with SIMD (simd128 on
    // wasm); only invalid text is numbered again, replacement characters
    // and all.
    let text = match simdutf8::basic::from_utf8(&rest[..end]) {
        // SAFETY: `out` holds ASCII and whole lines of `rest[..end]`,
        // just checked as UTF-8, each cut (if at all) where no character
        // continues.
        Ok(_) => unsafe { String::from_utf8_unchecked(out) },
        Err(_) => {
            let lossy = String::from_utf8_lossy(&rest[..end]);
            let (out, _, _) = number_window(lossy.as_bytes(), first, limit);
            // SAFETY: as above; `lossy` is UTF-8.
            unsafe { String::from_utf8_unchecked(out) }
        }
    };
    (text, end, shown)
}

/// Lines in `bytes`: one per newline, and one for text after the last.
fn count_lines(bytes: &[u8]) -> usize {
    let ends = memchr::memchr_iter(b'\n', bytes).count();
    ends + usize::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

/// The first `limit` lines of `bytes` numbered from `first`: the text,
/// where the last line numbered ends in `bytes`, and how many were.
fn number_window(bytes: &[u8], first: usize, limit: usize) -> (Vec<u8>, usize, usize) {
    // The numbers and tabs add 7 bytes a line; a cut line adds its marker.
    let mut out = Vec::with_capacity(bytes.len().min(limit.saturating_mul(128)) * 5 / 4 + 64);
    let mut count = 0;
    let mut start = 0;
    for newline in memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len())) {
        if count == limit || (newline == bytes.len() && start == bytes.len()) {
            break;
        }
        number_line(&mut out, first + count, bytes, start, newline);
        count += 1;
        start = (newline + 1).min(bytes.len());
    }
    (out, start, count)
}

/// Append `     N\tline\n` (number right-aligned in 6 columns) for the
/// line `text[start..end]`.
fn number_line(out: &mut Vec<u8>, number: usize, text: &[u8], start: usize, mut end: usize) {
    if end > start && text[end - 1] == b'\r' {
        end -= 1;
    }
    let mut buf = [b' '; 24];
    let mut at = buf.len();
    let mut n = number;
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
    if end - start > MAX_LINE {
        let line = &text[start..end];
        out.extend_from_slice(&line[..floor_boundary(line, MAX_LINE)]);
        out.extend_from_slice("… [line cut at 2000 characters]".as_bytes());
    } else {
        out.extend_from_slice(&text[start..end]);
    }
    out.push(b'\n');
}

/// The last position at or before `at` where no UTF-8 character of
/// `text` continues.
fn floor_boundary(text: &[u8], mut at: usize) -> usize {
    while at > 0 && at < text.len() && text[at] & 0xC0 == 0x80 {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests;
