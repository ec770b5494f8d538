//! The host's secrets, hidden from every confined program: the bridge
//! tokens (this process's and, in their default place, every other
//! sandcrab's), the operator's configuration file and the session
//! database. A program that may read the whole filesystem (first-party
//! tools run the user's toolchains) must still not read what would let it
//! answer a permission request, drive the bridge or read every
//! conversation. Landlock can only allow, so the secrets are covered in
//! the program's own mount namespace: a directory by an empty, unreadable
//! file system, a file by `/dev/null`.
//!
//! Whoever creates or opens a secret registers it ([`hide`]); every
//! confinement prepared afterwards covers it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static HIDDEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Hide `path` (a file or a directory, existing now or later) from every
/// program confined from now on. Registered where it really is when it
/// exists (a link changed later cannot move the cover), else as an
/// absolute path; a path is registered once.
pub fn hide(path: &Path) {
    let path = std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf());
    let mut hidden = HIDDEN.lock().unwrap_or_else(|e| e.into_inner());
    if !hidden.contains(&path) {
        hidden.push(path);
    }
}

/// Everything registered so far.
pub fn hidden() -> Vec<PathBuf> {
    HIDDEN.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// What covers one secret in a confined program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cover {
    /// An empty file system no one may list (mode 000, read-only).
    Directory(PathBuf),
    /// `/dev/null`, bound over the file.
    File(PathBuf),
}

/// The covers for the registered secrets that exist now, as they are on
/// disk (a link is covered where it leads, so the secret is covered and
/// not the link; the link then leads to the cover).
pub fn covers() -> Vec<Cover> {
    let mut covers = Vec::new();
    for path in hidden() {
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        match std::fs::metadata(&real) {
            Ok(meta) if meta.is_dir() => covers.push(Cover::Directory(real)),
            Ok(meta) if meta.is_file() => covers.push(Cover::File(real)),
            _ => {}
        }
    }
    covers.sort_by(|a, b| cover_path(a).cmp(cover_path(b)));
    covers.dedup();
    covers
}

fn cover_path(cover: &Cover) -> &Path {
    match cover {
        Cover::Directory(p) | Cover::File(p) => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_name_what_exists_where_it_really_is() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("tokens")).unwrap();
        std::fs::write(real.join("config.toml"), "").unwrap();
        std::os::unix::fs::symlink(real.join("config.toml"), real.join("link")).unwrap();
        hide(&real.join("tokens"));
        hide(&real.join("link"));
        hide(&real.join("not-yet"));
        hide(&real.join("tokens"));
        let mine: Vec<Cover> = covers()
            .into_iter()
            .filter(|c| cover_path(c).starts_with(&real))
            .collect();
        assert_eq!(
            mine,
            vec![
                Cover::File(real.join("config.toml")),
                Cover::Directory(real.join("tokens")),
            ]
        );
        // Created later: covered from then on.
        std::fs::write(real.join("not-yet"), "").unwrap();
        assert!(covers().contains(&Cover::File(real.join("not-yet"))));
    }
}
