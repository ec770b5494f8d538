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

/// Read a UTF-8 text file, for tools that write it back: a file that is not
/// valid UTF-8 is an error (decoding it lossily and writing the result
/// would corrupt it).
pub fn read_utf8(ctx: &CallContext, path: &str) -> Result<(String, String), ToolError> {
    let (guest, bytes) = read_bytes(ctx, path)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((guest, text)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            Err(ToolError::failed(format!(
                "{} is not UTF-8 text (invalid byte at offset {at}); edit_file and apply_patch change UTF-8 files only, so it was left as it is (use the shell for other encodings)",
                display(ctx, &guest)
            )))
        }
    }
}

/// The bytes of a regular, non-binary file.
pub fn read_bytes(ctx: &CallContext, path: &str) -> Result<(String, Vec<u8>), ToolError> {
    let guest = resolve(ctx, path)?;
    let shown = display(ctx, &guest).to_string();
    let bytes = match read_fast(&guest) {
        Ok(bytes) => bytes,
        // The slow way names what is wrong (a directory, a FIFO, missing,
        // outside the sandbox) — and reads what the fast way cannot.
        Err(_) => read_checked(&guest, &shown)?,
    };
    if looks_binary(&bytes) {
        return Err(binary_error(&shown, bytes.len() as u64));
    }
    Ok((guest, bytes))
}

/// The error for a binary file of `size` bytes.
pub fn binary_error(shown: &str, size: u64) -> ToolError {
    ToolError::failed(format!(
        "{shown} appears to be a binary file ({size} bytes); only text files can be read"
    ))
}

/// Lines `first` .. `first + max_lines - 1` of the file at `path`, read
/// and counted by the host (None when that fails: the caller's
/// whole-file read then names what is wrong).
pub fn read_window(
    ctx: &CallContext,
    path: &str,
    first: usize,
    max_lines: usize,
) -> Result<Option<(String, crate::walk::Window)>, ToolError> {
    let guest = resolve(ctx, path)?;
    let window = parent_dir(&guest)
        .and_then(|(dir, name)| dir.read_lines(name, true, first as u64, max_lines as u64));
    Ok(window.ok().map(|window| (guest, window)))
}

/// The directory holding the guest path `guest`, and the file's name in it.
fn parent_dir(guest: &str) -> std::io::Result<(crate::walk::Dir, &str)> {
    let (parent, name) = guest
        .rsplit_once('/')
        .ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    let dir = crate::walk::Dir::open_path(if parent.is_empty() { "/" } else { parent })?;
    Ok((dir, name))
}

/// The file in one host call (links followed within the granted
/// directory; only regular files).
fn read_fast(guest: &str) -> std::io::Result<Vec<u8>> {
    let (dir, name) = parent_dir(guest)?;
    let mut bytes = Vec::new();
    dir.read_file(name, &mut bytes, true)?;
    Ok(bytes)
}

/// What a path the tools search or list names.
pub enum Root {
    Directory,
    File,
    /// A FIFO, socket or device: never opened.
    Other,
}

/// Whether `guest` is a directory or a file: in one `sandcrab:fs` call
/// when it is a directory (the common case), else through WASI, which
/// also names precisely what is wrong.
pub fn root_kind(guest: &str, shown: &str) -> Result<Root, ToolError> {
    if crate::walk::Dir::open_path(guest).is_ok() {
        return Ok(Root::Directory);
    }
    let meta = std::fs::metadata(guest).map_err(|e| io_error(shown, e))?;
    Ok(if meta.is_dir() {
        Root::Directory
    } else if meta.is_file() {
        Root::File
    } else {
        Root::Other
    })
}

fn read_checked(guest: &str, shown: &str) -> Result<Vec<u8>, ToolError> {
    let meta = std::fs::metadata(guest).map_err(|e| io_error(shown, e))?;
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
    std::fs::read(guest).map_err(|e| io_error(shown, e))
}

pub use crate::binary::looks_binary;

/// Write `content` to `guest`, creating parent directories; never a
/// protected path, never through a link (see [`crate::guarded`]).
pub fn write(ctx: &CallContext, guest: &str, shown: &str, content: &[u8]) -> Result<(), ToolError> {
    crate::guarded::write(ctx, guest, shown, content)
}

/// Whether `text` ends its lines with CRLF (most of its line ends do).
pub fn uses_crlf(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    crlf > 0 && crlf * 2 >= text.matches('\n').count()
}

/// `text` with every line ending as CRLF.
pub fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}
