//! `sandcrab:fs/directories`: directories and files read in one call each,
//! beneath the plugin's own mounts.
//!
//! What keeps it inside the sandbox: a path opens only inside a mount
//! (longest guest prefix, no `..`), resolved with `openat2(RESOLVE_BENEATH)`
//! so no link leads out of the mount; below that, every name is one plain
//! name opened with `O_NOFOLLOW` (or, for `follow`, beneath its own
//! directory); files open with `O_NONBLOCK` and must be regular files, so a
//! FIFO never blocks the call. A mount is at least readable, so nothing
//! here reads what the guest could not read through WASI.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use wasmtime::component::Resource;

pub use super::fs_directory::FsDirectory;
use crate::plugin::state::HostState;
use crate::plugin::wit::fs_v0_1_0::sandcrab::fs::directories::{
    Content, Entry, EntryKind, Error, Host, HostDirectory,
};

/// The most one `read-file` call reads (bounds the host's buffer).
const MAX_READ: u64 = 16 << 20;
/// The most directories one call holds open (each is a host file
/// descriptor; a walk holds one per level).
const MAX_OPEN_DIRECTORIES: usize = 256;

fn error(errno: Errno) -> Error {
    match errno {
        Errno::NOENT => Error::NotFound,
        Errno::ACCESS | Errno::PERM | Errno::LOOP | Errno::XDEV | Errno::MLINK => {
            Error::AccessDenied
        }
        Errno::NOTDIR => Error::NotADirectory,
        other => Error::Other(other.to_string()),
    }
}

/// `name` when it is one plain name.
fn plain(name: &str) -> Result<&str, Error> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Error::InvalidName);
    }
    Ok(name)
}

/// Directories are opened non-blocking too: calls run on the caller's
/// task, and nothing named like a directory may hold it (a FIFO fails
/// `O_DIRECTORY` before it could block, and this makes that explicit).
const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);

/// Open `path` (relative, may be several names) beneath `root`, following
/// links only while they stay beneath it.
fn open_beneath(root: &OwnedFd, path: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
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

impl HostState {
    fn fs_dir(&mut self, dir: &Resource<FsDirectory>) -> wasmtime::Result<&FsDirectory> {
        Ok(self.table().get(dir)?)
    }

    /// Hand `dir` to the guest, within the bound on open directories.
    fn hand_out(
        &mut self,
        dir: Result<FsDirectory, Errno>,
    ) -> wasmtime::Result<Result<Resource<FsDirectory>, Error>> {
        let dir = match dir {
            Ok(dir) => dir,
            Err(e) => return Ok(Err(error(e))),
        };
        if self.open_directories >= MAX_OPEN_DIRECTORIES {
            return Ok(Err(Error::Other(format!(
                "too many open directories (at most {MAX_OPEN_DIRECTORIES} per call): drop some"
            ))));
        }
        self.open_directories += 1;
        Ok(Ok(self.table().push(dir)?))
    }
}

impl Host for HostState {}

impl HostDirectory for HostState {
    fn open(&mut self, path: String) -> wasmtime::Result<Result<Resource<FsDirectory>, Error>> {
        let Some((mount, rest)) = self.sandbox.mount_for(&path) else {
            return Ok(Err(Error::AccessDenied));
        };
        let rest = rest.trim_matches('/').to_string();
        let opened = rustix::fs::open(&mount.host, DIR_FLAGS, Mode::empty()).and_then(|root| {
            let fd = if rest.is_empty() {
                rustix::fs::openat(&root, ".", DIR_FLAGS, Mode::empty())?
            } else {
                open_beneath(&root, &rest, DIR_FLAGS)?
            };
            Ok(FsDirectory {
                fd,
                mount: Arc::new(root),
                path: rest,
            })
        });
        self.hand_out(opened)
    }

    fn entries(
        &mut self,
        dir: Resource<FsDirectory>,
    ) -> wasmtime::Result<Result<Vec<Entry>, Error>> {
        let dir = self.fs_dir(&dir)?;
        let listing = match rustix::fs::Dir::read_from(dir.fd.as_fd()) {
            Ok(listing) => listing,
            Err(e) => return Ok(Err(error(e))),
        };
        let mut entries = Vec::new();
        for entry in listing {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return Ok(Err(error(e))),
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                // Not UTF-8: WASI guests cannot name it either.
                continue;
            };
            let file_type = match entry.file_type() {
                FileType::Unknown => rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode))
                    .unwrap_or(FileType::Unknown),
                known => known,
            };
            let kind = match file_type {
                FileType::RegularFile => EntryKind::File,
                FileType::Directory => EntryKind::Directory,
                _ => EntryKind::Other,
            };
            entries.push(Entry {
                name: name.to_string(),
                kind,
            });
        }
        Ok(Ok(entries))
    }

    fn open_directory(
        &mut self,
        dir: Resource<FsDirectory>,
        name: String,
    ) -> wasmtime::Result<Result<Resource<FsDirectory>, Error>> {
        let name = match plain(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(e)),
        };
        let parent = self.fs_dir(&dir)?;
        let opened = rustix::fs::openat(
            &parent.fd,
            name,
            DIR_FLAGS | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map(|fd| parent.child(fd, name));
        self.hand_out(opened)
    }

    fn read_file(
        &mut self,
        dir: Resource<FsDirectory>,
        name: String,
        follow: bool,
        offset: u64,
        max_bytes: u64,
    ) -> wasmtime::Result<Result<Content, Error>> {
        let name = match plain(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(e)),
        };
        let dir = self.fs_dir(&dir)?;
        Ok(read_file(
            dir,
            name,
            follow,
            offset,
            max_bytes.min(MAX_READ),
        ))
    }

    fn modified(
        &mut self,
        dir: Resource<FsDirectory>,
        names: Vec<String>,
    ) -> wasmtime::Result<Vec<Option<u64>>> {
        let dir = self.fs_dir(&dir)?;
        Ok(names
            .iter()
            .map(|name| {
                let name = plain(name).ok()?;
                let st = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
                let seconds = u64::try_from(st.st_mtime).ok()?;
                let nanos = st.st_mtime_nsec;
                seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
            })
            .collect())
    }

    fn drop(&mut self, dir: Resource<FsDirectory>) -> wasmtime::Result<()> {
        self.table().delete(dir)?;
        self.open_directories -= 1;
        Ok(())
    }
}

/// Up to `max` bytes of the regular file `name` in `dir` from `offset`.
fn read_file(
    dir: &FsDirectory,
    name: &str,
    follow: bool,
    offset: u64,
    max: u64,
) -> Result<Content, Error> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = if follow {
        let path = if dir.path.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", dir.path)
        };
        open_beneath(&dir.mount, &path, flags)
    } else {
        rustix::fs::openat(&dir.fd, name, flags | OFlags::NOFOLLOW, Mode::empty())
    }
    .map_err(error)?;
    let st = rustix::fs::fstat(&fd).map_err(error)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::Other(
            "not a regular file (a FIFO, socket or device)".to_string(),
        ));
    }
    let mut file = std::fs::File::from(fd);
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::Other(e.to_string()))?;
    }
    let size = u64::try_from(st.st_size)
        .unwrap_or(0)
        .saturating_sub(offset);
    // One byte past `max` tells whether the file goes on.
    let mut bytes = Vec::with_capacity(size.min(max) as usize + 1);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Other(e.to_string()))?;
    let complete = bytes.len() as u64 <= max;
    bytes.truncate(max as usize);
    Ok(Content { bytes, complete })
}
