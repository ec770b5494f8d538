//! What a program makes where the host keeps something that was not there
//! yet. A mount covers only what exists when the program starts: a
//! credential store that does not exist yet (`~/.netrc` made a hard link
//! to a workspace file, so the user's later credentials can be read
//! there), a trusted plugin folder not made yet (a plugin planted for the
//! next start), a project's `sandcrab.toml` (instructions for the next
//! session). So what is absent when a program starts is noted, and what of
//! it exists when the program has ended is taken out, like git metadata
//! (see [`super::Census`]).

use std::path::{Path, PathBuf};

use super::census::take_out;
use super::{Protected, Registry, Swept};

/// The kept paths a program could make: absent as it starts, beneath a
/// folder it may write.
#[derive(Debug, Clone, Default)]
pub struct Absent {
    paths: Vec<Missing>,
}

/// One kept path absent as a program starts.
#[derive(Debug, Clone)]
struct Missing {
    /// The writable folder it is beneath.
    root: PathBuf,
    /// The first name on the way to it that did not exist (itself, or the
    /// folder that would hold it).
    first_absent: PathBuf,
    what: String,
}

impl Absent {
    /// What of `registry`'s entries and `protected`'s fixed paths in
    /// `workspace` is absent now beneath one of `writable`.
    pub fn before(
        registry: &Registry,
        protected: Option<(&Path, &Protected)>,
        writable: &[PathBuf],
    ) -> Absent {
        let mut candidates: Vec<(PathBuf, String)> = registry
            .entries()
            .iter()
            .map(|e| (e.path.clone(), e.item.describe().to_string()))
            .collect();
        if let Some((workspace, protected)) = protected {
            candidates.extend(
                protected
                    .fixed_paths(workspace)
                    .into_iter()
                    .map(|p| (p, "a protected path".to_string())),
            );
        }
        let mut paths: Vec<Missing> = Vec::new();
        for (path, what) in candidates {
            let Some(root) = writable.iter().find(|w| path.starts_with(w) && path != **w) else {
                continue;
            };
            let Some(first_absent) = first_absent(root, &path) else {
                continue;
            };
            if !paths.iter().any(|m| m.first_absent == first_absent) {
                paths.push(Missing {
                    root: root.clone(),
                    first_absent,
                    what,
                });
            }
        }
        Absent { paths }
    }

    /// Take out what of it exists now, into `quarantine`.
    pub fn sweep(&self, quarantine: Option<&Path>) -> Vec<Swept> {
        let mut swept = Vec::new();
        for missing in &self.paths {
            if std::fs::symlink_metadata(&missing.first_absent).is_err() {
                continue;
            }
            let kept_in = take_out(&missing.first_absent, &missing.root, quarantine);
            swept.push(Swept {
                path: missing.first_absent.clone(),
                why: format!(
                    "sandcrab keeps {} there, which no program may make",
                    missing.what
                ),
                kept_in,
            });
        }
        swept
    }
}

/// The first name between `root` and `path` (itself included) that does
/// not exist now; None when `path` exists.
fn first_absent(root: &Path, path: &Path) -> Option<PathBuf> {
    let relative = path.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    for name in relative.components() {
        at.push(name);
        if std::fs::symlink_metadata(&at).is_err() {
            return Some(at);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept::Item;

    #[test]
    fn what_a_program_makes_where_a_kept_path_was_absent_is_taken_out() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let quarantine = home.join("q");
        std::fs::create_dir_all(home.join(".config")).unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::CredentialStore, &home.join(".netrc"), "d");
        registry.keep(Item::CredentialStore, &home.join(".config/gh"), "d");
        registry.keep(Item::TrustedPlugins, &home.join("plugins"), "d");
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let absent = Absent::before(
            &registry,
            Some((&ws, &Protected::default())),
            std::slice::from_ref(&home),
        );
        // What a program did.
        std::fs::write(home.join("notes"), "x").unwrap();
        std::fs::hard_link(home.join("notes"), home.join(".netrc")).unwrap();
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::create_dir_all(home.join("plugins/evil")).unwrap();
        std::fs::write(ws.join("sandcrab.toml"), "instructions = 'x'").unwrap();
        let swept = absent.sweep(Some(&quarantine));
        let paths: Vec<&Path> = swept.iter().map(|s| s.path.as_path()).collect();
        assert!(paths.contains(&home.join(".netrc").as_path()), "{swept:?}");
        assert!(
            paths.contains(&home.join(".config/gh").as_path()),
            "{swept:?}"
        );
        assert!(paths.contains(&home.join("plugins").as_path()), "{swept:?}");
        assert!(
            paths.contains(&ws.join("sandcrab.toml").as_path()),
            "{swept:?}"
        );
        assert!(home.join(".config").exists(), "what was there stays");
        assert!(!home.join(".netrc").exists() && !ws.join("sandcrab.toml").exists());
        assert!(home.join("notes").exists());
    }
}
