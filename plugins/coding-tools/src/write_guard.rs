//! Where the file tools may write, enforced as they write.
//!
//! - never a protected path (`.git/config`, `.git/hooks`, `.sandcrab`,
//!   `sandcrab.toml` unless the operator changed the list; the host passes
//!   it in `SANDCRAB_PROTECTED`): files that make other programs run code
//!   later;
//! - never through a symbolic link: every directory on the way is opened
//!   from the workspace one name at a time without following links, so the
//!   path checked is the path written (no link can be swapped in between);
//! - never a file with other hard links (one could be a protected file).

use sandcrab_sdk::{CallContext, ToolError};

/// The protected paths (relative to the workspace) this call must respect.
pub fn protected_paths() -> Vec<String> {
    match std::env::var("SANDCRAB_PROTECTED") {
        Ok(list) => list
            .lines()
            .map(|l| l.trim().trim_matches('/').to_string())
            .filter(|l| !l.is_empty())
            .collect(),
        Err(_) => [".git/config", ".git/hooks", ".sandcrab", "sandcrab.toml"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    }
}

/// `guest` (inside the workspace) as names relative to the workspace root.
fn names<'a>(ctx: &CallContext, guest: &'a str) -> Vec<&'a str> {
    let root = ctx.workspace_root.trim_end_matches('/');
    guest
        .strip_prefix(root)
        .unwrap_or(guest)
        .split('/')
        .filter(|n| !n.is_empty() && *n != ".")
        .collect()
}

/// Refuse a write to a protected path.
pub fn check_protected(ctx: &CallContext, guest: &str, shown: &str) -> Result<(), ToolError> {
    let rel = names(ctx, guest).join("/");
    for p in protected_paths() {
        if rel == p || rel.starts_with(&format!("{p}/")) {
            return Err(ToolError::denied(format!(
                "{shown} is protected: it makes other programs run code (git configuration and hooks, sandcrab's project settings), so the file tools never change it. Ask the user to edit it if it really must change."
            )));
        }
    }
    Ok(())
}

/// Write `content` to `guest`, creating parent directories.
pub fn write(ctx: &CallContext, guest: &str, shown: &str, content: &[u8]) -> Result<(), ToolError> {
    check_protected(ctx, guest, shown)?;
    imp::write(ctx, &names(ctx, guest), shown, content)
}

/// Delete the file `guest`.
pub fn remove(ctx: &CallContext, guest: &str, shown: &str) -> Result<(), ToolError> {
    check_protected(ctx, guest, shown)?;
    imp::remove(ctx, &names(ctx, guest), shown)
}

fn link_error(shown: &str, name: &str) -> ToolError {
    ToolError::denied(format!(
        "cannot write {shown}: '{name}' on the way is a symbolic link, and the file tools never write through links (use the path it points to)"
    ))
}

fn hard_link_error(shown: &str) -> ToolError {
    ToolError::denied(format!(
        "cannot write {shown}: the file has other hard links, and a write would change them too"
    ))
}

#[cfg(target_family = "wasm")]
mod imp {
    use sandcrab_sdk::{CallContext, ToolError};
    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::{hard_link_error, link_error};

    fn failed(shown: &str, e: ErrorCode) -> ToolError {
        match e {
            ErrorCode::Access | ErrorCode::NotPermitted | ErrorCode::ReadOnly => ToolError::denied(
                format!("writing {shown} was denied by the sandcrab sandbox ({e:?})"),
            ),
            ErrorCode::IsDirectory => ToolError::failed(format!("{shown} is a directory")),
            ErrorCode::NoEntry => ToolError::failed(format!("file not found: {shown}")),
            other => ToolError::failed(format!("{shown}: {other:?}")),
        }
    }

    fn workspace(ctx: &CallContext) -> Result<Descriptor, ToolError> {
        let root = ctx.workspace_root.trim_end_matches('/');
        get_directories()
            .into_iter()
            .find(|(_, path)| path.trim_end_matches('/') == root)
            .map(|(dir, _)| dir)
            .ok_or_else(|| ToolError::denied("the workspace is not writable for this tool"))
    }

    /// Whether `name` in `dir` is a symbolic link.
    fn is_link(dir: &Descriptor, name: &str) -> bool {
        dir.stat_at(PathFlags::empty(), name)
            .is_ok_and(|s| s.type_ == DescriptorType::SymbolicLink)
    }

    /// The directory holding the last of `names`, opened one name at a
    /// time with no link followed (missing ones created when `create`).
    fn parent(
        ctx: &CallContext,
        names: &[&str],
        shown: &str,
        create: bool,
    ) -> Result<Descriptor, ToolError> {
        let mut dir = workspace(ctx)?;
        let flags = DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY;
        for name in &names[..names.len().saturating_sub(1)] {
            let open =
                |d: &Descriptor| d.open_at(PathFlags::empty(), name, OpenFlags::DIRECTORY, flags);
            dir = match open(&dir) {
                Ok(next) => next,
                Err(ErrorCode::NoEntry) if create => {
                    dir.create_directory_at(name)
                        .map_err(|e| failed(shown, e))?;
                    open(&dir).map_err(|e| failed(shown, e))?
                }
                Err(_) if is_link(&dir, name) => return Err(link_error(shown, name)),
                Err(e) => return Err(failed(shown, e)),
            };
        }
        Ok(dir)
    }

    pub fn write(
        ctx: &CallContext,
        names: &[&str],
        shown: &str,
        content: &[u8],
    ) -> Result<(), ToolError> {
        let last = *names
            .last()
            .ok_or_else(|| ToolError::invalid("no file name"))?;
        let dir = parent(ctx, names, shown, true)?;
        if is_link(&dir, last) {
            return Err(link_error(shown, last));
        }
        let file = dir
            .open_at(
                PathFlags::empty(),
                last,
                OpenFlags::CREATE,
                DescriptorFlags::READ | DescriptorFlags::WRITE,
            )
            .map_err(|e| failed(shown, e))?;
        let stat = file.stat().map_err(|e| failed(shown, e))?;
        if stat.type_ != DescriptorType::RegularFile {
            return Err(ToolError::failed(format!("{shown} is not a regular file")));
        }
        if stat.link_count > 1 {
            return Err(hard_link_error(shown));
        }
        file.set_size(0).map_err(|e| failed(shown, e))?;
        let mut offset = 0usize;
        while offset < content.len() {
            let n = file
                .write(&content[offset..], offset as u64)
                .map_err(|e| failed(shown, e))?;
            if n == 0 {
                return Err(ToolError::failed(format!(
                    "{shown}: the write made no progress"
                )));
            }
            offset += n as usize;
        }
        Ok(())
    }

    pub fn remove(ctx: &CallContext, names: &[&str], shown: &str) -> Result<(), ToolError> {
        let last = *names
            .last()
            .ok_or_else(|| ToolError::invalid("no file name"))?;
        let dir = parent(ctx, names, shown, false)?;
        dir.unlink_file_at(last).map_err(|e| failed(shown, e))
    }
}

/// Native builds (the plugin's own unit tests): the same rules over std.
#[cfg(not(target_family = "wasm"))]
mod imp {
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    use sandcrab_sdk::{CallContext, ToolError};

    use super::{hard_link_error, link_error};

    fn path(ctx: &CallContext, names: &[&str], shown: &str) -> Result<PathBuf, ToolError> {
        let mut p = PathBuf::from(&ctx.workspace_root);
        for name in &names[..names.len().saturating_sub(1)] {
            p.push(name);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(link_error(shown, name));
            }
        }
        p.push(names.last().copied().unwrap_or_default());
        Ok(p)
    }

    pub fn write(
        ctx: &CallContext,
        names: &[&str],
        shown: &str,
        content: &[u8],
    ) -> Result<(), ToolError> {
        let p = path(ctx, names, shown)?;
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            if m.file_type().is_symlink() {
                return Err(link_error(shown, names.last().copied().unwrap_or_default()));
            }
            if m.nlink() > 1 {
                return Err(hard_link_error(shown));
            }
        }
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| ToolError::failed(format!("{shown}: {e}")))?;
        }
        std::fs::write(&p, content).map_err(|e| ToolError::failed(format!("{shown}: {e}")))
    }

    pub fn remove(ctx: &CallContext, names: &[&str], shown: &str) -> Result<(), ToolError> {
        let p = path(ctx, names, shown)?;
        std::fs::remove_file(&p).map_err(|e| ToolError::failed(format!("{shown}: {e}")))
    }
}
