//! Walking the workspace the way the search tools need it: depth first,
//! siblings sorted by name, `.git` skipped, `.ignore` and `.gitignore`
//! files honoured (a `.ignore` rule wins over a `.gitignore` rule, deeper
//! files over shallower ones, the last matching line of a file decides),
//! symbolic links never followed.
//!
//! Inside WASM every directory is a descriptor and every file is opened
//! relative to its directory by one name ([`Dir`]), so the host resolves
//! one path component per call instead of the whole path from the
//! workspace root, and an ignore file is read only where the listing shows
//! one (no failed opens).

mod partition;
mod rules;

#[cfg(not(target_family = "wasm"))]
mod dir_native;
#[cfg(target_family = "wasm")]
mod dir_wasm;

#[cfg(not(target_family = "wasm"))]
pub use dir_native::Dir;
#[cfg(target_family = "wasm")]
pub use dir_wasm::Dir;

#[cfg(test)]
use partition::each_file_split;
pub use partition::{Part, each_file_of};
use rules::Rules;

/// A window of a file's lines (see `Dir::read_lines`).
#[derive(Debug, Default)]
pub struct Window {
    /// The lines, as in the file.
    pub text: Vec<u8>,
    /// How many lines the file has.
    pub total: u64,
    /// The file's size in bytes.
    pub size: u64,
    /// The file's first bytes (at most 8 KiB), to tell binary from text.
    pub head: Vec<u8>,
}

/// What a directory entry is, without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
    /// A symbolic link, device, FIFO or socket.
    Other,
}

/// One name in a directory.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub kind: EntryKind,
}

/// Whether a walk goes on after a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// A file the walk found: its directory, its name there, its guest path
/// and its depth below the walk's root (1 for a file in the root).
pub struct Found<'a> {
    pub dir: &'a Dir,
    pub name: &'a str,
    pub path: &'a str,
    pub depth: usize,
}

/// What a walk does with what it finds.
pub trait Visit {
    /// A file, in walk order; `Stop` ends the walk.
    fn file(&mut self, found: Found<'_>) -> Flow;

    /// Whether to walk into the directory at `path`, `depth` below the
    /// root (1 for a directory in the root); asked before it is opened.
    fn descend(&mut self, _path: &str, _depth: usize) -> bool {
        true
    }

    /// The walk enters `dir`: its files (and its subdirectories') follow.
    fn enter(&mut self, _dir: &Dir) {}

    /// Every entry of `dir` has been visited.
    fn leave(&mut self, _dir: &Dir) {}
}

/// Walk the directory `root` (a guest path) with `visitor`.
pub fn walk(root: &str, visitor: &mut impl Visit) -> std::io::Result<()> {
    let root = root.trim_end_matches('/');
    let root = if root.is_empty() { "/" } else { root };
    let dir = Dir::open_path(root)?;
    let mut rules = Rules::default();
    walk_dir(&dir, root, 0, &mut rules, visitor);
    Ok(())
}

/// Walk `dir`, `depth` below the root.
fn walk_dir(
    dir: &Dir,
    path: &str,
    depth: usize,
    rules: &mut Rules,
    visit: &mut impl Visit,
) -> Flow {
    let Ok(mut entries) = dir.entries() else {
        return Flow::Continue;
    };
    entries.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let pushed = rules.enter(dir, path, &entries);
    visit.enter(dir);
    let mut flow = Flow::Continue;
    let mut child = String::with_capacity(path.len() + 64);
    for entry in &entries {
        if entry.name == ".git" || entry.kind == EntryKind::Other {
            continue;
        }
        child.clear();
        child.push_str(path.trim_end_matches('/'));
        child.push('/');
        child.push_str(&entry.name);
        let is_dir = entry.kind == EntryKind::Directory;
        if rules.ignores(&child, is_dir) {
            continue;
        }
        flow = if is_dir {
            if !visit.descend(&child, depth + 1) {
                continue;
            }
            match dir.open_dir(&entry.name) {
                Ok(sub) => walk_dir(&sub, &child, depth + 1, rules, visit),
                Err(_) => Flow::Continue,
            }
        } else {
            visit.file(Found {
                dir,
                name: &entry.name,
                path: &child,
                depth: depth + 1,
            })
        };
        if flow == Flow::Stop {
            break;
        }
    }
    visit.leave(dir);
    if pushed {
        rules.leave();
    }
    flow
}

/// A glob matcher: patterns with a `/` match the path relative to the
/// search root, others match the file name.
pub struct GlobFilter {
    set: globset::GlobMatcher,
    by_path: bool,
}

impl GlobFilter {
    pub fn new(pattern: &str) -> Result<Self, String> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid glob '{pattern}': {e}"))?;
        Ok(GlobFilter {
            set: glob.compile_matcher(),
            by_path: pattern.contains('/'),
        })
    }

    /// Whether the file `name` at `relative` (a path relative to the search
    /// root) matches.
    pub fn matches(&self, relative: &str, name: &str) -> bool {
        if self.by_path {
            self.set.is_match(relative)
        } else {
            self.set.is_match(name)
        }
    }
}

/// `path` relative to `root` (both guest paths, `path` beneath `root`).
pub fn relative<'a>(root: &str, path: &'a str) -> &'a str {
    let root = root.trim_end_matches('/');
    path.strip_prefix(root)
        .map(|rest| rest.trim_start_matches('/'))
        .unwrap_or(path)
}

#[cfg(test)]
mod tests;
