//! Directories as WASI descriptors, each opened from the workspace preopen
//! one name at a time without following links.

use std::io;

use sandcrab_sdk::{CallContext, ToolError};
use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

use super::Kind;

/// A directory handle (shared: descriptors are reference-counted by the
/// host).
#[derive(Clone)]
pub struct Dir(std::rc::Rc<Descriptor>);

/// The error in words, saying who refused: the file system (the file or
/// folder is not writable by the user sandcrab runs as) or the plugin's
/// grant (the workspace was given read-only).
fn io_err(e: ErrorCode) -> io::Error {
    let (kind, why) = match e {
        ErrorCode::Access => (
            io::ErrorKind::PermissionDenied,
            "permission denied by the file system: the file or its folder is not writable by the user sandcrab runs as".to_string(),
        ),
        ErrorCode::NotPermitted | ErrorCode::ReadOnly => (
            io::ErrorKind::PermissionDenied,
            "refused: this tool was given the workspace read-only".to_string(),
        ),
        ErrorCode::NoEntry => (io::ErrorKind::NotFound, "no such file or folder".to_string()),
        ErrorCode::Exist => (io::ErrorKind::AlreadyExists, "it exists already".to_string()),
        other => (io::ErrorKind::Other, other.message().to_string()),
    };
    io::Error::new(kind, why)
}

const DIR_FLAGS: DescriptorFlags = DescriptorFlags::READ.union(DescriptorFlags::MUTATE_DIRECTORY);

impl Dir {
    /// The workspace preopen.
    pub fn workspace(ctx: &CallContext) -> Result<Dir, ToolError> {
        let root = ctx.workspace_root.trim_end_matches('/');
        get_directories()
            .into_iter()
            .find(|(_, path)| path.trim_end_matches('/') == root)
            .map(|(dir, _)| Dir(std::rc::Rc::new(dir)))
            .ok_or_else(|| ToolError::denied("the workspace is not writable for this tool"))
    }

    pub fn kind(&self, name: &str) -> Option<Kind> {
        let stat = self.0.stat_at(PathFlags::empty(), name).ok()?;
        Some(match stat.type_ {
            DescriptorType::RegularFile => Kind::File {
                links: stat.link_count,
            },
            DescriptorType::Directory => Kind::Directory,
            DescriptorType::SymbolicLink => Kind::Link,
            _ => Kind::Other,
        })
    }

    pub fn open(&self, name: &str) -> io::Result<Dir> {
        self.0
            .open_at(PathFlags::empty(), name, OpenFlags::DIRECTORY, DIR_FLAGS)
            .map(|d| Dir(std::rc::Rc::new(d)))
            .map_err(io_err)
    }

    pub fn create_dir(&self, name: &str) -> io::Result<()> {
        self.0.create_directory_at(name).map_err(io_err)
    }

    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        self.0.remove_directory_at(name).map_err(io_err)
    }

    /// Create `name` (it must not exist) with `content`.
    pub fn write_new(&self, name: &str, content: &[u8]) -> io::Result<()> {
        let file = self
            .0
            .open_at(
                PathFlags::empty(),
                name,
                OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
                DescriptorFlags::WRITE,
            )
            .map_err(io_err)?;
        let mut offset = 0usize;
        while offset < content.len() {
            let n = file
                .write(&content[offset..], offset as u64)
                .map_err(io_err)?;
            if n == 0 {
                return Err(io::Error::other("the write made no progress"));
            }
            offset += n as usize;
        }
        Ok(())
    }

    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.0.rename_at(from, &self.0, to).map_err(io_err)
    }

    pub fn unlink(&self, name: &str) -> io::Result<()> {
        self.0.unlink_file_at(name).map_err(io_err)
    }
}
