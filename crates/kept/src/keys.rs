//! The host's own keys: 32 random bytes in a file only this user can
//! read (a secret of the registry), created on first use and published
//! atomically, since several sandcrab processes may start at once; a key
//! file another user owns, or others can read, is refused.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The key at `path`, created on first use (0600).
///
/// Written whole to a private temporary file beside it, then hard-linked
/// to `path`, which fails when another process published first; every
/// process then reads the one key that won.
pub fn host_key(path: &Path) -> Result<[u8; 32], String> {
    let dir = path.parent().ok_or("its key has no folder")?;
    if let Some(key) = read_key(path)? {
        return Ok(key);
    }
    let staged = stage_new_key(dir)?;
    let published = std::fs::hard_link(&staged, path);
    let _ = std::fs::remove_file(&staged);
    match published {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("its key: {e}")),
    }
    read_key(path)?.ok_or_else(|| "its key vanished while it was created".to_string())
}

/// The key at `path` if there is one (never created).
pub fn existing_key(path: &Path) -> Result<Option<[u8; 32]>, String> {
    read_key(path)
}

/// Whether `meta` (of a `what`) is this user's own, not a link, and has
/// none of the `forbidden` permission bits.
pub fn owned_and_private(
    meta: &std::fs::Metadata,
    what: &str,
    forbidden: u32,
) -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.file_type().is_symlink() {
        return Err(format!("the {what} is a symbolic link"));
    }
    if meta.uid() != me {
        return Err(format!(
            "the {what} belongs to uid {}, not to you",
            meta.uid()
        ));
    }
    if meta.permissions().mode() & forbidden != 0 {
        return Err(format!(
            "the {what} is accessible by others (mode {:o})",
            meta.permissions().mode() & 0o777
        ));
    }
    Ok(())
}

/// The key at `path`, or `None` when there is none yet.
fn read_key(path: &Path) -> Result<Option<[u8; 32]>, String> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("its key: {e}")),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    owned_and_private(&meta, "key file", 0o077)?;
    let mut key = [0u8; 32];
    file.read_exact(&mut key)
        .map_err(|e| format!("its key ({}): {e}", path.display()))?;
    Ok(Some(key))
}

/// A fresh random key written and synced to a uniquely named 0600 file in
/// `dir`; returns that file's path.
fn stage_new_key(dir: &Path) -> Result<PathBuf, String> {
    let key: [u8; 32] = rand::random();
    let suffix: u64 = rand::random();
    let staged = dir.join(format!(".key-{}-{suffix:016x}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&staged)
        .map_err(|e| format!("its key: {e}"))?;
    let written = file.write_all(&key).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&staged);
        return Err(format!("its key: {e}"));
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::host_key;
    use std::sync::{Arc, Barrier};

    /// Two sandcrab processes starting at once must agree on one key: the
    /// second must never read a key file the first has created but not
    /// yet written.
    #[test]
    fn processes_creating_the_key_at_once_all_read_the_same_whole_key() {
        for _round in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let racers = 8;
            let barrier = Arc::new(Barrier::new(racers));
            let handles: Vec<_> = (0..racers)
                .map(|_| {
                    let key = dir.path().join("test.key");
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        host_key(&key)
                    })
                })
                .collect();
            let keys: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let first = keys[0].clone().expect("the key is readable");
            for key in keys {
                assert_eq!(key.expect("every racer reads the key"), first);
            }
        }
    }
}
