//! Files in the install folder and its staging folder, made without
//! following a symbolic link: whoever could plant a link there must not
//! get an install to write, append or delete through it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Make `path` (and its parents) if missing, private to the user, and
/// check that it is a folder itself, not a link to one.
pub fn plain_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_dir() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} is not a plain folder (a link?); remove it and try again",
            path.display()
        )))
    }
}

/// Create the new file `path` (never an existing one, never through a
/// link).
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path)
}

/// Open the partial download `path` to append to it (`append`) or to
/// start it over, never through a link.
pub fn open_partial(path: &Path, append: bool) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
}

/// Replace `dir/name` with `bytes`: written to a new file of an
/// unguessable name beside it, then renamed over the name (a link there
/// is replaced, never written through).
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let temp = dir.join(format!(".{name}.{:016x}", rand::random::<u64>()));
    let written = create_new(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temp, dir.join(name)));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_written_through_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "kept").unwrap();
        let link = dir.path().join("planted");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_new(&link).is_err());
        assert!(open_partial(&link, true).is_err());
        replace(dir.path(), "planted", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        let linked_dir = dir.path().join("staging");
        std::os::unix::fs::symlink(dir.path(), &linked_dir).unwrap();
        let err = plain_dir(&linked_dir).unwrap_err().to_string();
        assert!(err.contains("not a plain folder"), "{err}");
    }
}
