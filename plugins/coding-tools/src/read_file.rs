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
        let (guest, text) = fs::read_text(ctx, &args.file_path)?;
        let shown = fs::display(ctx, &guest);
        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        if text.is_empty() {
            return Ok(format!("({shown} is empty)"));
        }
        let mut out = String::with_capacity(text.len().min(limit.saturating_mul(100)) + 64);
        let mut total = 0;
        let end = offset.saturating_add(limit);
        let mut start = 0;
        // memchr finds line ends with SIMD; lines past the window are only
        // counted.
        for newline in
            memchr::memchr_iter(b'\n', text.as_bytes()).chain(std::iter::once(text.len()))
        {
            if newline == text.len() && start == text.len() {
                break;
            }
            total += 1;
            if total >= offset && total < end {
                number_line(&mut out, total, &text[start..newline]);
            }
            start = newline + 1;
        }
        if offset > total {
            return Err(ToolError::invalid(format!(
                "offset {offset} is past the end of {shown}, which has {total} lines"
            )));
        }
        let last = (offset - 1).saturating_add(limit).min(total);
        if last < total {
            out.push_str(&format!(
                "\n({} more lines in {shown}; continue with offset={})\n",
                total - last,
                last + 1
            ));
        }
        Ok(out)
    }
}

/// Append `     N\tline\n` (number right-aligned in 6 columns).
fn number_line(out: &mut String, number: usize, line: &str) {
    let line = line.strip_suffix('\r').unwrap_or(line);
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
    let start = at.min(buf.len() - 6);
    // SAFETY: only ASCII spaces and digits were written.
    out.push_str(unsafe { std::str::from_utf8_unchecked(&buf[start..]) });
    out.push('\t');
    if line.len() > MAX_LINE {
        out.push_str(&line[..floor_boundary(line, MAX_LINE)]);
        out.push_str("… [line cut at 2000 characters]");
    } else {
        out.push_str(line);
    }
    out.push('\n');
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
