//! Directories as paths, for native builds (the plugin's own unit tests):
//! the same operations over std, checked with `symlink_metadata`.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use sandcrab_sdk::{CallContext, ToolError};

use super::Kind;

#[derive(Clone)]
pub struct Dir(PathBuf);

impl Dir {
    pub fn workspace(ctx: &CallContext) -> Result<Dir, ToolError> {
        Ok(Dir(PathBuf::from(&ctx.workspace_root)))
    }

    pub fn kind(&self, name: &str) -> Option<Kind> {
        let meta = std::fs::symlink_metadata(self.0.join(name)).ok()?;
        let ty = meta.file_type();
        Some(if ty.is_symlink() {
            Kind::Link
        } else if ty.is_dir() {
            Kind::Directory
        } else if ty.is_file() {
            Kind::File {
                links: meta.nlink(),
            }
        } else {
            Kind::Other
        })
    }

    pub fn open(&self, name: &str) -> io::Result<Dir> {
        Ok(Dir(self.0.join(name)))
    }

    pub fn create_dir(&self, name: &str) -> io::Result<()> {
        std::fs::create_dir(self.0.join(name))
    }

    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        std::fs::remove_dir(self.0.join(name))
    }

    pub fn write_new(&self, name: &str, content: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.0.join(name))?;
        file.write_all(content)
    }

    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.0.join(from), self.0.join(to))
    }

    pub fn unlink(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.0.join(name))
    }
}
