//! The ignore rules in force while walking: one level per directory that
//! has a `.ignore` or `.gitignore` file, matched the way ripgrep's `ignore`
//! crate matches them (the same parser and globs, the same precedence).

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::{Dir, Entry, EntryKind};

const IGNORE_FILES: [&str; 2] = [".ignore", ".gitignore"];

/// One directory's ignore files.
struct Level {
    /// From `.ignore`: wins over every `.gitignore` rule.
    ignore: Option<Gitignore>,
    /// From `.gitignore`.
    gitignore: Option<Gitignore>,
}

/// The stack of levels from the walk's root down to the current directory.
#[derive(Default)]
pub struct Rules {
    levels: Vec<Level>,
}

impl Rules {
    /// Read the ignore files `entries` (the listing of `dir` at `path`)
    /// show; true when a level was pushed (call [`Rules::leave`] after the
    /// directory).
    pub fn enter(&mut self, dir: &Dir, path: &str, entries: &[Entry]) -> bool {
        let present = |file: &str| {
            entries.iter().any(|e| {
                // A link may name a file; a FIFO or device named
                // `.gitignore` would block the read, so is never opened.
                e.name == file && (e.kind == EntryKind::File || dir.is_file(file))
            })
        };
        if !IGNORE_FILES.iter().any(|f| present(f)) {
            return false;
        }
        let [ignore, gitignore] = IGNORE_FILES.map(|file| {
            if present(file) {
                matcher(dir, path, file)
            } else {
                None
            }
        });
        if ignore.is_none() && gitignore.is_none() {
            return false;
        }
        self.levels.push(Level { ignore, gitignore });
        true
    }

    pub fn leave(&mut self) {
        self.levels.pop();
    }

    /// Whether `path` (a guest path below the walk root) is ignored: the
    /// deepest `.ignore` rule that matches decides; failing that the
    /// deepest `.gitignore` rule; a negated rule (`!x`) un-ignores.
    pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
        let decide = |pick: fn(&Level) -> Option<&Gitignore>| {
            self.levels
                .iter()
                .rev()
                .find_map(|level| match pick(level)?.matched(path, is_dir) {
                    Match::None => None,
                    Match::Ignore(_) => Some(true),
                    Match::Whitelist(_) => Some(false),
                })
        };
        decide(|l| l.ignore.as_ref())
            .or_else(|| decide(|l| l.gitignore.as_ref()))
            .unwrap_or(false)
    }
}

/// The matcher of the ignore file `file` in `dir` (at `path`); None when
/// it cannot be read or holds no rules.
fn matcher(dir: &Dir, path: &str, file: &str) -> Option<Gitignore> {
    let mut bytes = Vec::new();
    dir.read_file(file, &mut bytes, true).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut builder = GitignoreBuilder::new(path);
    let from = std::path::PathBuf::from(format!("{path}/{file}"));
    for line in text.lines() {
        // A line that is not a valid glob is skipped, as ripgrep does.
        let _ = builder.add_line(Some(from.clone()), line);
    }
    let matcher = builder.build().ok()?;
    (!matcher.is_empty()).then_some(matcher)
}
