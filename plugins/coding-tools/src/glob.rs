//! `glob(pattern, path?)`: files matching a glob, newest first.

use std::time::SystemTime;

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::walk::{self, Flow, GlobFilter};

const MAX_RESULTS: usize = 1000;

pub struct Glob;

#[derive(Deserialize)]
pub struct Args {
    pattern: String,
    path: Option<String>,
}

impl Tool for Glob {
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files by name pattern, e.g. `**/*.rs` or `src/**/test_*.py` (`*` does not cross `/`; `**` does; a pattern without `/` matches file names anywhere). Returns paths relative to the workspace, most recently modified first. Skips .git and files ignored by .gitignore.";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .required("pattern", Schema::string("Glob pattern"))
            .optional(
                "path",
                Schema::string("Directory to search (default: the workspace)"),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let filter = GlobFilter::new(&args.pattern).map_err(ToolError::invalid)?;
        let root = fs::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        let meta =
            std::fs::metadata(&root).map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
        if !meta.is_dir() {
            return Err(ToolError::invalid(format!(
                "{} is not a directory",
                fs::display(ctx, &root)
            )));
        }
        let mut matches: Vec<(SystemTime, String)> = Vec::new();
        walk::each_file(&root, |file| {
            if filter.matches(walk::relative(&root, file.path), file.name) {
                let modified = file
                    .dir
                    .modified(file.name)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                matches.push((modified, fs::display(ctx, file.path).to_string()));
            }
            Flow::Continue
        })
        .map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
        if matches.is_empty() {
            return Ok(format!(
                "No files match '{}' in {}",
                args.pattern,
                fs::display(ctx, &root)
            ));
        }
        matches.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = matches.len();
        let mut out: String = matches
            .iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| format!("{p}\n"))
            .collect();
        if total > MAX_RESULTS {
            out.push_str(&format!(
                "[{} more files not shown; narrow the pattern]\n",
                total - MAX_RESULTS
            ));
        }
        Ok(out)
    }
}
