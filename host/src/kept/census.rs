//! Git metadata a program leaves behind. A confined program may write the
//! workspace, and a mount cannot stop it from making a name that did not
//! exist when it started: a `.git` file that sends the user's next `git
//! status` to a configuration of the model's, a `hooks` folder in a
//! repository that had none. So the git metadata of the workspace is
//! counted before a program starts ([`Census`]) and after it ended (its
//! PID namespace is gone: nothing of it still runs); what is new is let
//! stand only when git reads it as data (a `git init`, a `git clone`, a
//! linked worktree) and is otherwise taken out of the workspace — into
//! sandcrab's quarantine folder — and named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::git_config::runs_something;
use super::protected::{GIT, git_metadata};

/// Most folders one count walks (a larger workspace is counted up to
/// here, and the count says it is incomplete).
const MAX_FOLDERS: usize = 200_000;
/// Largest git metadata file read to judge it.
const MAX_READ: u64 = 256 << 10;

/// The git metadata of a workspace at one moment.
#[derive(Debug, Clone, Default)]
pub struct Census {
    /// Every `.git` entry and every existing name inside one that makes
    /// git run something (absolute paths).
    found: BTreeSet<PathBuf>,
    /// Whether every folder was walked.
    pub complete: bool,
}

/// One thing a program left that was taken out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub path: PathBuf,
    pub why: String,
    /// Where it went (None: removed).
    pub kept_in: Option<PathBuf>,
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was taken out of the workspace: a program made it, and {}; git metadata made by the model's programs may not make git run anything",
            self.path.display(),
            self.why
        )?;
        if let Some(to) = &self.kept_in {
            write!(f, " (kept in {})", to.display())?;
        }
        Ok(())
    }
}

impl Census {
    /// Count the git metadata beneath `workspace`.
    pub fn take(workspace: &Path) -> Census {
        let mut census = Census {
            found: BTreeSet::new(),
            complete: true,
        };
        let mut pending = vec![workspace.to_path_buf()];
        let mut walked = 0;
        while let Some(dir) = pending.pop() {
            walked += 1;
            if walked > MAX_FOLDERS {
                census.complete = false;
                break;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if entry.file_name() == GIT {
                    let mut metadata = Vec::new();
                    git_metadata(&entry.path(), &mut metadata);
                    census.found.extend(metadata.into_iter().map(|(p, _)| p));
                    census.found.insert(entry.path());
                } else if kind.is_dir() {
                    pending.push(entry.path());
                }
            }
        }
        census
    }

    /// Count again after a program ended, and take out of the workspace
    /// what it made that git would not read as data; into `quarantine`
    /// (removed when it cannot be moved there).
    pub fn sweep(&self, workspace: &Path, quarantine: Option<&Path>) -> Vec<Swept> {
        let after = Census::take(workspace);
        let mut swept = Vec::new();
        let mut taken: Vec<PathBuf> = Vec::new();
        for path in after.found.difference(&self.found) {
            // Inside what was taken out already: gone with it.
            if taken.iter().any(|t| path.starts_with(t)) {
                continue;
            }
            let Some(why) = self.judge_new(path) else {
                continue;
            };
            let kept_in = take_out(path, workspace, quarantine);
            taken.push(path.clone());
            swept.push(Swept {
                path: path.clone(),
                why,
                kept_in,
            });
        }
        swept
    }

    /// Why a new piece of git metadata would make git run something (None:
    /// it is data).
    fn judge_new(&self, path: &Path) -> Option<String> {
        let name = path.file_name()?.to_str().unwrap_or("");
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            return Some("it is a link (git follows it wherever it leads)".into());
        }
        if name == GIT {
            return if meta.is_dir() {
                judge_git_dir(path)
            } else {
                self.judge_git_file(path)
            };
        }
        match name {
            "hooks" => judge_hooks(path),
            "config" | "config.worktree" => judge_config(path),
            // Where a linked worktree's repository and common folder are:
            // data, as long as they stay within a repository that was there.
            "commondir" | "gitdir" => self.judge_pointer(path),
            _ => None,
        }
    }

    /// A `gitdir:` file: it may only point into a repository that was
    /// there before (a linked worktree, a submodule).
    fn judge_git_file(&self, path: &Path) -> Option<String> {
        let text = read_small(path)?;
        let Some(target) = text.trim().strip_prefix("gitdir:") else {
            return Some("it is a `.git` file git cannot read".into());
        };
        self.within_old_repository(path, target.trim())
    }

    /// `commondir` or `gitdir` inside a git folder.
    fn judge_pointer(&self, path: &Path) -> Option<String> {
        let text = read_small(path)?;
        self.within_old_repository(path, text.trim())
    }

    fn within_old_repository(&self, path: &Path, target: &str) -> Option<String> {
        let base = path.parent()?;
        let resolved = std::fs::canonicalize(base.join(target)).ok();
        let inside_old = resolved.as_ref().is_some_and(|t| {
            self.found.iter().any(|old| {
                old.file_name().is_some_and(|n| n == GIT) && old.is_dir() && t.starts_with(old)
            })
        });
        (!inside_old).then(|| {
            format!("it sends git to {target}, which is not a repository that was there before")
        })
    }
}

/// A new git folder: what `git init` or `git clone` makes is data; a
/// configuration that names a program, a hook, or a pointer elsewhere is
/// not.
fn judge_git_dir(git: &Path) -> Option<String> {
    let mut inside = Vec::new();
    git_metadata(git, &mut inside);
    for (path, _) in inside {
        if path == git {
            continue;
        }
        let name = path.file_name()?.to_str().unwrap_or("");
        let found = match name {
            "hooks" => judge_hooks(&path),
            "config" | "config.worktree" => judge_config(&path),
            _ => Some(format!("it holds {name}, which sends git elsewhere")),
        };
        if let Some(why) = found {
            return Some(why);
        }
    }
    None
}

/// A hooks folder: only git's own samples (`*.sample`, never run).
fn judge_hooks(hooks: &Path) -> Option<String> {
    let entries = match std::fs::read_dir(hooks) {
        Ok(entries) => entries,
        Err(_) => return Some("its hooks folder cannot be read".into()),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let plain = entry.file_type().is_ok_and(|t| t.is_file());
        if !(plain && name.ends_with(".sample")) {
            return Some(format!(
                "its hooks folder holds {name}, which git would run"
            ));
        }
    }
    None
}

fn judge_config(config: &Path) -> Option<String> {
    match read_small(config) {
        Some(text) => runs_something(&text).map(|key| format!("its configuration sets {key}")),
        None => Some("its configuration cannot be read".into()),
    }
}

fn read_small(path: &Path) -> Option<String> {
    let bytes = crate::safe_fs::read_regular(path, MAX_READ, crate::safe_fs::Links::Refuse).ok()?;
    String::from_utf8(bytes).ok()
}

/// Move `path` out of the workspace into `quarantine` (keeping its place
/// beneath the workspace); remove it when that fails.
fn take_out(path: &Path, workspace: &Path, quarantine: Option<&Path>) -> Option<PathBuf> {
    if let Some(quarantine) = quarantine {
        let relative = path.strip_prefix(workspace).unwrap_or(path);
        let stamp = format!(
            "{}-{:08x}",
            crate::time::now_rfc3339().replace(':', ""),
            rand::random::<u32>()
        );
        let to = quarantine.join(stamp).join(relative);
        let moved = to
            .parent()
            .is_some_and(|parent| create_private(parent).is_ok())
            && std::fs::rename(path, &to).is_ok();
        if moved {
            return Some(to);
        }
    }
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        _ => std::fs::remove_file(path),
    };
    if let Err(err) = removed {
        tracing::warn!("could not take {} out: {err}", path.display());
    }
    None
}

fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        (dir, path)
    }

    #[test]
    fn a_planted_git_file_and_config_are_taken_out_and_an_init_stays() {
        let (_d, ws) = scratch();
        let (_q, quarantine) = scratch();
        std::fs::create_dir_all(ws.join("old/.git/objects")).unwrap();
        std::fs::write(ws.join("old/.git/config"), "[core]\n\tbare = false\n").unwrap();
        let before = Census::take(&ws);
        assert!(before.complete);
        // What a program did.
        std::fs::write(ws.join(".git"), "gitdir: .gitdata\n").unwrap();
        std::fs::create_dir_all(ws.join("inited/.git/hooks")).unwrap();
        std::fs::write(ws.join("inited/.git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(ws.join("inited/.git/hooks/pre-commit.sample"), "").unwrap();
        std::fs::create_dir_all(ws.join("evil/.git")).unwrap();
        std::fs::write(
            ws.join("evil/.git/config"),
            "[core]\n\tfsmonitor = \"touch pwned\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join("old/.git/hooks")).unwrap();
        std::fs::write(ws.join("old/.git/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: ../old/.git/worktrees/wt\n").unwrap();
        std::fs::create_dir_all(ws.join("old/.git/worktrees/wt")).unwrap();

        let swept = before.sweep(&ws, Some(&quarantine));
        let paths: Vec<&Path> = swept.iter().map(|s| s.path.as_path()).collect();
        assert!(paths.contains(&ws.join(".git").as_path()), "{swept:#?}");
        assert!(
            paths.contains(&ws.join("evil/.git").as_path()),
            "{swept:#?}"
        );
        assert!(
            paths.contains(&ws.join("old/.git/hooks").as_path()),
            "{swept:#?}"
        );
        assert_eq!(swept.len(), 3, "{swept:#?}");
        assert!(!ws.join(".git").exists());
        assert!(!ws.join("evil/.git").exists());
        assert!(ws.join("inited/.git/config").exists(), "git init stays");
        assert!(ws.join("wt/.git").exists(), "a linked worktree stays");
        let kept = swept[0].kept_in.as_ref().unwrap();
        assert!(kept.starts_with(&quarantine) && kept.exists());
        assert!(swept.iter().any(|s| s.why.contains("core.fsmonitor")));
    }
}
