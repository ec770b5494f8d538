//! Directories as paths, for native builds (the plugin's own unit tests):
//! the same operations over std, never through a link below the root.

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;
use std::time::SystemTime;

use super::{Entry, EntryKind};

/// An open directory.
pub struct Dir(PathBuf);

fn not_through_link(path: &std::path::Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::other(format!("{} is a link", path.display())));
    }
    Ok(())
}

impl Dir {
    pub fn open_path(path: &str) -> io::Result<Dir> {
        if !std::fs::metadata(path)?.is_dir() {
            return Err(io::ErrorKind::NotADirectory.into());
        }
        Ok(Dir(PathBuf::from(path)))
    }

    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&self.0)? {
            let entry = entry?;
            let ty = entry.file_type()?;
            let kind = if ty.is_file() {
                EntryKind::File
            } else if ty.is_dir() {
                EntryKind::Directory
            } else {
                EntryKind::Other
            };
            entries.push(Entry {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind,
            });
        }
        Ok(entries)
    }

    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let path = self.0.join(name);
        not_through_link(&path)?;
        Ok(Dir(path))
    }

    pub fn read_file(&self, name: &str, buffer: &mut Vec<u8>, follow: bool) -> io::Result<()> {
        buffer.clear();
        let path = self.0.join(name);
        if !follow {
            not_through_link(&path)?;
        }
        File::open(path)?.read_to_end(buffer).map(|_| ())
    }

    /// Lines `first` .. `first + max_lines - 1` of the file `name` (what
    /// the host's `read-lines` hands a guest, done here in process).
    pub fn read_lines(
        &self,
        name: &str,
        follow: bool,
        first: u64,
        max_lines: u64,
    ) -> io::Result<super::Window> {
        let mut bytes = Vec::new();
        self.read_file(name, &mut bytes, follow)?;
        let ends: Vec<usize> = memchr::memchr_iter(b'\n', &bytes).collect();
        let total = ends.len() as u64 + u64::from(bytes.last().is_some_and(|b| *b != b'\n'));
        let start_of = |line: u64| -> usize {
            match line {
                0 | 1 => 0,
                n => ends.get(n as usize - 2).map_or(bytes.len(), |e| e + 1),
            }
        };
        let first = first.max(1);
        let start = start_of(first).min(bytes.len());
        let end = start_of(first.saturating_add(max_lines)).min(bytes.len());
        Ok(super::Window {
            text: bytes[start..end.max(start)].to_vec(),
            total,
            size: bytes.len() as u64,
            head: bytes[..bytes.len().min(8192)].to_vec(),
        })
    }

    pub fn read_text_file(&self, name: &str, buffer: &mut Vec<u8>) -> io::Result<bool> {
        self.read_file(name, buffer, false)?;
        Ok(!crate::binary::looks_binary(buffer))
    }

    pub fn is_file(&self, name: &str) -> bool {
        std::fs::metadata(self.0.join(name)).is_ok_and(|m| m.is_file())
    }

    pub fn modified(&self, names: &[&str]) -> Vec<Option<u64>> {
        names
            .iter()
            .map(|name| {
                let time = std::fs::symlink_metadata(self.0.join(name))
                    .ok()?
                    .modified()
                    .ok()?;
                let since = time.duration_since(SystemTime::UNIX_EPOCH).ok()?;
                u64::try_from(since.as_nanos()).ok()
            })
            .collect()
    }
}
