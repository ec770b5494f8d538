//! Directories through the host's `sandcrab:fs/directories` interface
//! (`wit/fs/since_v0.2.0`): a directory's names and kinds in one call (in
//! one buffer), a file's bytes in one call, a window of its lines counted
//! by the host, a directory's modification times in one call,
//! all beneath the plugin's own mounts, never through a link below the
//! root.

use std::io;

use super::{Entry, EntryKind};

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/fs/since_v0.2.0",
        world: "fs-user",
    });
}

use bindings::sandcrab::fs::directories::{self as fs, Directory};

/// The most one read asks for (the host's limit per call).
const CHUNK: u64 = 16 << 20;

/// The first read of a file that may be binary: enough for most source
/// files, little for a large binary one.
const FIRST: u64 = 64 << 10;

/// An open directory.
pub struct Dir(Directory);

fn io_err(e: fs::Error) -> io::Error {
    let kind = match e {
        fs::Error::NotFound => io::ErrorKind::NotFound,
        fs::Error::AccessDenied => io::ErrorKind::PermissionDenied,
        fs::Error::NotADirectory => io::ErrorKind::NotADirectory,
        fs::Error::InvalidName => io::ErrorKind::InvalidInput,
        fs::Error::Other(_) => io::ErrorKind::Other,
    };
    let text = match e {
        fs::Error::Other(text) => text,
        other => format!("{other:?}"),
    };
    io::Error::new(kind, text)
}

impl Dir {
    /// The directory at the guest path `path` (links on the way are
    /// followed, within the granted directory that holds it).
    pub fn open_path(path: &str) -> io::Result<Dir> {
        Directory::open(path).map(Dir).map_err(io_err)
    }

    /// Every name in the directory, unsorted (the names cross from the
    /// host in one buffer instead of one string each).
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let packed = self.0.entries_packed().map_err(io_err)?;
        let names = packed.names.split(|b| *b == 0);
        Ok(names
            .zip(packed.kinds)
            .map(|(name, kind)| Entry {
                // The host sends only names that are UTF-8.
                name: String::from_utf8_lossy(name).into_owned(),
                kind: match kind {
                    fs::EntryKind::File => EntryKind::File,
                    fs::EntryKind::Directory => EntryKind::Directory,
                    fs::EntryKind::Other => EntryKind::Other,
                },
            })
            .collect())
    }

    /// Lines `first` .. `first + max_lines - 1` of the file `name`: the
    /// host reads and counts; only the window comes into this instance.
    pub fn read_lines(
        &self,
        name: &str,
        follow: bool,
        first: u64,
        max_lines: u64,
    ) -> io::Result<super::Window> {
        let lines = self
            .0
            .read_lines(name, follow, first, max_lines)
            .map_err(io_err)?;
        Ok(super::Window {
            text: lines.text,
            total: lines.total,
            size: lines.size,
            head: lines.head,
        })
    }

    /// The subdirectory `name` (not through a link).
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        self.0.open_directory(name).map(Dir).map_err(io_err)
    }

    /// Read the regular file `name` into `buffer` (replaced); `follow`
    /// allows `name` to be a link.
    pub fn read_file(&self, name: &str, buffer: &mut Vec<u8>, follow: bool) -> io::Result<()> {
        let first = self.0.read_file(name, follow, 0, CHUNK).map_err(io_err)?;
        *buffer = first.bytes;
        self.read_rest(name, follow, buffer, first.complete)
    }

    /// Read the regular file `name` into `buffer` (replaced) unless it
    /// looks binary ([`crate::binary::looks_binary`]): then only its start is
    /// read, and the answer is false. Most source files come in the first
    /// read; a large binary file is never read whole.
    pub fn read_text_file(&self, name: &str, buffer: &mut Vec<u8>) -> io::Result<bool> {
        let first = self.0.read_file(name, false, 0, FIRST).map_err(io_err)?;
        *buffer = first.bytes;
        if crate::binary::looks_binary(buffer) {
            return Ok(false);
        }
        self.read_rest(name, false, buffer, first.complete)?;
        Ok(true)
    }

    /// Append the rest of the file `name` to `buffer` (what came so far),
    /// unless the last read said it was `complete`.
    fn read_rest(
        &self,
        name: &str,
        follow: bool,
        buffer: &mut Vec<u8>,
        mut complete: bool,
    ) -> io::Result<()> {
        while !complete {
            let more = self
                .0
                .read_file(name, follow, buffer.len() as u64, CHUNK)
                .map_err(io_err)?;
            if more.bytes.is_empty() {
                break;
            }
            buffer.extend_from_slice(&more.bytes);
            complete = more.complete;
        }
        Ok(())
    }

    /// Whether `name`, followed if it is a link, is a regular file.
    pub fn is_file(&self, name: &str) -> bool {
        // Reading nothing from it checks exactly that (a FIFO, socket or
        // device is refused without being waited on).
        self.0.read_file(name, true, 0, 0).is_ok()
    }

    /// When each of `names` (files of this directory) was last modified, in
    /// nanoseconds since the Unix epoch.
    pub fn modified(&self, names: &[&str]) -> Vec<Option<u64>> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        self.0.modified(&names)
    }
}
