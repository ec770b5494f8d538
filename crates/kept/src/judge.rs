//! The one decision about a path the file tools touch: may this access
//! happen to what is really there, given what the host keeps and what the
//! workspace protects?

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Entry, Item, Kind, Protected, ProtectionKind, Registry};

/// What is done to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Its content read, or a folder listed.
    Read,
    /// Its content or metadata changed, or it is created.
    Write,
    /// It is renamed or removed (with everything beneath it).
    Move,
}

/// Why an access was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// It is, or is inside, something the host keeps.
    #[error("{} is protected: it is {}, which sandcrab keeps from every tool and program ({})", .path.display(), .item.describe(), if *.kind == Kind::Secret { "neither read nor written" } else { "read, never written" })]
    Kept {
        path: PathBuf,
        item: Item,
        kind: Kind,
    },
    /// Moving it would move something the host keeps.
    #[error("{} is protected: it holds {} ({}), so it may not be moved or removed", .path.display(), .item.describe(), .held.display())]
    Holds {
        path: PathBuf,
        item: Item,
        held: PathBuf,
    },
    /// A protected path of the workspace.
    #[error("{} is protected: it makes other programs run code (git configuration and hooks, sandcrab's project settings), so the file tools never change it; ask the user to change it if it really must", .0.display())]
    Protected(PathBuf),
}

impl Refusal {
    pub(super) fn kept(path: &Path, entry: &Entry, _access: Access) -> Refusal {
        Refusal::Kept {
            path: path.to_path_buf(),
            item: entry.item,
            kind: entry.kind,
        }
    }
}

/// The decisions for one workspace: the registry of what the host keeps,
/// and the workspace's protected paths.
#[derive(Debug, Clone)]
pub struct Judge {
    registry: Arc<Registry>,
    protected: Protected,
    workspace: PathBuf,
}

impl Judge {
    /// Decisions for `workspace` (a real path) with `protected`, under
    /// `registry`.
    pub fn new(registry: Arc<Registry>, protected: Protected, workspace: PathBuf) -> Self {
        Judge {
            registry,
            protected,
            workspace,
        }
    }

    /// The registry it asks.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The workspace's protected paths.
    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// The workspace it judges for.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Whether `access` to `real` (where the path really is: links
    /// resolved, or the real folder it would be created in joined with its
    /// name) may happen.
    pub fn check(&self, real: &Path, access: Access) -> Result<(), Refusal> {
        if let Some(entry) = self.registry.holding(real) {
            let allowed = access == Access::Read && entry.kind == Kind::Integrity;
            if !allowed {
                return Err(Refusal::kept(real, entry, access));
            }
        }
        if access == Access::Move
            && let Some(entry) = self.registry.beneath(real).next()
        {
            return Err(Refusal::Holds {
                path: real.to_path_buf(),
                item: entry.item,
                held: entry.path.clone(),
            });
        }
        if access == Access::Read {
            return Ok(());
        }
        let (shown, protection) = match real.strip_prefix(&self.workspace) {
            Ok(relative) => (
                relative,
                self.protected.protection(relative).or_else(|| {
                    (access == Access::Move && self.protected.leads_to(relative))
                        .then_some(ProtectionKind::ReadOnly)
                }),
            ),
            // Beyond the workspace (a granted folder), git's metadata is
            // still git's.
            Err(_) => (real, self.protected.git_protection_of(real)),
        };
        // A folder laid out as a git folder under another name (a bare
        // repository, which git finds where it runs): its configuration
        // is git's too, and so is the layout itself.
        let bare = self.protected.guards_git()
            && real
                .parent()
                .zip(real.file_name().and_then(|n| n.to_str()))
                .is_some_and(|(dir, name)| super::protected::makes_bare_git(dir, name));
        match (protection, bare) {
            (Some(_), _) | (None, true) => Err(Refusal::Protected(shown.to_path_buf())),
            (None, false) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_neither_read_nor_written_roots_only_read_protected_paths_only_read() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::CredentialStore, &home.join(".ssh"), "d");
        registry.keep(Item::ComponentCache, &home.join(".cache/sandcrab"), "d");
        let judge = Judge::new(Arc::new(registry), Protected::default(), home.clone());
        let key = home.join(".ssh/id_rsa");
        assert!(judge.check(&key, Access::Read).is_err());
        assert!(judge.check(&key, Access::Write).is_err());
        let entry = home.join(".cache/sandcrab/components/x.cwasm");
        assert!(judge.check(&entry, Access::Read).is_ok());
        assert!(judge.check(&entry, Access::Write).is_err());
        // Moving what holds a kept path away.
        assert!(matches!(
            judge.check(&home.join(".cache"), Access::Move),
            Err(Refusal::Holds { .. })
        ));
        assert!(judge.check(&home.join(".cache"), Access::Write).is_ok());
        // Git's metadata, at any depth.
        assert!(judge.check(&home.join(".git"), Access::Write).is_err());
        assert!(
            judge
                .check(&home.join("a/.git/hooks/pre-commit"), Access::Write)
                .is_err()
        );
        assert!(
            judge
                .check(&home.join("a/.git/config"), Access::Read)
                .is_ok()
        );
        assert!(
            judge
                .check(&home.join("a/.git/objects/ab/cd"), Access::Write)
                .is_ok()
        );
        assert!(judge.check(&home.join("src/lib.rs"), Access::Write).is_ok());
        // Outside the workspace, the project's names are not protected,
        // git's metadata is.
        assert!(
            judge
                .check(Path::new("/elsewhere/sandcrab.toml"), Access::Write)
                .is_ok()
        );
        assert!(
            judge
                .check(Path::new("/elsewhere/.git/config"), Access::Write)
                .is_err()
        );
    }
}
