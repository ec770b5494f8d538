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
    links: Vec<Linked>,
}

/// A link on the way to a kept path (`~/.bashrc` leading into a dotfiles
/// folder), beneath a folder the program may write: the mount covers
/// where it leads, not the link, so a program could replace the link with
/// a file of its own. Put back after the program.
#[derive(Debug, Clone)]
struct Linked {
    root: PathBuf,
    path: PathBuf,
    target: PathBuf,
    what: String,
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
        let links = links_on_the_way(registry, writable);
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
        Absent { paths, links }
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
        for link in &self.links {
            if std::fs::read_link(&link.path).is_ok_and(|t| t == link.target) {
                continue;
            }
            let kept_in = match std::fs::symlink_metadata(&link.path) {
                Ok(_) => take_out(&link.path, &link.root, quarantine),
                Err(_) => None,
            };
            let put_back = std::fs::symlink_metadata(&link.path).is_err()
                && std::os::unix::fs::symlink(&link.target, &link.path).is_ok();
            swept.push(Swept {
                path: link.path.clone(),
                why: format!(
                    "it took the place of a link to {} (where sandcrab keeps {}), which no program may replace; {}",
                    link.target.display(),
                    link.what,
                    if put_back { "the link was put back" } else { "the link could not be put back" }
                ),
                kept_in,
            });
        }
        swept
    }
}

/// Every link beneath one of `writable` on the way to a kept path by a
/// name it was kept under.
fn links_on_the_way(registry: &Registry, writable: &[PathBuf]) -> Vec<Linked> {
    let mut links: Vec<Linked> = Vec::new();
    for entry in registry.entries() {
        for name in &entry.names {
            let Some(root) = writable.iter().find(|w| name.starts_with(w) && name != *w) else {
                continue;
            };
            let Ok(relative) = name.strip_prefix(root) else {
                continue;
            };
            let mut at = root.clone();
            for part in relative.components() {
                at.push(part);
                let Ok(target) = std::fs::read_link(&at) else {
                    continue;
                };
                if !links.iter().any(|l| l.path == at) {
                    links.push(Linked {
                        root: root.clone(),
                        path: at.clone(),
                        target,
                        what: entry.item.describe().to_string(),
                    });
                }
            }
        }
    }
    links
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
    use crate::Item;

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

#[cfg(test)]
mod link_tests {
    use super::*;
    use crate::Item;

    #[test]
    fn a_link_to_a_kept_file_replaced_by_a_program_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let quarantine = home.join("q");
        std::fs::create_dir_all(home.join("dotfiles")).unwrap();
        std::fs::write(home.join("dotfiles/bashrc"), "# mine\n").unwrap();
        std::fs::write(home.join("dotfiles/gitconfig"), "[user]\n").unwrap();
        std::os::unix::fs::symlink("dotfiles/bashrc", home.join(".bashrc")).unwrap();
        std::os::unix::fs::symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::StartupFile, &home.join(".bashrc"), "d");
        registry.keep(Item::StartupFile, &home.join(".gitconfig"), "d");
        assert_eq!(registry.entries()[0].path, home.join("dotfiles/bashrc"));
        // The link's own name is kept too.
        assert!(registry.holding(&home.join(".bashrc")).is_some());
        let absent = Absent::before(&registry, None, std::slice::from_ref(&home));
        // What a program did: one link replaced, the other left alone.
        std::fs::remove_file(home.join(".bashrc")).unwrap();
        std::fs::write(home.join(".bashrc"), "touch pwned\n").unwrap();
        let swept = absent.sweep(Some(&quarantine));
        assert_eq!(swept.len(), 1, "{swept:#?}");
        assert_eq!(swept[0].path, home.join(".bashrc"));
        assert!(swept[0].why.contains("put back"), "{}", swept[0].why);
        assert_eq!(
            std::fs::read_link(home.join(".bashrc")).unwrap(),
            PathBuf::from("dotfiles/bashrc")
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".bashrc")).unwrap(),
            "# mine\n"
        );
        let planted = swept[0].kept_in.as_ref().unwrap();
        assert_eq!(std::fs::read_to_string(planted).unwrap(), "touch pwned\n");
        // Control: the link left alone stays as it was.
        assert_eq!(
            std::fs::read_link(home.join(".gitconfig")).unwrap(),
            PathBuf::from("dotfiles/gitconfig")
        );
    }
}
