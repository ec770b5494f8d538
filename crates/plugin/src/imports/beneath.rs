//! Opening what a plugin names beneath one of its mounts, and finding
//! where an open file really is: shared by both file interfaces
//! (`sandcrab:fs` and the guarded `wasi:filesystem`).

use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::path::PathBuf;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Where the open file or folder `fd` really is.
pub(crate) fn real_path_of(fd: RawFd) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
}

/// Directories are opened non-blocking too: calls run on the caller's
/// task, and nothing named like a directory may hold it (a FIFO fails
/// `O_DIRECTORY` before it could block, and this makes that explicit).
pub(crate) const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);

/// Open `path` (relative, may be several names) beneath `root`, following
/// links only while they stay beneath it.
pub(crate) fn open_beneath<Fd: AsFd>(
    root: Fd,
    path: &str,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    let root = root.as_fd();
    match rustix::fs::openat2(
        root,
        path,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(Errno::NOSYS) => {
            // Kernels before 5.6: one name at a time, no links at all.
            let names: Vec<&str> = path
                .split('/')
                .filter(|n| !n.is_empty() && *n != ".")
                .collect();
            let Some((last, parents)) = names.split_last() else {
                return rustix::fs::openat(root, ".", flags, Mode::empty());
            };
            let mut dir = rustix::fs::openat(root, ".", DIR_FLAGS, Mode::empty())?;
            for name in parents {
                if *name == ".." {
                    return Err(Errno::XDEV);
                }
                dir = rustix::fs::openat(&dir, *name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())?;
            }
            if *last == ".." {
                return Err(Errno::XDEV);
            }
            rustix::fs::openat(&dir, *last, flags | OFlags::NOFOLLOW, Mode::empty())
        }
        other => other,
    }
}
