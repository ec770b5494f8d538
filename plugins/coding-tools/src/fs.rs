//! Path resolution and file access with errors the model can act on.

use std::io::ErrorKind;

use sandcrab_sdk::paths;
use sandcrab_sdk::{CallContext, ToolError};

/// The `file_path` parameter every file tool takes.
pub fn file_path_schema() -> sandcrab_sdk::Schema {
    sandcrab_sdk::Schema::string(
        "Path of the file, relative to the workspace or absolute inside it",
    )
}

/// Resolve a path the model gave to a guest path inside the workspace.
pub fn resolve(ctx: &CallContext, path: &str) -> Result<String, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::invalid("the path is empty"));
    }
    paths::resolve(ctx, path)
}

/// How a path is shown to the model: relative to the workspace.
pub fn display<'a>(ctx: &CallContext, guest: &'a str) -> &'a str {
    paths::relative(ctx, guest)
}

/// Turn an I/O error on `shown` into a message for the model.
pub fn io_error(shown: &str, err: std::io::Error) -> ToolError {
    match err.kind() {
        ErrorKind::NotFound => ToolError::failed(format!("file not found: {shown}")),
        ErrorKind::PermissionDenied => ToolError::denied(format!(
            "access to {shown} was denied by the sandbox (it may lead outside the workspace, or the workspace is read-only)"
        )),
        ErrorKind::IsADirectory => ToolError::failed(format!("{shown} is a directory")),
        ErrorKind::NotADirectory => {
            ToolError::failed(format!("a parent of {shown} is not a directory"))
        }
        _ => {
            // WASI reports an escape through a symlink as EPERM/EACCES with
            // "Operation not permitted".
            let text = err.to_string();
            if text.contains("not permitted") {
                ToolError::denied(format!(
                    "access to {shown} was denied by the sandbox: {text}"
                ))
            } else {
                ToolError::failed(format!("{shown}: {text}"))
            }
        }
    }
}

/// Read a text file; binary files and directories are errors.
pub fn read_text(ctx: &CallContext, path: &str) -> Result<(String, String), ToolError> {
    let guest = resolve(ctx, path)?;
    let shown = display(ctx, &guest).to_string();
    let meta = std::fs::metadata(&guest).map_err(|e| io_error(&shown, e))?;
    if meta.is_dir() {
        return Err(ToolError::failed(format!(
            "{shown} is a directory, not a file (use list_dir to see what it holds)"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::failed(format!(
            "{shown} is not a regular file (a FIFO, socket or device); only files can be read"
        )));
    }
    let bytes = std::fs::read(&guest).map_err(|e| io_error(&shown, e))?;
    if looks_binary(&bytes) {
        return Err(ToolError::failed(format!(
            "{shown} appears to be a binary file ({} bytes); only text files can be read",
            bytes.len()
        )));
    }
    // SIMD validation (simd128 on wasm): several times faster than std's.
    let text = if simdutf8::basic::from_utf8(&bytes).is_ok() {
        // SAFETY: just validated as UTF-8.
        unsafe { String::from_utf8_unchecked(bytes) }
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok((guest, text))
}

/// A NUL byte in the first 8 KiB means binary.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

/// Write `content` to `guest`, creating parent directories; never a
/// protected path, never through a link (see [`crate::write_guard`]).
pub fn write(ctx: &CallContext, guest: &str, shown: &str, content: &[u8]) -> Result<(), ToolError> {
    crate::write_guard::write(ctx, guest, shown, content)
}
