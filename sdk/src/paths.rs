//! Resolve the paths a model gives against the workspace, refusing any that
//! lead outside it. This is a lexical check that gives the model a clear
//! message; the WASI sandbox enforces the same boundary underneath (a
//! symlink that leads out of a granted directory fails to open).

use crate::tool::{CallContext, ToolError};

/// Resolve `path` — relative to the working directory (the workspace root
/// unless the agent works in a subdirectory), absolute inside the guest's
/// workspace root, or absolute under the host's workspace path (what the
/// model sees) — to a normalized guest path inside the workspace.
pub fn resolve(ctx: &CallContext, path: &str) -> Result<String, ToolError> {
    let host_root = ctx.host_workspace_root.trim_end_matches('/');
    let guest_root = ctx.workspace_root.trim_end_matches('/');
    let mapped = match path.strip_prefix(host_root) {
        Some(rest) if !host_root.is_empty() && (rest.is_empty() || rest.starts_with('/')) => {
            format!("{guest_root}{rest}")
        }
        _ if !path.starts_with('/') => {
            let base = ctx.working_dir.trim_end_matches('/');
            let base = if base.is_empty() { guest_root } else { base };
            format!("{base}/{path}")
        }
        _ => path.to_string(),
    };
    resolve_in(guest_root, &mapped).map_err(|_| outside(path, host_root))
}

/// Resolve `path` against `root` (both guest paths); an error if the
/// result is not inside `root`.
pub fn resolve_in(root: &str, path: &str) -> Result<String, ToolError> {
    let root = root.trim_end_matches('/');
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

/// `path` (a guest path inside the workspace) relative to the workspace
/// root, `.` for the root itself.
pub fn relative<'a>(ctx: &CallContext, path: &'a str) -> &'a str {
    let root = ctx.workspace_root.trim_end_matches('/');
    match path.strip_prefix(root) {
        Some("") => ".",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => path,
    }
}

fn is_within(root: &str, path: &str) -> bool {
    root.is_empty()
        || path == root
        || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

fn outside(path: &str, root: &str) -> ToolError {
    ToolError::Denied(format!(
        "path '{path}' is outside the workspace ({root}); only files inside the workspace are reachable"
    ))
}

/// The paths the host protects unless the operator changed the list:
/// files that make other programs run code later. Used where a call's
/// context does not carry the list (a shard of a sharded call).
pub const DEFAULT_PROTECTED: &[&str] = &[
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks",
    ".sandcrab",
    "sandcrab.toml",
];
