//! `sandcrab:fs/directories`: directories and files read in one call each,
//! beneath the plugin's own mounts. Written once, in version-neutral terms
//! ([`FsError`], [`Kind`], [`Lines`]); each frozen WIT version's traits are
//! implemented by [`fs_version!`], which only converts.
//!
//! What keeps it inside the sandbox: a path opens only inside a mount
//! (longest guest prefix, no `..`), resolved with `openat2(RESOLVE_BENEATH)`
//! so no link leads out of the mount; below that, every name is one plain
//! name opened with `O_NOFOLLOW` (or, for `follow`, beneath its own
//! directory); files open with `O_NONBLOCK` and must be regular files, so a
//! FIFO never blocks the call. A mount is at least readable, so nothing
//! here reads what the guest could not read through WASI.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use wasmtime::component::Resource;

use super::beneath::{DIR_FLAGS, open_beneath};
pub use super::fs_directory::FsDirectory;
use crate::state::HostState;

/// The most one `read-file` call reads, and the longest window one
/// `read-lines` call hands over (bounds the host's buffers).
const MAX_READ: u64 = 16 << 20;
/// How much of a file's start `read-lines` hands over to tell binary from
/// text.
const HEAD: usize = 8 << 10;

/// Why an operation failed (each version has its own copy of this type).
#[derive(Debug)]
pub enum FsError {
    NotFound,
    AccessDenied,
    NotADirectory,
    InvalidName,
    /// What the host keeps, judged by where it really is (the guest sees
    /// access denied; the call's receipt says why).
    Refused,
    Other(String),
}

/// What a name in a directory is, without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    Other,
}

/// A window of a file's lines, counted by the host.
#[derive(Debug, Default)]
pub struct Lines {
    pub text: Vec<u8>,
    pub count: u64,
    pub total: u64,
    pub size: u64,
    pub head: Vec<u8>,
}
/// The most directories one call holds open (each is a host file
/// descriptor; a walk holds one per level).
const MAX_OPEN_DIRECTORIES: usize = 256;

fn error(errno: Errno) -> FsError {
    match errno {
        Errno::NOENT => FsError::NotFound,
        Errno::ACCESS | Errno::PERM | Errno::LOOP | Errno::XDEV | Errno::MLINK => {
            FsError::AccessDenied
        }
        Errno::NOTDIR => FsError::NotADirectory,
        other => FsError::Other(other.to_string()),
    }
}

/// `name` when it is one plain name.
fn plain(name: &str) -> Result<&str, FsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(FsError::InvalidName);
    }
    Ok(name)
}

/// What every version of the interface does, in version-neutral terms.
impl HostState {
    fn fs_dir(&mut self, dir: &Resource<FsDirectory>) -> wasmtime::Result<&FsDirectory> {
        Ok(self.table().get(dir)?)
    }

    /// Whether `access` to the open file or folder `fd` may happen, judged
    /// where it really is; a refusal is recorded for the call's receipt.
    pub(crate) fn judged(&self, fd: &OwnedFd, access: crate::kept::Access) -> Result<(), FsError> {
        let Ok(real) = super::beneath::real_path_of(fd.as_raw_fd()) else {
            return Err(FsError::AccessDenied);
        };
        self.sandbox
            .judge()
            .check(&real, access)
            .map_err(|refusal| {
                self.note_refusal(&refusal);
                FsError::Refused
            })
    }

    /// Hand `dir` to the guest, within the bound on open directories.
    fn hand_out(
        &mut self,
        dir: Result<FsDirectory, Errno>,
    ) -> wasmtime::Result<Result<Resource<FsDirectory>, FsError>> {
        let dir = match dir {
            Ok(dir) => dir,
            Err(e) => return Ok(Err(error(e))),
        };
        if let Err(refused) = self.judged(&dir.fd, crate::kept::Access::Read) {
            return Ok(Err(refused));
        }
        if self.open_directories >= MAX_OPEN_DIRECTORIES {
            return Ok(Err(FsError::Other(format!(
                "too many open directories (at most {MAX_OPEN_DIRECTORIES} per call): drop some"
            ))));
        }
        self.open_directories += 1;
        Ok(Ok(self.table().push(dir)?))
    }

    /// `directory.open`.
    pub(crate) fn fs_open(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<Resource<FsDirectory>, FsError>> {
        let Some((mount, rest)) = self.sandbox.mount_for(&path) else {
            return Ok(Err(FsError::AccessDenied));
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

    /// `directory.entries` and `entries-packed`: each entry's name and
    /// kind, to `each`.
    pub(crate) fn fs_entries(
        &mut self,
        dir: &Resource<FsDirectory>,
        mut each: impl FnMut(&str, Kind),
    ) -> wasmtime::Result<Result<(), FsError>> {
        let dir = self.fs_dir(dir)?;
        let listing = match rustix::fs::Dir::read_from(dir.fd.as_fd()) {
            Ok(listing) => listing,
            Err(e) => return Ok(Err(error(e))),
        };
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
            each(
                name,
                match file_type {
                    FileType::RegularFile => Kind::File,
                    FileType::Directory => Kind::Directory,
                    _ => Kind::Other,
                },
            );
        }
        Ok(Ok(()))
    }

    /// `directory.open-directory`.
    pub(crate) fn fs_open_directory(
        &mut self,
        dir: &Resource<FsDirectory>,
        name: String,
    ) -> wasmtime::Result<Result<Resource<FsDirectory>, FsError>> {
        let name = match plain(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(e)),
        };
        let parent = self.fs_dir(dir)?;
        let opened = rustix::fs::openat(
            &parent.fd,
            name,
            DIR_FLAGS | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map(|fd| parent.child(fd, name));
        self.hand_out(opened)
    }

    /// `directory.read-file`: bytes, and whether they are all there are.
    pub(crate) fn fs_read_file(
        &mut self,
        dir: &Resource<FsDirectory>,
        name: String,
        follow: bool,
        offset: u64,
        max_bytes: u64,
    ) -> wasmtime::Result<Result<(Vec<u8>, bool), FsError>> {
        let name = match plain(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(e)),
        };
        let dir = self.fs_dir(dir)?;
        let file = match open_file(dir, name, follow) {
            Ok(file) => file,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(refused) = self.judged(&file.0, crate::kept::Access::Read) {
            return Ok(Err(refused));
        }
        Ok(read_file(file, offset, max_bytes.min(MAX_READ)))
    }

    /// `directory.read-lines`.
    pub(crate) fn fs_read_lines(
        &mut self,
        dir: &Resource<FsDirectory>,
        name: String,
        follow: bool,
        first: u64,
        max_lines: u64,
    ) -> wasmtime::Result<Result<Lines, FsError>> {
        let name = match plain(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(e)),
        };
        let dir = self.fs_dir(dir)?;
        let (file, size) = match open_file(dir, name, follow) {
            Ok(file) => file,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(refused) = self.judged(&file, crate::kept::Access::Read) {
            return Ok(Err(refused));
        }
        Ok(read_lines(
            std::fs::File::from(file),
            size,
            first.max(1),
            max_lines,
        ))
    }

    /// `directory.modified`.
    pub(crate) fn fs_modified(
        &mut self,
        dir: &Resource<FsDirectory>,
        names: Vec<String>,
    ) -> wasmtime::Result<Vec<Option<u64>>> {
        let dir = self.fs_dir(dir)?;
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

    /// The guest dropped a directory handle.
    pub(crate) fn fs_drop(&mut self, dir: Resource<FsDirectory>) -> wasmtime::Result<()> {
        self.table().delete(dir)?;
        self.open_directories -= 1;
        Ok(())
    }
}

/// The regular file `name` in `dir` (a link followed only with `follow`,
/// and then only beneath the mount), opened non-blocking, and its size.
fn open_file(dir: &FsDirectory, name: &str, follow: bool) -> Result<(OwnedFd, u64), FsError> {
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
        return Err(FsError::Other(
            "not a regular file (a FIFO, socket or device)".to_string(),
        ));
    }
    Ok((fd, u64::try_from(st.st_size).unwrap_or(0)))
}

/// Up to `max` bytes of the open regular file (`size` bytes long) from
/// `offset`, and whether the file ends there.
fn read_file(
    (file, size): (OwnedFd, u64),
    offset: u64,
    max: u64,
) -> Result<(Vec<u8>, bool), FsError> {
    let mut file = std::fs::File::from(file);
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| FsError::Other(e.to_string()))?;
    }
    let size = size.saturating_sub(offset);
    // One byte past `max` tells whether the file goes on.
    let mut bytes = Vec::with_capacity(size.min(max) as usize + 1);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::Other(e.to_string()))?;
    let complete = bytes.len() as u64 <= max;
    bytes.truncate(max as usize);
    Ok((bytes, complete))
}

/// Lines `first` .. `first + max_lines - 1` of `file` (`size` bytes), and
/// how many it has, lines counted natively: only the window (at most
/// [`MAX_READ`] bytes) and the first [`HEAD`] bytes are handed over.
fn read_lines(
    file: std::fs::File,
    size: u64,
    first: u64,
    max_lines: u64,
) -> Result<Lines, FsError> {
    if size <= WHOLE_READ {
        return read_lines_whole(file, first, max_lines);
    }
    read_lines_chunked(file, first, max_lines)
}

/// Files up to this size are read whole for `read-lines`, in one read
/// into the buffer the window is cut from (no zeroing, no second copy).
const WHOLE_READ: u64 = 64 << 20;

/// [`read_lines`] for a file read whole: the window is cut from the bytes
/// read, in place.
fn read_lines_whole(mut file: std::fs::File, first: u64, max_lines: u64) -> Result<Lines, FsError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(WHOLE_READ + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::Other(e.to_string()))?;
    let rewound = |mut file: std::fs::File| -> Result<std::fs::File, FsError> {
        file.seek(SeekFrom::Start(0))
            .map_err(|e| FsError::Other(e.to_string()))?;
        Ok(file)
    };
    if bytes.len() as u64 > WHOLE_READ {
        // It grew while read: the chunked way takes any size.
        return read_lines_chunked(rewound(file)?, first, max_lines);
    }
    let head = bytes[..bytes.len().min(HEAD)].to_vec();
    // Byte offsets where lines `first` and `first + max_lines` begin.
    let stop = first.saturating_add(max_lines);
    let mut start = (first == 1).then_some(0);
    let mut end = None;
    let mut newlines: u64 = 0;
    for at in memchr::memchr_iter(b'\n', &bytes) {
        newlines += 1;
        // Line `newlines + 1` begins after this newline.
        if newlines + 1 == first {
            start = Some(at + 1);
        }
        if newlines + 1 == stop {
            end = Some(at + 1);
        }
    }
    let total = newlines + u64::from(bytes.last().is_some_and(|b| *b != b'\n'));
    let len = bytes.len();
    let (start, end) = match start {
        Some(start) if max_lines > 0 => (start.min(len), end.unwrap_or(len).min(len)),
        _ => (0, 0),
    };
    let end = end.max(start);
    if end - start > MAX_READ as usize {
        // Too long for one window: the chunked way cuts it.
        return read_lines_chunked(rewound(file)?, first, max_lines);
    }
    let count = if max_lines == 0 || first > total {
        0
    } else {
        max_lines.min(total - first + 1)
    };
    bytes.truncate(end);
    bytes.drain(..start);
    Ok(Lines {
        text: bytes,
        count,
        total,
        size: len as u64,
        head,
    })
}

/// [`read_lines`] in chunks, for files of any size (the size is what was
/// read, whatever the file grew or shrank to meanwhile).
fn read_lines_chunked(
    mut file: std::fs::File,
    first: u64,
    max_lines: u64,
) -> Result<Lines, FsError> {
    let last = first.saturating_add(max_lines).saturating_sub(1);
    let mut lines = Lines::default();
    let mut buffer = vec![0u8; 1 << 20];
    // The line the next byte belongs to (1-based), and the last byte read.
    let mut line: u64 = 1;
    let mut last_byte = b'\n';
    let mut window_full = max_lines == 0;
    // Where the current line's bytes begin in the window.
    let mut line_began = 0;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FsError::Other(e.to_string())),
        };
        let chunk = &buffer[..n];
        lines.size += n as u64;
        if lines.head.len() < HEAD {
            let take = (HEAD - lines.head.len()).min(n);
            lines.head.extend_from_slice(&chunk[..take]);
        }
        last_byte = chunk[n - 1];
        if window_full || line > last {
            line += memchr::memchr_iter(b'\n', chunk).count() as u64;
            continue;
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk).chain(std::iter::once(n)) {
            let ends_line = end < n;
            if !window_full && line >= first && line <= last {
                let piece = &chunk[start..(end + usize::from(ends_line)).min(n)];
                let room = MAX_READ as usize - lines.text.len();
                if piece.len() > room {
                    if line == first {
                        // The first line alone is too long: what fits.
                        lines.text.extend_from_slice(&piece[..room]);
                        lines.count = 1;
                    } else {
                        // The window ends before this line.
                        lines.text.truncate(line_began);
                    }
                    window_full = true;
                } else {
                    lines.text.extend_from_slice(piece);
                    lines.count += u64::from(ends_line);
                }
            }
            if ends_line {
                line += 1;
                line_began = lines.text.len();
            }
            start = end + 1;
        }
    }
    // Text after the last line end is one more line.
    let unterminated = last_byte != b'\n';
    if unterminated && !window_full && line >= first && line <= last {
        lines.count += 1;
    }
    lines.total = line - 1 + u64::from(unterminated);
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window and total the plain way: split at every `\n`.
    fn plain(bytes: &[u8], first: u64, max: u64) -> (Vec<u8>, u64, u64) {
        let mut lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
        if bytes.is_empty() {
            lines.clear();
        }
        let window: Vec<u8> = lines
            .iter()
            .skip(first as usize - 1)
            .take(max as usize)
            .flat_map(|l| l.iter().copied())
            .collect();
        let count = lines
            .iter()
            .skip(first as usize - 1)
            .take(max as usize)
            .count();
        (window, count as u64, lines.len() as u64)
    }

    #[test]
    fn read_lines_hands_over_exactly_the_window_the_plain_way_gives() {
        let long: Vec<u8> = (0..300_000).map(|i| b"ab\ncd\r\nxyz\n\n"[i % 12]).collect();
        let texts: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"one".to_vec(),
            b"one\n".to_vec(),
            b"\n\n\n".to_vec(),
            b"a\nb\nc".to_vec(),
            b"a\r\nb\r\n".to_vec(),
            long.clone(),
            [long.as_slice(), b"tail"].concat(),
        ];
        let dir = tempfile::tempdir().unwrap();
        for (i, text) in texts.iter().enumerate() {
            let path = dir.path().join(format!("t{i}"));
            std::fs::write(&path, text).unwrap();
            for first in [1u64, 2, 3, 5, 1000, 60_000, 74_999, 75_000, 75_001, 200_000] {
                for max in [0u64, 1, 2, 7, 2000, 100_000] {
                    for chunked in [false, true] {
                        let file = std::fs::File::open(&path).unwrap();
                        let size = text.len() as u64;
                        let got = if chunked {
                            read_lines_chunked(file, first, max).unwrap()
                        } else {
                            read_lines(file, size, first, max).unwrap()
                        };
                        let (window, count, total) = plain(text, first, max);
                        assert_eq!(got.total, total, "text {i} total");
                        assert_eq!(got.count, count, "text {i} from {first}, {max} lines");
                        assert!(got.text == window, "text {i} from {first}, {max} lines");
                        assert_eq!(got.head, text[..text.len().min(HEAD)]);
                        assert_eq!(got.size, text.len() as u64);
                    }
                }
            }
        }
    }
}
