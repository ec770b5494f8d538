//! `grep(pattern, path?, glob_filter?, case_insensitive?, max_results? = 100)`:
//! regex search inside the plugin (no program needed).

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::search::Matcher;
use crate::walk::{self, Flow, GlobFilter};

const MAX_LINE: usize = 500;

pub struct Grep;

#[derive(Deserialize)]
pub struct Args {
    pattern: String,
    path: Option<String>,
    glob_filter: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    max_results: Option<usize>,
}

impl Tool for Grep {
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression (Rust regex syntax). Returns matches as `path:line:text`, paths relative to the workspace. Searches the workspace (or `path`, a directory or a file), skipping .git, files ignored by .gitignore and binary files. glob_filter limits the files searched (e.g. `*.rs`, or `src/**/*.ts` to match paths).";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .required(
                "pattern",
                Schema::string("Regular expression to search for"),
            )
            .optional(
                "path",
                Schema::string("Directory or file to search (default: the workspace)"),
            )
            .optional(
                "glob_filter",
                Schema::string("Only search files matching this glob"),
            )
            .optional(
                "case_insensitive",
                Schema::boolean("Ignore case (default false)"),
            )
            .optional(
                "max_results",
                Schema::integer("Maximum matches to return (default 100)").minimum(1),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let matcher = Matcher::new(&args.pattern, args.case_insensitive)
            .map_err(|e| ToolError::invalid(format!("invalid regex: {e}")))?;
        let filter = args
            .glob_filter
            .as_deref()
            .map(GlobFilter::new)
            .transpose()
            .map_err(ToolError::invalid)?;
        let root = fs::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        let meta =
            std::fs::metadata(&root).map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
        let max = args.max_results.unwrap_or(100);

        let mut search = Search {
            ctx,
            matcher: &matcher,
            max,
            found: 0,
            capped: false,
            out: String::new(),
        };
        // One buffer for every file: no allocation per file.
        let mut bytes: Vec<u8> = Vec::with_capacity(256 * 1024);
        if meta.is_file() {
            read_into(std::path::Path::new(&root), &mut bytes)
                .map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
            search.file(&root, &bytes);
        } else {
            walk::each_file(&root, |file| {
                if let Some(filter) = &filter
                    && !filter.matches(walk::relative(&root, file.path), file.name)
                {
                    return Flow::Continue;
                }
                if file.dir.read_file(file.name, &mut bytes, false).is_err() {
                    return Flow::Continue;
                }
                search.file(file.path, &bytes)
            })
            .map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
        }
        let Search {
            found,
            capped,
            mut out,
            ..
        } = search;
        if found == 0 {
            return Ok(format!(
                "No matches for /{}/ in {}",
                args.pattern,
                fs::display(ctx, &root)
            ));
        }
        if capped {
            out.push_str(&format!("[results capped at {max} matches; narrow the pattern, path or glob_filter, or raise max_results]\n"));
        }
        Ok(out)
    }
}

/// The matches found so far.
struct Search<'a> {
    ctx: &'a CallContext,
    matcher: &'a Matcher,
    max: usize,
    found: usize,
    capped: bool,
    out: String,
}

impl Search<'_> {
    /// Add the matches in `bytes` (the file at the guest path `path`);
    /// binary files are skipped.
    fn file(&mut self, path: &str, bytes: &[u8]) -> Flow {
        if fs::looks_binary(bytes) {
            return Flow::Continue;
        }
        let shown = fs::display(self.ctx, path);
        let Search {
            matcher,
            max,
            found,
            capped,
            out,
            ..
        } = self;
        matcher.each_match(bytes, |number, line| {
            if *found == *max {
                *capped = true;
                return false;
            }
            *found += 1;
            push_match(out, shown, number, &String::from_utf8_lossy(line));
            true
        });
        if self.capped {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }
}

/// Read `path` into `buffer` (cleared first).
fn read_into(path: &std::path::Path, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buffer.clear();
    std::fs::File::open(path)?.read_to_end(buffer).map(|_| ())
}

/// Append `path:number:line` (the line cut at `MAX_LINE` bytes).
fn push_match(out: &mut String, path: &str, number: usize, line: &str) {
    use std::fmt::Write as _;
    let line = line.trim_end_matches('\r');
    out.push_str(path);
    let _ = write!(out, ":{number}:");
    if line.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&line[..cut]);
        out.push('…');
    } else {
        out.push_str(line);
    }
    out.push('\n');
}
