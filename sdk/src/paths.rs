//! Resolve the paths a model gives against the workspace, refusing any that
//! lead outside it. This is a lexical check that gives the model a clear
//! message; the WASI sandbox enforces the same boundary underneath (a symlink
//! that leads out of a granted directory fails to open).

use crate::tool::ToolError;

/// Resolve `path` (relative to `root`, or absolute) to a normalized absolute
/// guest path inside `root`. `root` is the workspace root from the call
/// context, e.g. `/workspace`.
pub fn resolve(root: &str, path: &str) -> Result<String, ToolError> {
    let root = root.trim_end_matches('/');
    let root = if root.is_empty() { "/" } else { root };
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{root}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(outside(path, root));
                }
            }
            other => parts.push(other),
        }
    }
    let normalized = format!("/{}", parts.join("/"));
    if is_within(root, &normalized) {
        Ok(normalized)
    } else {
        Err(outside(path, root))
    }
}

/// The path of `absolute` relative to `root` (`.` for the root itself).
pub fn relative_to<'a>(root: &str, absolute: &'a str) -> &'a str {
    let root = root.trim_end_matches('/');
    match absolute.strip_prefix(root) {
        Some("") => ".",
        Some(rest) => rest.trim_start_matches('/'),
        None => absolute,
    }
}

fn is_within(root: &str, path: &str) -> bool {
    root == "/"
        || path == root
        || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

fn outside(path: &str, root: &str) -> ToolError {
    ToolError::Denied(format!(
        "path '{path}' is outside the workspace ({root}); only files inside the workspace are reachable"
    ))
}
