//! `grep(pattern, path?, glob_filter?, case_insensitive?, max_results? = 100)`:
//! regex search inside the plugin (no program needed).

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::search::Matcher;
use crate::walk::{self, Flow, GlobFilter, Part};

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
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 20_000,
            lines: Some(200),
            keep: Keep::Tail,
        })
    }
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
        // What `run_whole` does, without copying each match into a piece.
        let found = search(&args, ctx, Part::WHOLE)?;
        answer(&args, ctx, found.matches().map(|m| m.text), found.len())
    }
}

/// Sharded, each shard walks its own share of the tree
/// ([`walk::each_file_of`]) and its matches are keyed by their place in
/// the whole walk; the merge shows the first `max_results`.
impl ShardedTool for Grep {
    fn run_shard(args: &Args, ctx: &CallContext, shard: Shard) -> Result<ShardOutput, ToolError> {
        let part = Part {
            index: shard.index,
            count: shard.count,
        };
        let found = search(args, ctx, part)?;
        Ok(ShardOutput {
            stopped_early: found.stopped_early(args),
            pieces: found
                .matches()
                .map(|m| Piece {
                    major: m.file,
                    minor: m.line,
                    text: m.text.to_string(),
                })
                .collect(),
        })
    }

    fn merge(
        args: &Args,
        ctx: &CallContext,
        pieces: Vec<Piece>,
        _stopped_early: bool,
    ) -> ToolResult {
        answer(
            args,
            ctx,
            pieces.iter().map(|p| p.text.as_str()),
            pieces.len(),
        )
    }
}

impl Args {
    fn max(&self) -> usize {
        self.max_results.unwrap_or(100)
    }
}

/// What a search (or one shard of it) found: up to `max_results + 1`
/// matches, in walk order, formatted one after another.
pub struct Findings {
    text: String,
    ends: Vec<MatchEnd>,
}

/// Where a match's line ends in [`Findings::text`], and its place.
struct MatchEnd {
    /// The file's key in the whole walk ([`walk::each_file_of`]).
    file: u64,
    line: u64,
    end: usize,
}

/// One match: its file's key in walk order ([`walk::each_file_of`]), its
/// line number and its formatted `path:line:text\n`.
pub struct Match<'a> {
    pub file: u64,
    pub line: u64,
    pub text: &'a str,
}

impl Findings {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The search stopped at `max_results + 1` matches.
    pub fn stopped_early(&self, args: &Args) -> bool {
        self.len() > args.max()
    }

    pub fn matches(&self) -> impl Iterator<Item = Match<'_>> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|e| e.end));
        self.ends.iter().zip(starts).map(|(e, start)| Match {
            file: e.file,
            line: e.line,
            text: &self.text[start..e.end],
        })
    }
}

/// Search the files of `part` of the walk, stopping after `max_results + 1`
/// matches. The parts of a search together search every file once.
pub fn search(args: &Args, ctx: &CallContext, part: Part) -> Result<Findings, ToolError> {
    let matcher = Matcher::new(&args.pattern, args.case_insensitive)
        .map_err(|e| ToolError::invalid(format!("invalid regex: {e}")))?;
    let filter = args
        .glob_filter
        .as_deref()
        .map(GlobFilter::new)
        .transpose()
        .map_err(ToolError::invalid)?;
    let root = fs::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
    let kind = fs::root_kind(&root, fs::display(ctx, &root))?;

    let mut search = Search {
        ctx,
        matcher: &matcher,
        limit: args.max().saturating_add(1),
        file: 0,
        found: Findings {
            text: String::new(),
            ends: Vec::new(),
        },
    };
    // One buffer for every file: no allocation per file.
    let mut bytes: Vec<u8> = Vec::with_capacity(256 * 1024);
    if let fs::Root::Other = kind {
        return Err(ToolError::failed(format!(
            "{} is not a regular file or a directory (a FIFO, socket or device)",
            fs::display(ctx, &root)
        )));
    }
    if let fs::Root::File = kind {
        if part.takes(0) {
            read_into(std::path::Path::new(&root), &mut bytes)
                .map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
            if !fs::looks_binary(&bytes) {
                search.file(&root, &bytes);
            }
        }
    } else {
        walk::each_file_of(&root, part, |file, key| {
            if let Some(filter) = &filter
                && !filter.matches(walk::relative(&root, file.path), file.name)
            {
                return Flow::Continue;
            }
            // Binary files are skipped after reading only their start.
            if !matches!(file.dir.read_text_file(file.name, &mut bytes), Ok(true)) {
                return Flow::Continue;
            }
            search.file = key;
            search.file(file.path, &bytes)
        })
        .map_err(|e| fs::io_error(fs::display(ctx, &root), e))?;
    }
    Ok(search.found)
}

/// The answer from all matches in order (`count` of them; only the first
/// `max_results` are shown).
pub fn answer<'a>(
    args: &Args,
    ctx: &CallContext,
    matches: impl Iterator<Item = &'a str>,
    count: usize,
) -> ToolResult {
    if count == 0 {
        let root = fs::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        return Ok(format!(
            "No matches for /{}/ in {}",
            args.pattern,
            fs::display(ctx, &root)
        ));
    }
    let max = args.max();
    let mut out = String::new();
    for text in matches.take(max) {
        out.push_str(text);
    }
    if count > max {
        out.push_str(&format!("[results capped at {max} matches; narrow the pattern, path or glob_filter, or raise max_results]\n"));
    }
    Ok(out)
}

/// The matches found so far.
struct Search<'a> {
    ctx: &'a CallContext,
    matcher: &'a Matcher,
    /// Stop at this many matches.
    limit: usize,
    /// The key of the file being searched.
    file: u64,
    found: Findings,
}

impl Search<'_> {
    /// Add the matches in `bytes` (the text file at the guest path
    /// `path`; binary files are skipped before reading them whole).
    fn file(&mut self, path: &str, bytes: &[u8]) -> Flow {
        let shown = fs::display(self.ctx, path);
        let Search {
            matcher,
            limit,
            file,
            found,
            ..
        } = self;
        matcher.each_match(bytes, |number, line| {
            push_match(
                &mut found.text,
                shown,
                number,
                &String::from_utf8_lossy(line),
            );
            found.ends.push(MatchEnd {
                file: *file,
                line: number as u64,
                end: found.text.len(),
            });
            found.ends.len() < *limit
        });
        if self.found.ends.len() >= self.limit {
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
        out.push_str(&line[..line.floor_char_boundary(MAX_LINE)]);
        out.push('…');
    } else {
        out.push_str(line);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests;
