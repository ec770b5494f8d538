//! The session database holds every conversation, tool output and
//! receipt: only its owner may read it. The file (and SQLite's `-wal` and
//! `-shm` beside it, which take the file's mode) is created 0600, and an
//! existing one is checked on open: it must be the user's own, and
//! whatever group or others could read or write is taken away. Its
//! directory must not let others replace it (not writable by others,
//! unless sticky).

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Create `db` owner-only if it is missing; check and tighten it and its
/// directory if not.
pub fn secure(db: &Path) -> Result<(), String> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        check_directory(dir)?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(db)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            tighten(db, 0o600)?;
            for extra in ["-wal", "-shm"] {
                let mut name = db.as_os_str().to_owned();
                name.push(extra);
                let path = std::path::PathBuf::from(name);
                if path.exists() {
                    tighten(&path, 0o600)?;
                }
            }
            Ok(())
        }
        Err(e) => Err(format!("cannot create {}: {e}", db.display())),
    }
}

/// Others must not be able to replace what is in `dir`.
fn check_directory(dir: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "{} can be changed by other users (mode {mode:o}), who could replace the session database; run `chmod go-w {}` or set [store] path to a private directory",
            dir.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// `path` must be the user's; bits beyond `keep` are removed.
fn tighten(path: &Path, keep: u32) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.file_type().is_symlink() {
        // A link (a distribution's layout, or the user's choice) is judged
        // by what it leads to.
        let target = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        return check_mode(path, &target, keep);
    }
    check_mode(path, &meta, keep)
}

fn check_mode(path: &Path, meta: &std::fs::Metadata, keep: u32) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let you = unsafe { libc::geteuid() };
    if meta.uid() != you {
        return Err(format!(
            "{} belongs to user {}, not to you (user {you}): sessions are kept only in a file and directory of your own; set [store] path in {}",
            path.display(),
            meta.uid(),
            crate::user_files::config_file_shown()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & !keep & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & keep)).map_err(
            |e| {
                format!(
                    "{} can be read by others (mode {mode:o}) and cannot be made private: {e}",
                    path.display()
                )
            },
        )?;
        tracing::warn!(
            "{} was open to others (mode {mode:o}); made it private",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_is_private_an_open_one_is_tightened_and_a_shared_directory_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = dir.join("s.db");
        secure(&db).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&db), 0o600);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        secure(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(secure(&db).unwrap_err().contains("chmod go-w"));
    }
}
