//! Walking the workspace: skips `.git`, honours `.gitignore` files, does
//! not follow symlinks.

use ignore::WalkBuilder;

/// Every file under `root` (a guest path), in a stable order.
pub fn files(root: &str) -> impl Iterator<Item = std::path::PathBuf> {
    WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
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

    /// Whether `relative` (a path relative to the search root) matches.
    pub fn matches(&self, relative: &std::path::Path) -> bool {
        if self.by_path {
            self.set.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.set.is_match(name))
        }
    }
}
