//! Reading configuration files: the operator's own files as they are, the
//! project's file only as a regular file that is not a symbolic link.

use std::path::Path;

use super::ConfigError;
use crate::safe_fs::{self, Links};

/// Largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A trusted configuration file (an operator's file may be a symlink).
pub fn trusted_file(path: &Path) -> Result<String, ConfigError> {
    let bytes = safe_fs::read_regular(path, MAX_CONFIG_BYTES, Links::Follow).map_err(|source| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    String::from_utf8(bytes).map_err(|_| ConfigError::Parse {
        path: path.to_path_buf(),
        message: "the file is not UTF-8 text".into(),
    })
}

/// The project file, if there is one; a link, FIFO or oversize file is an
/// error that names the file.
pub fn project_file(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let bytes = safe_fs::read_regular(path, MAX_CONFIG_BYTES, Links::Refuse).map_err(|source| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ConfigError::Parse {
            path: path.to_path_buf(),
            message: "the file is not UTF-8 text".into(),
        })
}
