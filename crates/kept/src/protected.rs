//! Repository paths that make other programs run code later — git's
//! configuration and hooks wherever a repository is, sandcrab's own
//! project settings — read by every tool and program, written by none.
//!
//! `[policy] protected_paths` lists them relative to the workspace; a
//! `**` part matches any number of folders, a `*` part any one name. A
//! pattern protects the path and everything beneath it, except the
//! pattern `**/.git`, which stands for git's metadata at any depth: the
//! `.git` entry itself (a folder or a `gitdir:` file) may not be created,
//! replaced, moved or removed, and inside it whatever is named like what
//! makes git run programs or read another repository (`config`,
//! `config.worktree`, `commondir`, `gitdir`, `hooks/`), at any depth, is
//! read-only, while objects, refs and the index stay writable so commits
//! work.

use std::path::{Component, Path, PathBuf};

/// The default: git's metadata at any depth, sandcrab's project settings.
pub const DEFAULT_PROTECTED: &[&str] = &["**/.git", ".sandcrab", "sandcrab.toml"];

/// The name git's metadata lives under.
pub(super) const GIT: &str = ".git";
/// What, inside a git folder, makes git run a program or read another
/// configuration.
const GIT_RUNS: &[&str] = &["config", "config.worktree", "commondir", "gitdir", "hooks"];
/// Folders inside a git folder that git reads as data only: they are not
/// searched for configuration (what points git into one of them is judged
/// where it points).
pub(super) const GIT_DATA: &[&str] = &["objects", "refs", "logs", "lfs"];
/// Most entries of one git folder searched for its configuration.
const MAX_GIT_ENTRIES: usize = 4096;

/// How a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectionKind {
    /// The path and everything beneath it are read-only.
    ReadOnly,
    /// The entry itself may not be created, replaced, moved or removed;
    /// what is beneath it is judged on its own.
    Pinned,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Name(String),
    /// `*`: any one name.
    One,
    /// `**`: any number of names.
    Any,
}

/// One pattern of `[policy] protected_paths`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// Git's metadata at any depth (`**/.git`).
    Git,
    /// A path (with `*` and `**` parts) and everything beneath it.
    Path(Vec<Part>),
}

/// The protected paths of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    patterns: Vec<Pattern>,
    /// As the operator wrote them.
    written: Vec<String>,
}

impl Default for Protected {
    fn default() -> Self {
        Protected::parse(DEFAULT_PROTECTED.iter().copied())
    }
}

impl Protected {
    /// Nothing protected (`protected_paths = []`).
    pub fn none() -> Self {
        Protected {
            patterns: Vec::new(),
            written: Vec::new(),
        }
    }

    /// The patterns as `[policy] protected_paths` writes them.
    pub fn parse<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Self {
        let written: Vec<String> = patterns.into_iter().map(str::to_string).collect();
        let patterns = written
            .iter()
            .filter_map(|text| {
                let parts: Vec<Part> = text
                    .split('/')
                    .filter(|p| !p.is_empty() && *p != ".")
                    .map(|p| match p {
                        "**" => Part::Any,
                        "*" => Part::One,
                        name => Part::Name(name.to_string()),
                    })
                    .collect();
                match parts.as_slice() {
                    [] => None,
                    [Part::Any, Part::Name(n)] if n == GIT => Some(Pattern::Git),
                    _ => Some(Pattern::Path(parts)),
                }
            })
            .collect();
        Protected { patterns, written }
    }

    /// The patterns as the operator wrote them.
    pub fn written(&self) -> &[String] {
        &self.written
    }

    /// Whether git's metadata is protected.
    pub fn guards_git(&self) -> bool {
        self.patterns.contains(&Pattern::Git)
    }

    /// How `relative` (a path inside the workspace, as names) is
    /// protected, if it is.
    pub fn protection(&self, relative: &Path) -> Option<ProtectionKind> {
        let names: Vec<&str> = names(relative)?;
        let mut found = None;
        for pattern in &self.patterns {
            let kind = match pattern {
                Pattern::Git => git_protection(&names),
                Pattern::Path(parts) => (0..=names.len())
                    .any(|n| matches(parts, &names[..n]))
                    .then_some(ProtectionKind::ReadOnly),
            };
            match kind {
                Some(ProtectionKind::ReadOnly) => return Some(ProtectionKind::ReadOnly),
                Some(ProtectionKind::Pinned) => found = Some(ProtectionKind::Pinned),
                None => {}
            }
        }
        found
    }

    /// How git's rule protects `path` (any path, its names read from the
    /// root), when `**/.git` is in force.
    pub fn git_protection_of(&self, path: &Path) -> Option<ProtectionKind> {
        if !self.guards_git() {
            return None;
        }
        let names: Vec<&str> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect();
        git_protection(&names)
    }

    /// Whether `relative` leads to a protected path of a fixed name (a
    /// folder that holds `sandcrab.toml`'s place, say): moving it away
    /// would let a new one be made in its place.
    pub fn leads_to(&self, relative: &Path) -> bool {
        let Some(names) = names(relative) else {
            return false;
        };
        self.patterns.iter().any(|p| match p {
            Pattern::Git => false,
            Pattern::Path(parts) => {
                parts.len() > names.len()
                    && parts
                        .iter()
                        .zip(&names)
                        .all(|(part, name)| matches!(part, Part::Name(n) if n == name))
            }
        })
    }

    /// The paths of the patterns without wildcards, in `workspace`.
    pub fn fixed_paths(&self, workspace: &Path) -> Vec<PathBuf> {
        self.patterns
            .iter()
            .filter_map(|p| match p {
                Pattern::Path(parts) => fixed(parts).map(|f| workspace.join(f)),
                Pattern::Git => None,
            })
            .collect()
    }

    /// The protected paths that exist beneath `workspace` where a program
    /// starting in `cwd` (inside it) will find them: every fixed-name
    /// pattern, and git's metadata in the workspace, in `cwd` and in every
    /// folder between them (a [`super::Census`] finds it at every depth).
    /// Each with how it is protected.
    pub fn existing(&self, workspace: &Path, cwd: &Path) -> Vec<(PathBuf, ProtectionKind)> {
        let mut found = Vec::new();
        for pattern in &self.patterns {
            match pattern {
                Pattern::Path(parts) => {
                    if let Some(path) = fixed(parts) {
                        let path = workspace.join(path);
                        if std::fs::symlink_metadata(&path).is_ok() {
                            found.push((path, ProtectionKind::ReadOnly));
                        }
                    }
                }
                Pattern::Git => {
                    let mut dir = cwd;
                    loop {
                        let _ = git_metadata(&dir.join(GIT), &mut found);
                        if dir == workspace || !dir.starts_with(workspace) {
                            break;
                        }
                        match dir.parent() {
                            Some(parent) => dir = parent,
                            None => break,
                        }
                    }
                }
            }
        }
        found
    }
}

/// The names of a relative path; None for one that leaves (`..`, `/`).
fn names(relative: &Path) -> Option<Vec<&str>> {
    relative
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect()
}

fn matches(parts: &[Part], names: &[&str]) -> bool {
    match (parts.first(), names.first()) {
        (None, None) => true,
        (Some(Part::Any), _) => {
            matches(&parts[1..], names) || (!names.is_empty() && matches(parts, &names[1..]))
        }
        (Some(Part::One), Some(_)) => matches(&parts[1..], &names[1..]),
        (Some(Part::Name(want)), Some(name)) => want == name && matches(&parts[1..], &names[1..]),
        _ => false,
    }
}

/// The path of a pattern without wildcards.
fn fixed(parts: &[Part]) -> Option<PathBuf> {
    parts
        .iter()
        .map(|p| match p {
            Part::Name(n) => Some(n.as_str()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(|names| names.iter().collect())
}

/// The names that make a folder a git folder to git's discovery, whatever
/// its name (git finds a bare repository in the folder it runs in): a
/// `HEAD` file, and an `objects` and a `refs` folder — its own, or those of
/// the folder its `commondir` names.
const GIT_LAYOUT: [&str; 4] = ["HEAD", "objects", "refs", "commondir"];

/// Whether `dir` is laid out as a git folder (or would be once `adding`,
/// one of its names, exists).
pub(super) fn git_layout(dir: &Path, adding: Option<&str>) -> bool {
    let has =
        |name: &str| Some(name) == adding || std::fs::symlink_metadata(dir.join(name)).is_ok();
    has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

/// Whether writing the name `name` in `dir` would write a git folder's
/// configuration, or make `dir` a git folder: `dir` is (or would then be)
/// laid out as one, and `name` is part of that layout or what makes git
/// run something.
pub(super) fn makes_bare_git(dir: &Path, name: &str) -> bool {
    let adding = GIT_LAYOUT.contains(&name).then_some(name);
    (adding.is_some() || GIT_RUNS.contains(&name)) && git_layout(dir, adding)
}

/// The rule of `**/.git` for a path's names: the `.git` entry pinned, and
/// beneath it anything named like configuration read-only, at any depth
/// (a branch named `config` included: the file tools do not make refs).
fn git_protection(names: &[&str]) -> Option<ProtectionKind> {
    let at = names.iter().position(|n| *n == GIT)?;
    let inside = &names[at + 1..];
    if inside.is_empty() {
        return Some(ProtectionKind::Pinned);
    }
    inside
        .iter()
        .any(|name| GIT_RUNS.contains(name))
        .then_some(ProtectionKind::ReadOnly)
}

/// The metadata of the git entry `git` that exists: the entry pinned, and
/// what makes git run programs read-only (in a `gitdir:` file's case the
/// file itself is read-only: it says where the configuration is). False
/// when the folder holds too much to be searched whole.
pub(super) fn git_metadata(git: &Path, found: &mut Vec<(PathBuf, ProtectionKind)>) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(git) else {
        return true;
    };
    if !meta.is_dir() {
        found.push((git.to_path_buf(), ProtectionKind::ReadOnly));
        return true;
    }
    found.push((git.to_path_buf(), ProtectionKind::Pinned));
    // Its own configuration by name (however many other names it holds).
    for name in GIT_RUNS {
        let path = git.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            found.push((path, ProtectionKind::ReadOnly));
        }
    }
    // And everything named like configuration deeper down (linked
    // worktrees, submodules within submodules), outside the data folders;
    // a folder too large to search says so (false).
    let mut pending = vec![git.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_GIT_ENTRIES {
                return false;
            }
            let name = entry.file_name();
            let name = name.to_str().unwrap_or("");
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if GIT_RUNS.contains(&name) {
                if dir != git {
                    found.push((entry.path(), ProtectionKind::ReadOnly));
                }
            } else if is_dir && !GIT_DATA.contains(&name) {
                pending.push(entry.path());
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(p: &Protected, path: &str) -> Option<ProtectionKind> {
        p.protection(Path::new(path))
    }

    #[test]
    fn git_metadata_is_protected_at_any_depth_and_its_data_is_not() {
        let p = Protected::default();
        use ProtectionKind::*;
        assert_eq!(kind(&p, ".git"), Some(Pinned));
        assert_eq!(kind(&p, "a/b/.git"), Some(Pinned));
        assert_eq!(kind(&p, ".git/config"), Some(ReadOnly));
        assert_eq!(kind(&p, "sub/.git/hooks/pre-commit"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git/worktrees/w/commondir"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git/modules/a/b/config"), Some(ReadOnly));
        // A data-like name on the way protects nothing less.
        assert_eq!(kind(&p, ".git/modules/logs/config"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git/worktrees/refs/config"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git/evil/config"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git/objects/ab/cdef"), None);
        assert_eq!(kind(&p, ".git/index"), None);
        assert_eq!(kind(&p, ".git/refs/heads/main"), None);
        assert_eq!(kind(&p, ".gitdata/config"), None);
        assert_eq!(kind(&p, "sandcrab.toml"), Some(ReadOnly));
        assert_eq!(kind(&p, ".sandcrab/plugins/x/plugin.toml"), Some(ReadOnly));
        assert_eq!(kind(&p, "sub/sandcrab.toml"), None);
        assert_eq!(kind(&p, "src/main.rs"), None);
    }

    #[test]
    fn operator_patterns_match_names_and_wildcards() {
        let p = Protected::parse(["**/.envrc", "config/*/hooks", ".git/config"]);
        use ProtectionKind::*;
        assert_eq!(kind(&p, ".envrc"), Some(ReadOnly));
        assert_eq!(kind(&p, "a/b/.envrc"), Some(ReadOnly));
        assert_eq!(kind(&p, "config/x/hooks/run"), Some(ReadOnly));
        assert_eq!(kind(&p, "config/hooks"), None);
        assert_eq!(kind(&p, ".git/config"), Some(ReadOnly));
        assert_eq!(kind(&p, ".git"), None, "no git rule unless named");
        assert!(p.leads_to(Path::new(".git")));
        assert!(!p.leads_to(Path::new("src")));
        assert_eq!(Protected::none().protection(Path::new(".git")), None);
    }

    #[test]
    fn existing_metadata_is_found_from_the_working_folder_up() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/.git"), "gitdir: x").unwrap();
        std::fs::create_dir_all(ws.join("elsewhere/.git")).unwrap();
        let found = Protected::default().existing(&ws, &ws.join("a/b"));
        let paths: Vec<&Path> = found.iter().map(|(p, _)| p.as_path()).collect();
        assert!(paths.contains(&ws.join(".git").as_path()));
        assert!(paths.contains(&ws.join(".git/config").as_path()));
        assert!(paths.contains(&ws.join(".git/hooks").as_path()));
        assert!(found.contains(&(ws.join("a/.git"), ProtectionKind::ReadOnly)));
        assert!(!paths.iter().any(|p| p.starts_with(ws.join("elsewhere"))));
    }
}
