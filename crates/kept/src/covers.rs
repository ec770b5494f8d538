//! How what the host keeps is covered in a confined program's own mount
//! namespace. Landlock can only allow, so a secret inside a folder a
//! program may read is covered (a folder by an empty file system no one
//! may list, a file by `/dev/null`), an integrity root or protected path
//! inside a folder it may write is bound read-only, and every folder
//! between a writable root and a covered path is pinned (bound onto
//! itself): a mount point cannot be renamed or removed, so the program
//! cannot move the covered path away and make a new one in its place.

use std::path::{Path, PathBuf};

use super::{Kind, ProtectionKind, Registry};

/// What is done to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverKind {
    /// Unreadable: an empty file system over a folder, `/dev/null` over a
    /// file.
    Hide,
    /// Bound read-only onto itself.
    ReadOnly,
    /// Bound onto itself: it stays writable, but cannot be moved.
    Pin,
}

/// One path to cover, as it is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    pub path: PathBuf,
    pub kind: CoverKind,
    pub is_dir: bool,
}

/// Why a program cannot be given its covers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the protected path {} is a symbolic link, so it cannot be kept read-only; no program runs until it is removed (or the operator lifts the protection with [policy] protected_paths)",
    .0.display()
)]
pub struct LinkedProtectedPath(pub PathBuf);

impl Registry {
    /// The covers of a program that may write beneath `writable` and
    /// works in `visible` (its workspace and granted folders), with the
    /// protected paths `protected` that exist where it starts. Ordered so
    /// that a folder is mounted before what is inside it.
    pub fn covers(
        &self,
        protected: &[(PathBuf, ProtectionKind)],
        writable: &[PathBuf],
        visible: &[PathBuf],
    ) -> Result<Vec<Cover>, LinkedProtectedPath> {
        let mut covers: Vec<Cover> = Vec::new();
        for entry in &self.entries {
            // As it is on disk now (a link is covered where it leads).
            let Ok(path) = std::fs::canonicalize(&entry.path) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            // A folder, a file, or a socket (an agent's): each can be
            // covered.
            {
                use std::os::unix::fs::FileTypeExt;
                let kind = meta.file_type();
                if !(kind.is_dir() || kind.is_file() || kind.is_socket()) {
                    continue;
                }
            }
            // A folder that holds what the program works in cannot be
            // covered whole.
            if meta.is_dir() && visible.iter().any(|v| v.starts_with(&path)) {
                continue;
            }
            let kind = match entry.kind {
                Kind::Secret => CoverKind::Hide,
                Kind::Integrity if inside_any(&path, writable) => CoverKind::ReadOnly,
                Kind::Integrity => continue,
            };
            covers.push(Cover {
                path,
                kind,
                is_dir: meta.is_dir(),
            });
        }
        for (path, protection) in protected {
            let meta = match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(LinkedProtectedPath(path.clone()));
                }
                Ok(meta) => meta,
                Err(_) => continue,
            };
            covers.push(Cover {
                path: path.clone(),
                kind: match protection {
                    ProtectionKind::ReadOnly => CoverKind::ReadOnly,
                    ProtectionKind::Pinned => CoverKind::Pin,
                },
                is_dir: meta.is_dir(),
            });
        }
        add_pins(&mut covers, writable);
        Ok(ordered(covers))
    }
}

fn inside_any(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// Pin every folder between a writable root and a covered path.
fn add_pins(covers: &mut Vec<Cover>, writable: &[PathBuf]) {
    let mut pins = Vec::new();
    for cover in covers.iter() {
        for root in writable {
            if cover.path == *root || !cover.path.starts_with(root) {
                continue;
            }
            let mut at = cover.path.parent();
            while let Some(dir) = at {
                if dir == root.as_path() || !dir.starts_with(root) {
                    break;
                }
                pins.push(Cover {
                    path: dir.to_path_buf(),
                    kind: CoverKind::Pin,
                    is_dir: true,
                });
                at = dir.parent();
            }
        }
    }
    covers.extend(pins);
}

/// Parents before children; one cover per path (the strictest); nothing
/// inside a hidden folder (its mount point is gone). Inside a read-only
/// folder a secret is still hidden (a mount needs no write), while pins
/// and read-only binds there add nothing and are dropped.
fn ordered(mut covers: Vec<Cover>) -> Vec<Cover> {
    let rank = |k: CoverKind| match k {
        CoverKind::Hide => 0,
        CoverKind::ReadOnly => 1,
        CoverKind::Pin => 2,
    };
    covers.sort_by(|a, b| a.path.cmp(&b.path).then(rank(a.kind).cmp(&rank(b.kind))));
    covers.dedup_by(|later, earlier| later.path == earlier.path);
    let mut kept: Vec<Cover> = Vec::new();
    for cover in covers {
        let shadowed = kept.iter().any(|k| {
            let inside = k.path != cover.path && cover.path.starts_with(&k.path);
            inside
                && match k.kind {
                    CoverKind::Hide => true,
                    CoverKind::ReadOnly => cover.kind != CoverKind::Hide,
                    CoverKind::Pin => false,
                }
        });
        if !shadowed {
            kept.push(cover);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::super::Item;
    use super::*;

    #[test]
    fn secrets_are_hidden_roots_read_only_and_the_way_to_them_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".config/sandcrab/tokens")).unwrap();
        std::fs::create_dir_all(home.join(".cache/sandcrab")).unwrap();
        std::fs::create_dir_all(home.join("ws/.git")).unwrap();
        std::fs::write(home.join("ws/.git/config"), "").unwrap();
        std::fs::write(home.join("ca.pem"), "").unwrap();
        let mut registry = Registry::new();
        registry.keep(Item::OperatorConfig, &home.join(".config/sandcrab"), "d");
        registry.keep(
            Item::BridgeTokens,
            &home.join(".config/sandcrab/tokens"),
            "d",
        );
        registry.keep(Item::ComponentCache, &home.join(".cache/sandcrab"), "d");
        registry.keep(Item::CaFile, &home.join("ca.pem"), "d");
        registry.keep(Item::CredentialStore, &home.join(".ssh"), "d");
        let protected = vec![
            (home.join("ws/.git"), ProtectionKind::Pinned),
            (home.join("ws/.git/config"), ProtectionKind::ReadOnly),
        ];
        let covers = registry
            .covers(&protected, std::slice::from_ref(&home), &[home.join("ws")])
            .unwrap();
        let seen: Vec<(PathBuf, CoverKind)> = covers
            .iter()
            .map(|c| (c.path.strip_prefix(&home).unwrap().to_path_buf(), c.kind))
            .collect();
        use CoverKind::*;
        assert_eq!(
            seen,
            vec![
                (".cache".into(), Pin),
                (".cache/sandcrab".into(), ReadOnly),
                (".config".into(), Pin),
                (".config/sandcrab".into(), Hide),
                ("ca.pem".into(), ReadOnly),
                ("ws".into(), Pin),
                ("ws/.git".into(), Pin),
                ("ws/.git/config".into(), ReadOnly),
            ]
        );
        // A secret inside a read-only root stays hidden.
        let mut inner = Registry::new();
        inner.keep(Item::TrustedPlugins, &home.join(".cache"), "d");
        std::fs::write(home.join(".cache/token"), "").unwrap();
        inner.keep(Item::OperatorNamed, &home.join(".cache/token"), "d");
        let covers = inner.covers(&[], std::slice::from_ref(&home), &[]).unwrap();
        assert!(
            covers
                .iter()
                .any(|c| c.path == home.join(".cache/token") && c.kind == Hide),
            "{covers:?}"
        );
        // Not writable: integrity roots need no cover, nothing is pinned.
        let covers = registry.covers(&[], &[], &[]).unwrap();
        assert!(covers.iter().all(|c| c.kind == Hide), "{covers:?}");
    }

    #[test]
    fn a_protected_link_stops_every_program() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("sandcrab.toml")).unwrap();
        let err = Registry::new()
            .covers(
                &[(ws.join("sandcrab.toml"), ProtectionKind::ReadOnly)],
                std::slice::from_ref(&ws),
                std::slice::from_ref(&ws),
            )
            .unwrap_err();
        assert_eq!(err.0, ws.join("sandcrab.toml"));
    }
}
