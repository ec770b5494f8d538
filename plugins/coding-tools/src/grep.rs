//! `grep(pattern, path?, glob_filter?, case_insensitive?, max_results? = 100)`:
//! regex search inside the plugin (no program needed).

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::search::Matcher;
use crate::walk::{GlobFilter, files};

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

        let candidates: Box<dyn Iterator<Item = std::path::PathBuf>> = if meta.is_file() {
            Box::new(std::iter::once(root.clone().into()))
        } else {
            Box::new(files(&root))
        };
        let mut out = String::new();
        // One buffer for every file: no allocation, and no `fstat` + seek
        // per file to size it (each is a crossing into the host).
        let mut bytes: Vec<u8> = Vec::with_capacity(256 * 1024);
        let mut found = 0;
        let mut capped = false;
        'files: for file in candidates {
            let relative_to_root = file.strip_prefix(&root).unwrap_or(&file);
            if let Some(filter) = &filter
                && meta.is_dir()
                && !filter.matches(relative_to_root)
            {
                continue;
            }
            if read_into(&file, &mut bytes).is_err() {
                continue;
            }
            if fs::looks_binary(&bytes) {
                continue;
            }
            let mut shown: Option<String> = None;
            matcher.each_match(&bytes, |number, line| {
                if found == max {
                    capped = true;
                    return false;
                }
                found += 1;
                let shown = shown.get_or_insert_with(|| {
                    fs::display(ctx, file.to_str().unwrap_or_default()).to_string()
                });
                push_match(&mut out, shown, number, &String::from_utf8_lossy(line));
                true
            });
            if capped {
                break 'files;
            }
        }
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

/// Read `path` into `buffer` (cleared first).
fn read_into(path: &std::path::Path, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buffer.clear();
    // Through `Take`, `read_to_end` does not ask the file for its size.
    std::fs::File::open(path)?
        .take(u64::MAX)
        .read_to_end(buffer)
        .map(|_| ())
}

fn push_match(out: &mut String, path: &str, number: usize, line: &str) {
    let line = line.trim_end_matches('\r');
    let shown = if line.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &line[..cut])
    } else {
        line.to_string()
    };
    out.push_str(&format!("{path}:{number}:{shown}\n"));
}
