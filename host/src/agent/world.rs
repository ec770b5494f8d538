//! What the host reads from the machine for the system prompt — the
//! working directory, the repository's state, the platform, today's date,
//! the project's instruction files — read once when a session starts and
//! kept in its recording, so a replay shows the model the same world.
//!
//! Everything read from the workspace is repository content: instruction
//! files are opened beneath the workspace without following any link, as
//! regular, size-capped files; repository facts come from
//! [`super::repo_facts`], which runs git confined.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::profile::Profile;
use super::repo_facts::RepoFacts;

/// The machine as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct World {
    /// The working directory as shown to the model.
    pub working_dir: String,
    pub repo: Option<RepoFacts>,
    /// `linux`, …
    pub platform: String,
    pub os_version: String,
    /// The date the session started (the clock read the prompt shows).
    pub today: String,
    /// The project's instruction files, as the prompt includes them.
    pub project_docs: String,
    /// Instruction files left out, and why (a trusted project's that
    /// changed since consent).
    #[serde(skip)]
    pub left_out: Vec<String>,
}

impl World {
    /// Read it now for a session of `profile` in `working_dir` (inside
    /// `workspace`).
    pub fn observe(
        profile: &Profile,
        workspace: &Path,
        working_dir: &Path,
        repo: Option<RepoFacts>,
        consent: &crate::consent::DocsConsent,
    ) -> World {
        let mut doc_files = vec!["AGENTS.md".to_string()];
        doc_files.extend(profile.info.project_doc_files.iter().cloned());
        let mut left_out = Vec::new();
        let admit = |path: &Path, bytes: &[u8]| match consent.admits(path, bytes) {
            Ok(()) => true,
            Err(why) => {
                left_out.push(why);
                false
            }
        };
        let docs = project_docs_admitted(
            workspace,
            working_dir,
            &doc_files,
            PROJECT_DOCS_BUDGET,
            admit,
        );
        World {
            working_dir: working_dir.display().to_string(),
            repo,
            platform: std::env::consts::OS.to_string(),
            os_version: os_version(),
            today: crate::time::today(),
            project_docs: docs,
            left_out,
        }
    }
}

/// Budget for project instruction files.
pub const PROJECT_DOCS_BUDGET: usize = 32 * 1024;

/// Largest instruction file read (the budget cuts the whole section).
const MAX_DOC_BYTES: u64 = 256 * 1024;

/// The instruction files named `names` (plain relative paths such as
/// `AGENTS.md` or `.codex/instructions.md`) in the directories from the
/// repository root (never above the workspace) down to `dir`, root first,
/// cut to `budget` bytes with a marker. A file that is a link, leads
/// through a link, is not a regular file or is too big is skipped.
pub fn project_docs(workspace: &Path, dir: &Path, names: &[String], budget: usize) -> String {
    project_docs_admitted(workspace, dir, names, budget, |_, _| true)
}

/// [`project_docs`], with only the files `admit` admits.
fn project_docs_admitted(
    workspace: &Path,
    dir: &Path,
    names: &[String],
    budget: usize,
    mut admit: impl FnMut(&Path, &[u8]) -> bool,
) -> String {
    let mut sections = Vec::new();
    for level in levels(workspace, dir) {
        for name in names {
            let relative = level.join(name);
            match crate::safe_fs::read_beneath(workspace, &relative, MAX_DOC_BYTES) {
                Ok(bytes) if !admit(&workspace.join(&relative), &bytes) => {}
                Ok(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    if !text.trim().is_empty() {
                        sections.push(format!(
                            "## {}\n\n{}",
                            workspace.join(&relative).display(),
                            text.trim()
                        ));
                    }
                }
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::debug!("project document {} skipped: {e}", relative.display())
                }
                Err(_) => {}
            }
        }
    }
    if sections.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Project instructions\n\nThese files from the project apply to your work (deeper files refine earlier ones):\n\n",
    );
    out.push_str(&sections.join("\n\n"));
    if out.len() > budget {
        let cut = out.floor_char_boundary(budget);
        out.truncate(cut);
        out.push_str(&format!(
            "\n\n[... project instructions truncated at {} KB ...]",
            budget / 1024
        ));
    }
    out
}

/// The directories (relative to the workspace) from the repository root
/// (the nearest ancestor of `dir` holding `.git`, never above the
/// workspace) down to `dir`.
fn levels(workspace: &Path, dir: &Path) -> Vec<PathBuf> {
    let Ok(inside) = dir.strip_prefix(workspace) else {
        return Vec::new();
    };
    let mut levels: Vec<PathBuf> = inside.ancestors().map(Path::to_path_buf).collect();
    levels.reverse();
    let root = levels
        .iter()
        .rposition(|l| std::fs::symlink_metadata(workspace.join(l).join(".git")).is_ok())
        .unwrap_or(0);
    levels.split_off(root)
}

fn os_version() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .unwrap_or_default();
    match (pretty.is_empty(), release.trim().is_empty()) {
        (false, false) => format!("{pretty}, kernel {}", release.trim()),
        (false, true) => pretty,
        (true, false) => format!("{} {}", std::env::consts::OS, release.trim()),
        (true, true) => std::env::consts::OS.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_go_root_first_and_respect_the_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(root.join("AGENTS.md"), "ROOT DOC").unwrap();
        std::fs::write(deep.join("AGENTS.md"), "DEEP DOC").unwrap();
        let docs = project_docs(&root, &deep, &["AGENTS.md".into()], PROJECT_DOCS_BUDGET);
        assert!(docs.find("ROOT DOC").unwrap() < docs.find("DEEP DOC").unwrap());
        std::fs::write(root.join("AGENTS.md"), "x".repeat(40_000)).unwrap();
        let docs = project_docs(&root, &deep, &["AGENTS.md".into()], PROJECT_DOCS_BUDGET);
        assert!(docs.len() < PROJECT_DOCS_BUDGET + 100);
        assert!(docs.ends_with("[... project instructions truncated at 32 KB ...]"));
    }

    #[test]
    fn docs_never_leave_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // A repository root above the workspace is not a level to read.
        std::fs::create_dir_all(base.join(".git")).unwrap();
        std::fs::write(base.join("AGENTS.md"), "ABOVE THE WORKSPACE").unwrap();
        std::fs::write(outside.join("secret"), "OUTSIDE SECRET").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), ws.join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join(".codex")).unwrap();
        std::fs::write(outside.join("instructions.md"), "OUTSIDE VIA DIR").unwrap();
        let fifo = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
            ws.join("sub/AGENTS.md").as_os_str(),
        ))
        .unwrap();
        // SAFETY: mkfifo on a temp path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let names: Vec<String> = [
            "AGENTS.md",
            ".codex/instructions.md",
            "../outside/secret",
            "/etc/passwd",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Returns at once (a FIFO would block a plain read forever).
        let docs = project_docs(&ws, &ws.join("sub"), &names, PROJECT_DOCS_BUDGET);
        for leaked in [
            "ABOVE THE WORKSPACE",
            "OUTSIDE SECRET",
            "OUTSIDE VIA DIR",
            "root:",
        ] {
            assert!(!docs.contains(leaked), "{leaked} in {docs}");
        }
    }
}
