//! Reading files that an attacker may have placed: regular files only
//! (never a FIFO, device or directory, so a read cannot hang or stream
//! forever), size-capped while reading, and optionally without following
//! symbolic links, either in the last component or in any component below
//! a root directory.
//!
//! What is read, written or removed beneath a root on a session's behalf
//! (project documents, `@path` attachments, checkpoints, `/undo`) is
//! judged by the registry of what the host keeps first: a secret is never
//! read, nothing the host keeps is written (see [`crate::kept`]).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

/// Whether a symbolic link in the last path component may be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Read the regular file at `path`, at most `limit` bytes; a bigger file,
/// or anything that is not a regular file, is an error that says so.
pub fn read_regular(path: &Path, limit: u64, links: Links) -> io::Result<Vec<u8>> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| refuse_link(e, path))?;
    read_file_capped(file, limit)
}

/// Open `relative` (components without `..`) beneath the directory `root`,
/// following no symbolic link at any level, and read it as a regular file
/// of at most `limit` bytes.
pub fn read_beneath(root: &Path, relative: &Path, limit: u64) -> io::Result<Vec<u8>> {
    judged(root, relative, crate::Access::Read)?;
    let (dir, last) = parent_beneath(root, relative, false)?;
    let fd = openat(&dir, &last, libc::O_NOFOLLOW | libc::O_NONBLOCK)?;
    read_file_capped(File::from(fd), limit)
}

/// The metadata of `relative` beneath `root` itself (a link is described,
/// not followed), reached without following a symbolic link on the way.
pub fn metadata_beneath(root: &Path, relative: &Path) -> io::Result<std::fs::Metadata> {
    let (dir, last) = parent_beneath(root, relative, false)?;
    let fd = openat(&dir, &last, libc::O_PATH | libc::O_NOFOLLOW)?;
    File::from(fd).metadata()
}

/// Replace (or create) the file `relative` beneath `root` with `bytes`
/// (and `mode`'s permission bits), following no symbolic link at any
/// level: missing directories are created, the content goes to a new file
/// of an unguessable name beside it (created exclusively, so nothing
/// planted there is opened) which is then renamed over the name (a link
/// there is replaced, never written through).
pub fn write_beneath(
    root: &Path,
    relative: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> io::Result<()> {
    use std::io::Write;
    judged(root, relative, crate::Access::Write)?;
    let (dir, last) = parent_beneath(root, relative, true)?;
    let temp = std::ffi::CString::new(format!(".sandcrab-{:016x}", rand::random::<u64>()))
        .expect("no NUL in a hex name");
    // SAFETY: a NUL-terminated name relative to a directory fd we own.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            temp.as_ptr(),
            libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOFOLLOW
                | libc::O_NONBLOCK
                | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we now own.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let permissions = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::Permissions::from_mode(mode.unwrap_or(0o644) & 0o777)
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.set_permissions(permissions))
        .and_then(|()| file.sync_data());
    // SAFETY: names relative to a directory fd we own.
    let renamed = written.and_then(|()| {
        let rc = unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                temp.as_ptr(),
                dir.as_raw_fd(),
                last.as_ptr(),
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    });
    if renamed.is_err() {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
    }
    renamed
}

/// Remove the file (or link) `relative` beneath `root`, following no
/// symbolic link on the way; a name that is already gone is not an error,
/// a directory is.
pub fn remove_beneath(root: &Path, relative: &Path) -> io::Result<()> {
    judged(root, relative, crate::Access::Move)?;
    let (dir, last) = match parent_beneath(root, relative, false) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        found => found?,
    };
    // SAFETY: a name relative to a directory fd we own.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), last.as_ptr(), 0) } < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::NotFound {
            return Err(err);
        }
    }
    Ok(())
}

/// Whether `access` to `relative` beneath `root` may happen on a
/// session's behalf: judged where it is (no link is followed beneath the
/// root, so the names are the place) by the registry in force.
fn judged(root: &Path, relative: &Path, access: crate::Access) -> io::Result<()> {
    let root = root.canonicalize()?;
    let path = root.join(plain_path(relative)?);
    let judge = crate::Judge::new(crate::current(), crate::Protected::none(), root);
    judge
        .check(&path, access)
        .map_err(|refusal| io::Error::new(io::ErrorKind::PermissionDenied, refusal.to_string()))
}

/// `relative` as plain names (no `..`, not absolute).
fn plain_path(relative: &Path) -> io::Result<std::path::PathBuf> {
    let names = plain_components(relative)?;
    Ok(names
        .iter()
        .map(|n| std::ffi::OsStr::from_bytes(n.as_bytes()))
        .collect())
}

/// The directory holding `relative` beneath `root`, reached without
/// following a symbolic link at any level (`create`: making the missing
/// ones), and the last name.
fn parent_beneath(
    root: &Path,
    relative: &Path,
    create: bool,
) -> io::Result<(OwnedFd, std::ffi::CString)> {
    let mut parts = plain_components(relative)?;
    let last = parts.pop().ok_or_else(|| invalid("an empty path"))?;
    let mut dir = open_dir(root)?;
    for part in &parts {
        let flags = libc::O_DIRECTORY | libc::O_NOFOLLOW;
        dir = match openat(&dir, part, flags) {
            Err(err) if create && err.kind() == io::ErrorKind::NotFound => {
                // SAFETY: a NUL-terminated name relative to a directory fd we own.
                if unsafe { libc::mkdirat(dir.as_raw_fd(), part.as_ptr(), 0o755) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                openat(&dir, part, flags)?
            }
            opened => opened?,
        };
    }
    Ok((dir, last))
}

/// The names of `relative`, refusing absolute paths, `..` and empty names.
fn plain_components(relative: &Path) -> io::Result<Vec<std::ffi::CString>> {
    let mut out = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(name) => out.push(
                std::ffi::CString::new(name.as_bytes())
                    .map_err(|_| invalid("a name with a NUL byte"))?,
            ),
            Component::CurDir => {}
            _ => {
                return Err(invalid(&format!(
                    "'{}' is not a plain relative path",
                    relative.display()
                )));
            }
        }
    }
    Ok(out)
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

fn openat(dir: &OwnedFd, name: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name relative to a directory fd we own.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ELOOP) || err.raw_os_error() == Some(libc::ENOTDIR) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link or not a directory; links are not followed",
                    name.to_string_lossy()
                ),
            ));
        }
        return Err(err);
    }
    // SAFETY: a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_file_capped(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(invalid("not a regular file"));
    }
    if meta.len() > limit {
        return Err(too_big(limit));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(limit));
    }
    Ok(bytes)
}

fn refuse_link(err: io::Error, path: &Path) -> io::Error {
    if err.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is a symbolic link, which is not followed",
                path.display()
            ),
        );
    }
    err
}

fn too_big(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than the {limit}-byte limit"),
    )
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_fifos_links_and_oversize_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ok"), "fine").unwrap();
        std::fs::write(d.join("big"), vec![b'x'; 100]).unwrap();
        std::os::unix::fs::symlink(d.join("ok"), d.join("link")).unwrap();
        let fifo = std::ffi::CString::new(d.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: plain mkfifo on a temp path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);

        assert_eq!(
            read_regular(&d.join("ok"), 10, Links::Refuse).unwrap(),
            b"fine"
        );
        assert!(read_regular(&d.join("big"), 10, Links::Follow).is_err());
        assert!(read_regular(&d.join("link"), 10, Links::Refuse).is_err());
        assert_eq!(
            read_regular(&d.join("link"), 10, Links::Follow).unwrap(),
            b"fine"
        );
        // A FIFO with no writer would block a plain open forever.
        let err = read_regular(&d.join("fifo"), 10, Links::Follow).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(read_regular(Path::new("/dev/zero"), 10, Links::Follow).is_err());
    }

    #[test]
    fn beneath_follows_no_link_at_any_level() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("sub/doc.md"), "inside").unwrap();
        std::fs::write(outside.join("doc.md"), "secret").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linkdir")).unwrap();
        std::os::unix::fs::symlink(outside.join("doc.md"), root.join("link.md")).unwrap();

        assert_eq!(
            read_beneath(&root, Path::new("sub/doc.md"), 100).unwrap(),
            b"inside"
        );
        assert!(read_beneath(&root, Path::new("linkdir/doc.md"), 100).is_err());
        assert!(read_beneath(&root, Path::new("link.md"), 100).is_err());
        assert!(read_beneath(&root, Path::new("../outside/doc.md"), 100).is_err());
        assert!(read_beneath(&root, Path::new("/etc/passwd"), 100).is_err());
    }
}
