//! The system prompt, in five layers: the profile's base instructions, an
//! `<environment>` block, the tool descriptions, the project's instruction
//! files (AGENTS.md plus the profile's own, from the repository root down to
//! the working directory, within a 32 KB budget), and the user's override.
//!
//! Everything read from the workspace is repository content: instruction
//! files are opened beneath the workspace without following any link, as
//! regular, size-capped files; repository facts come from
//! [`super::repo_facts`], which runs git confined.

use std::path::{Path, PathBuf};

use super::profile::Profile;
use super::repo_facts::RepoFacts;
use crate::plugin::ToolSpec;

/// Budget for project instruction files.
pub const PROJECT_DOCS_BUDGET: usize = 32 * 1024;

/// What the prompt is built from.
pub struct PromptInputs<'a> {
    pub profile: &'a Profile,
    pub tools: &'a [ToolSpec],
    /// The workspace root (nothing outside it is read).
    pub workspace: &'a Path,
    /// Where the agent works (inside the workspace).
    pub working_dir: &'a Path,
    pub model: &'a str,
    /// Repository facts, when they could be read.
    pub repo: Option<&'a RepoFacts>,
    /// The user's override (config `agent.instructions`), last.
    pub user_instructions: Option<&'a str>,
}

/// The whole system prompt.
pub fn build(inputs: &PromptInputs) -> String {
    let mut layers = vec![inputs.profile.base_instructions.trim().to_string()];
    layers.push(environment(inputs.working_dir, inputs.model, inputs.repo));
    layers.push(tool_section(inputs.tools));
    let mut doc_files = vec!["AGENTS.md".to_string()];
    doc_files.extend(inputs.profile.info.project_doc_files.iter().cloned());
    let docs = project_docs(
        inputs.workspace,
        inputs.working_dir,
        &doc_files,
        PROJECT_DOCS_BUDGET,
    );
    if !docs.is_empty() {
        layers.push(docs);
    }
    if let Some(user) = inputs.user_instructions.filter(|u| !u.trim().is_empty()) {
        layers.push(format!("# Instructions from the user\n\n{}", user.trim()));
    }
    layers.join("\n\n")
}

/// The `<environment>` block.
pub fn environment(dir: &Path, model: &str, repo: Option<&RepoFacts>) -> String {
    let mut lines = vec![format!("Working directory: {}", dir.display())];
    match repo {
        None => lines.push("Is directory a git repo: no (or not readable)".to_string()),
        Some(repo) => {
            lines.push("Is directory a git repo: yes".to_string());
            lines.push(format!(
                "Git branch: {}",
                repo.branch.as_deref().unwrap_or("(detached)")
            ));
            let shown: Vec<&str> = repo.status.iter().take(20).map(String::as_str).collect();
            let mut text = if shown.is_empty() {
                "clean".to_string()
            } else {
                format!("\n{}", shown.join("\n"))
            };
            let more = repo.status.len() - shown.len();
            if more > 0 {
                text.push_str(&format!("\n... and {more} more"));
            }
            lines.push(format!("Git status: {text}"));
            if !repo.recent_commits.is_empty() {
                lines.push(format!(
                    "Recent commits:\n{}",
                    repo.recent_commits.join("\n")
                ));
            }
        }
    }
    lines.push(format!("Platform: {}", std::env::consts::OS));
    lines.push(format!("OS version: {}", os_version()));
    lines.push(format!("Today's date: {}", crate::time::today()));
    lines.push(format!("Model: {model}"));
    format!("<environment>\n{}\n</environment>", lines.join("\n"))
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

fn tool_section(tools: &[ToolSpec]) -> String {
    let mut out = String::from("# Tools\n\nYou can call these tools:");
    for tool in tools {
        out.push_str(&format!("\n- {}: {}", tool.name, tool.description));
    }
    out
}

/// Largest instruction file read (the budget cuts the whole section).
const MAX_DOC_BYTES: u64 = 256 * 1024;

/// The instruction files named `names` (plain relative paths such as
/// `AGENTS.md` or `.codex/instructions.md`) in the directories from the
/// repository root (never above the workspace) down to `dir`, root first,
/// cut to `budget` bytes with a marker. A file that is a link, leads
/// through a link, is not a regular file or is too big is skipped.
pub fn project_docs(workspace: &Path, dir: &Path, names: &[String], budget: usize) -> String {
    let mut sections = Vec::new();
    for level in levels(workspace, dir) {
        for name in names {
            let relative = level.join(name);
            match crate::safe_fs::read_beneath(workspace, &relative, MAX_DOC_BYTES) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::ProfileInfo;

    fn profile(docs: &[&str]) -> Profile {
        Profile {
            info: ProfileInfo {
                id: "p".into(),
                default_model: "m".into(),
                context_window: 1000,
                parallel_tool_calls: true,
                tool_names: vec![],
                project_doc_files: docs.iter().map(|s| s.to_string()).collect(),
                max_output_tokens: 0,
            },
            base_instructions: "BASE LAYER".into(),
        }
    }

    #[test]
    fn layers_come_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "AGENTS LAYER").unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "CLAUDE LAYER").unwrap();
        std::fs::write(dir.path().join("GEMINI.md"), "GEMINI LAYER").unwrap();
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "TOOL LAYER".into(),
            parameters: serde_json::json!({}),
            traits: Default::default(),
        }];
        let p = profile(&["CLAUDE.md"]);
        let ws = dir.path().canonicalize().unwrap();
        let prompt = build(&PromptInputs {
            profile: &p,
            tools: &tools,
            workspace: &ws,
            working_dir: &ws,
            model: "model-7",
            repo: None,
            user_instructions: Some("USER LAYER"),
        });
        let pos = |needle: &str| {
            prompt
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} missing from:\n{prompt}"))
        };
        assert!(pos("BASE LAYER") < pos("<environment>"));
        assert!(pos("<environment>") < pos("TOOL LAYER"));
        assert!(pos("TOOL LAYER") < pos("AGENTS LAYER"));
        assert!(pos("AGENTS LAYER") < pos("CLAUDE LAYER"));
        assert!(pos("CLAUDE LAYER") < pos("USER LAYER"));
        assert!(
            !prompt.contains("GEMINI LAYER"),
            "other profiles' files are not read"
        );
        assert!(prompt.contains("Model: model-7") && prompt.contains("Working directory: "));
    }

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

    #[tokio::test]
    async fn environment_reports_git_state() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let env = environment(
            &dir,
            "m",
            super::super::repo_facts::read(&dir, &dir).await.as_ref(),
        );
        assert!(env.contains("Is directory a git repo: no"), "{env}");
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args(args)
                .output()
                .unwrap()
        };
        if git(&["init", "-q", "-b", "trunk"]).status.success()
            && crate::process::support()
                .missing(crate::process::SandboxMode::Locked, false)
                .is_empty()
        {
            std::fs::write(dir.join("f.txt"), "x").unwrap();
            let facts = super::super::repo_facts::read(&dir, &dir).await;
            let env = environment(&dir, "m", facts.as_ref());
            assert!(env.contains("Is directory a git repo: yes"), "{env}");
            assert!(env.contains("Git branch: trunk"), "{env}");
            assert!(env.contains("?? f.txt"), "{env}");
        }
    }
}
