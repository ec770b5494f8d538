//! Writing the workspace the way the file tools must:
//!
//! - never a protected path (`.git/config`, `.git/hooks`, `.sandcrab`,
//!   `sandcrab.toml` unless the operator changed the list; the host passes
//!   it in the call context): files that make other programs run code
//!   later;
//! - never through a symbolic link: every directory on the way is opened
//!   from the workspace one name at a time without following links, so the
//!   path checked is the path written (no link can be swapped in between);
//! - never a file with other hard links (one could be a protected file);
//! - all or nothing: a [`Transaction`] writes every new content to a
//!   temporary file beside its target first, then renames them into place
//!   (keeping the old files until every rename succeeded); any failure
//!   puts everything back.

#[cfg(not(target_family = "wasm"))]
mod native;
#[cfg(target_family = "wasm")]
mod wasm;

#[cfg(not(target_family = "wasm"))]
use native::Dir;
#[cfg(target_family = "wasm")]
use wasm::Dir;

use sandcrab_sdk::{CallContext, ToolError};

/// What is at a name in a directory, without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File { links: u64 },
    Directory,
    Link,
    Other,
}

/// The protected paths (relative to the workspace) this call must respect.
pub fn protected_paths(ctx: &CallContext) -> Vec<String> {
    ctx.protected_paths
        .iter()
        .map(|l| l.trim().trim_matches('/').to_string())
        .filter(|l| !l.is_empty())
        .collect()
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
    for p in protected_paths(ctx) {
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
    let mut tx = Transaction::new(ctx);
    tx.write(guest, shown, content)?;
    tx.commit()
}

/// One file to put in place.
struct Staged {
    dir: Dir,
    name: String,
    shown: String,
    /// The new content, already written beside the target (None: delete).
    temp: Option<String>,
    /// The old file, moved aside while committing.
    backup: Option<String>,
}

/// Changes to several files that land all together or not at all.
pub struct Transaction<'a> {
    ctx: &'a CallContext,
    staged: Vec<Staged>,
    /// Directories created while staging (removed again on failure).
    created: Vec<(Dir, String)>,
    committed: bool,
}

impl<'a> Transaction<'a> {
    pub fn new(ctx: &'a CallContext) -> Self {
        Transaction {
            ctx,
            staged: Vec::new(),
            created: Vec::new(),
            committed: false,
        }
    }

    /// Stage `content` for `guest` (written to a temporary file now).
    pub fn write(&mut self, guest: &str, shown: &str, content: &[u8]) -> Result<(), ToolError> {
        let (dir, name) = self.target(guest, shown, true)?;
        let temp = temp_name(&name, self.staged.len());
        dir.write_new(&temp, content)
            .map_err(|e| failed(shown, &e))?;
        self.staged.push(Staged {
            dir,
            name,
            shown: shown.to_string(),
            temp: Some(temp),
            backup: None,
        });
        Ok(())
    }

    /// Stage the deletion of the file `guest`.
    pub fn delete(&mut self, guest: &str, shown: &str) -> Result<(), ToolError> {
        let (dir, name) = self.target(guest, shown, false)?;
        match dir.kind(&name) {
            Some(Kind::File { .. }) => {}
            None => {
                return Err(ToolError::failed(format!(
                    "{shown}: the file does not exist"
                )));
            }
            Some(_) => return Err(ToolError::failed(format!("{shown} is not a file"))),
        }
        self.staged.push(Staged {
            dir,
            name,
            shown: shown.to_string(),
            temp: None,
            backup: None,
        });
        Ok(())
    }

    /// The checked directory and name of a target.
    fn target(
        &mut self,
        guest: &str,
        shown: &str,
        create: bool,
    ) -> Result<(Dir, String), ToolError> {
        check_protected(self.ctx, guest, shown)?;
        let names = names(self.ctx, guest);
        let (last, parents) = names
            .split_last()
            .ok_or_else(|| ToolError::invalid("no file name"))?;
        let mut dir = Dir::workspace(self.ctx)?;
        for name in parents {
            dir = match dir.kind(name) {
                Some(Kind::Directory) => dir.open(name).map_err(|e| failed(shown, &e))?,
                Some(Kind::Link) => return Err(link_error(shown, name)),
                Some(_) => {
                    return Err(ToolError::failed(format!(
                        "{shown}: '{name}' on the way is not a directory"
                    )));
                }
                None if create => {
                    dir.create_dir(name).map_err(|e| failed(shown, &e))?;
                    self.created.push((dir.clone(), name.to_string()));
                    dir.open(name).map_err(|e| failed(shown, &e))?
                }
                None => return Err(ToolError::failed(format!("file not found: {shown}"))),
            };
        }
        match dir.kind(last) {
            Some(Kind::Link) => return Err(link_error(shown, last)),
            Some(Kind::Directory) => {
                return Err(ToolError::failed(format!("{shown} is a directory")));
            }
            Some(Kind::File { links }) if links > 1 => {
                return Err(ToolError::denied(format!(
                    "cannot write {shown}: the file has other hard links, and a write would change them too"
                )));
            }
            _ => {}
        }
        Ok((dir, last.to_string()))
    }

    /// Put every staged change in place, or none.
    pub fn commit(mut self) -> Result<(), ToolError> {
        for i in 0..self.staged.len() {
            if let Err(e) = self.apply(i) {
                self.roll_back(i);
                return Err(e);
            }
        }
        for s in &self.staged {
            if let Some(backup) = &s.backup {
                let _ = s.dir.unlink(backup);
            }
        }
        self.committed = true;
        Ok(())
    }

    fn apply(&mut self, i: usize) -> Result<(), ToolError> {
        let s = &mut self.staged[i];
        if s.dir.kind(&s.name).is_some() {
            let backup = format!("{}.bak", temp_name(&s.name, i));
            s.dir
                .rename(&s.name, &backup)
                .map_err(|e| failed(&s.shown, &e))?;
            s.backup = Some(backup);
        }
        if let Some(temp) = &s.temp {
            s.dir
                .rename(temp, &s.name)
                .map_err(|e| failed(&s.shown, &e))?;
        }
        Ok(())
    }

    /// Undo changes 0..=last (in reverse) after a failure.
    fn roll_back(&mut self, last: usize) {
        for s in self.staged[..=last].iter().rev() {
            if let Some(backup) = &s.backup {
                let _ = s.dir.rename(backup, &s.name);
            } else if s.temp.is_some() {
                // A new file that was put in place: take it away again.
                let _ = s.dir.unlink(&s.name);
            }
        }
    }
}

impl Drop for Transaction<'_> {
    /// Whatever did not land leaves nothing behind: temporary files and
    /// directories created for it go.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for s in &self.staged {
            if let Some(temp) = &s.temp {
                let _ = s.dir.unlink(temp);
            }
        }
        for (dir, name) in self.created.iter().rev() {
            let _ = dir.remove_dir(name);
        }
    }
}

/// A name beside `name` no other call uses (the clock plus a counter: the
/// guest has no process id).
fn temp_name(name: &str, n: usize) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let seq = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.sandcrab-{nanos:x}-{seq}-{n}")
}

fn failed(shown: &str, e: &std::io::Error) -> ToolError {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            ToolError::denied(format!("cannot write {shown}: {e}"))
        }
        _ => ToolError::failed(format!("{shown}: {e}")),
    }
}

fn link_error(shown: &str, name: &str) -> ToolError {
    ToolError::denied(format!(
        "cannot write {shown}: '{name}' on the way is a symbolic link, and the file tools never write through links (use the path it points to)"
    ))
}
