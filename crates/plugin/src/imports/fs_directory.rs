//! The resource behind `sandcrab:fs` directory handles: a directory a
//! guest holds open, beneath one of its mounts (its own file so the
//! bindings and the implementation both name it without naming each
//! other).

use std::os::fd::OwnedFd;
use std::sync::Arc;

/// A directory a guest holds open.
pub struct FsDirectory {
    pub(super) fd: OwnedFd,
    /// The mount it lies in, and its path there: a link a read follows
    /// resolves beneath the mount, as WASI resolves it.
    pub(super) mount: Arc<OwnedFd>,
    pub(super) path: String,
}

impl FsDirectory {
    pub(super) fn child(&self, fd: OwnedFd, name: &str) -> FsDirectory {
        FsDirectory {
            fd,
            mount: self.mount.clone(),
            path: if self.path.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", self.path)
            },
        }
    }
}
