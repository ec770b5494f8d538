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
//! program started afterwards gets it covered. Directories are the sure
//! cover: a secret written into one later, or replaced there by rename
//! (as tokens and the configuration are saved), stays covered; a file
//! cover holds only for the file that existed when the program started.
//! So sandcrab's own secrets live in dedicated directories, created
//! before any program runs.

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
/// not the link; the link then leads to the cover). A secret inside a
/// covered directory needs no cover of its own; a directory holding one
/// of `visible` (the workspace a program works in) is not covered — the
/// files in it that are secrets are, one by one.
pub fn covers(visible: &[PathBuf]) -> Vec<Cover> {
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
    covers.retain(|c| match c {
        Cover::Directory(dir) => !visible.iter().any(|v| v.starts_with(dir)),
        Cover::File(_) => true,
    });
    covers.sort_by(|a, b| cover_path(a).cmp(cover_path(b)));
    covers.dedup();
    // Sorted, a directory comes before what is inside it.
    let mut kept: Vec<Cover> = Vec::new();
    for cover in covers {
        let inside = kept
            .iter()
            .any(|k| matches!(k, Cover::Directory(dir) if cover_path(&cover).starts_with(dir)));
        if !inside {
            kept.push(cover);
        }
    }
    kept
}

/// Hide the dedicated directory `dir`, creating it (private to the user)
/// first so it is covered before anything is written into it.
pub fn hide_dir(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    hide(dir);
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
        let mine: Vec<Cover> = covers(&[])
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
        assert!(covers(&[]).contains(&Cover::File(real.join("not-yet"))));
        // Inside a covered directory: no cover of its own (the mount point
        // would not exist under the cover).
        std::fs::write(real.join("tokens/serve.token"), "").unwrap();
        hide(&real.join("tokens/serve.token"));
        assert!(!covers(&[]).contains(&Cover::File(real.join("tokens/serve.token"))));
        // A directory holding the workspace is left visible.
        let ws = real.join("tokens/ws");
        assert!(!covers(&[ws]).contains(&Cover::Directory(real.join("tokens"))));
    }
}
