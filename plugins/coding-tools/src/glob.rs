//! `glob(pattern, path?)`: files matching a glob, newest first.

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::walk::{self, Dir, Flow, Found, GlobFilter, Visit};

const MAX_RESULTS: usize = 1000;

pub struct Glob;

#[derive(Deserialize)]
pub struct Args {
    pattern: String,
    path: Option<String>,
}

impl Tool for Glob {
    const NAME: &'static str = "glob";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 20_000,
            lines: Some(500),
            keep: Keep::Tail,
        })
    }
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
        if !matches!(
            fs::root_kind(&root, fs::display(ctx, &root))?,
            fs::Root::Directory
        ) {
            return Err(ToolError::invalid(format!(
                "{} is not a directory",
                fs::display(ctx, &root)
            )));
        }
        let mut found = Matches {
            filter: &filter,
            root: &root,
            ctx,
            pending: Vec::new(),
            matches: Vec::new(),
        };
        walk::walk(&root, &mut found).map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
        let mut matches = found.matches;
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

/// The files matching the pattern, with their modification times (read
/// once per directory, for all its matches together).
struct Matches<'a> {
    filter: &'a GlobFilter,
    root: &'a str,
    ctx: &'a CallContext,
    /// Per open directory: its matching files (name, as shown).
    pending: Vec<Vec<(String, String)>>,
    /// (modified, as shown).
    matches: Vec<(u64, String)>,
}

impl Visit for Matches<'_> {
    fn file(&mut self, file: Found<'_>) -> Flow {
        if self
            .filter
            .matches(walk::relative(self.root, file.path), file.name)
            && let Some(here) = self.pending.last_mut()
        {
            here.push((
                file.name.to_string(),
                fs::display(self.ctx, file.path).to_string(),
            ));
        }
        Flow::Continue
    }

    fn enter(&mut self, _dir: &Dir) {
        self.pending.push(Vec::new());
    }

    fn leave(&mut self, dir: &Dir) {
        let files = self.pending.pop().unwrap_or_default();
        if files.is_empty() {
            return;
        }
        let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
        let times = dir.modified(&names);
        for ((_, shown), time) in files.into_iter().zip(times) {
            self.matches.push((time.unwrap_or(0), shown));
        }
    }
}
