//! Directories as WASI descriptors: the walk opens every directory and file
//! relative to its parent by one name, never following links below the
//! root.

use std::io;
use std::time::{Duration, SystemTime};

use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

use super::{Entry, EntryKind};

/// The host hands out at most this much per `read` call.
const CHUNK: u64 = 64 * 1024;
/// The first read asks for less: the host zeroes a buffer of the size
/// asked for, and most source files are smaller than this (a short read
/// ends the file in one call).
const FIRST_CHUNK: u64 = 16 * 1024;

/// An open directory.
pub struct Dir(Descriptor);

fn io_err(e: ErrorCode) -> io::Error {
    let kind = match e {
        ErrorCode::Access | ErrorCode::NotPermitted | ErrorCode::ReadOnly => {
            io::ErrorKind::PermissionDenied
        }
        ErrorCode::NoEntry => io::ErrorKind::NotFound,
        ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{e:?}"))
}

impl Dir {
    /// The directory at the guest path `path` (links on the way are
    /// followed, within the preopen that holds it).
    pub fn open_path(path: &str) -> io::Result<Dir> {
        let (preopen, rest) = get_directories()
            .into_iter()
            .filter_map(|(dir, root)| {
                let rest = beneath(&root, path)?.to_string();
                Some((root.len(), dir, rest))
            })
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, dir, rest)| (dir, rest))
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{path}: not mounted"))
            })?;
        let rest = if rest.is_empty() { "." } else { rest.as_str() };
        preopen
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                rest,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map(Dir)
            .map_err(io_err)
    }

    /// Every name in the directory, unsorted.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let stream = self.0.read_directory().map_err(io_err)?;
        let mut entries = Vec::new();
        while let Some(entry) = stream.read_directory_entry().map_err(io_err)? {
            let kind = match entry.type_ {
                DescriptorType::RegularFile => EntryKind::File,
                DescriptorType::Directory => EntryKind::Directory,
                _ => EntryKind::Other,
            };
            entries.push(Entry {
                name: entry.name,
                kind,
            });
        }
        Ok(entries)
    }

    /// The subdirectory `name` (not through a link).
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        self.0
            .open_at(
                PathFlags::empty(),
                name,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map(Dir)
            .map_err(io_err)
    }

    /// Read the file `name` into `buffer` (cleared first); `follow` allows
    /// `name` to be a link.
    pub fn read_file(&self, name: &str, buffer: &mut Vec<u8>, follow: bool) -> io::Result<()> {
        buffer.clear();
        let flags = if follow {
            PathFlags::SYMLINK_FOLLOW
        } else {
            PathFlags::empty()
        };
        let file = self
            .0
            .open_at(flags, name, OpenFlags::empty(), DescriptorFlags::READ)
            .map_err(io_err)?;
        let mut ask = FIRST_CHUNK;
        loop {
            let (bytes, end) = file.read(ask, buffer.len() as u64).map_err(io_err)?;
            let short = (bytes.len() as u64) < ask;
            ask = CHUNK;
            if buffer.is_empty() {
                *buffer = bytes;
            } else {
                buffer.extend_from_slice(&bytes);
            }
            // A regular file reads short only at its end: stop without
            // another call to be told so.
            if end || short {
                return Ok(());
            }
        }
    }

    /// Whether `name`, followed if it is a link, is a regular file.
    pub fn is_file(&self, name: &str) -> bool {
        self.0
            .stat_at(PathFlags::SYMLINK_FOLLOW, name)
            .is_ok_and(|s| s.type_ == DescriptorType::RegularFile)
    }

    /// When the file `name` was last modified (not through a link).
    pub fn modified(&self, name: &str) -> io::Result<SystemTime> {
        let stat = self.0.stat_at(PathFlags::empty(), name).map_err(io_err)?;
        Ok(stat
            .data_modification_timestamp
            .map(|t| SystemTime::UNIX_EPOCH + Duration::new(t.seconds, t.nanoseconds))
            .unwrap_or(SystemTime::UNIX_EPOCH))
    }
}

/// `path` relative to the preopen `root`, when it lies beneath it.
fn beneath<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    let rest = path.strip_prefix(root.trim_end_matches('/'))?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    Some(rest.trim_matches('/'))
}
