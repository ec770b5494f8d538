//! The system prompt, in five layers: the profile's base instructions, an
//! `<environment>` block, the tool descriptions, the project's instruction
//! files (AGENTS.md plus the profile's own, from the repository root down to
//! the working directory, within a 32 KB budget), and the user's override.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::profile::Profile;
use crate::plugin::ToolSpec;

/// Budget for project instruction files.
pub const PROJECT_DOCS_BUDGET: usize = 32 * 1024;

/// What the prompt is built from.
pub struct PromptInputs<'a> {
    pub profile: &'a Profile,
    pub tools: &'a [ToolSpec],
    /// Where the agent works.
    pub working_dir: &'a Path,
    pub model: &'a str,
    /// The user's override (config `agent.instructions`), last.
    pub user_instructions: Option<&'a str>,
}

/// The whole system prompt.
pub fn build(inputs: &PromptInputs) -> String {
    let mut layers = vec![inputs.profile.base_instructions.trim().to_string()];
    layers.push(environment(inputs.working_dir, inputs.model));
    layers.push(tool_section(inputs.tools));
    let mut doc_files = vec!["AGENTS.md".to_string()];
    doc_files.extend(inputs.profile.info.project_doc_files.iter().cloned());
    let docs = project_docs(inputs.working_dir, &doc_files, PROJECT_DOCS_BUDGET);
    if !docs.is_empty() {
        layers.push(docs);
    }
    if let Some(user) = inputs.user_instructions.filter(|u| !u.trim().is_empty()) {
        layers.push(format!("# Instructions from the user\n\n{}", user.trim()));
    }
    layers.join("\n\n")
}

/// The `<environment>` block.
pub fn environment(dir: &Path, model: &str) -> String {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    };
    let is_repo = git(&["rev-parse", "--is-inside-work-tree"]).as_deref() == Some("true");
    let mut lines = vec![
        format!("Working directory: {}", dir.display()),
        format!(
            "Is directory a git repo: {}",
            if is_repo { "yes" } else { "no" }
        ),
    ];
    if is_repo {
        if let Some(branch) = git(&["branch", "--show-current"]) {
            lines.push(format!(
                "Git branch: {}",
                if branch.is_empty() {
                    "(detached)"
                } else {
                    &branch
                }
            ));
        }
        if let Some(status) = git(&["status", "--short"]) {
            let shown: Vec<&str> = status.lines().take(20).collect();
            let more = status.lines().count().saturating_sub(shown.len());
            let mut text = if shown.is_empty() {
                "clean".to_string()
            } else {
                format!("\n{}", shown.join("\n"))
            };
            if more > 0 {
                text.push_str(&format!("\n... and {more} more"));
            }
            lines.push(format!("Git status: {text}"));
        }
        if let Some(log) = git(&["log", "--oneline", "-5"]).filter(|l| !l.is_empty()) {
            lines.push(format!("Recent commits:\n{log}"));
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

/// The instruction files named `names` in the directories from the
/// repository root (or `dir` itself outside a repository) down to `dir`,
/// root first, cut to `budget` bytes with a marker.
pub fn project_docs(dir: &Path, names: &[String], budget: usize) -> String {
    let mut sections = Vec::new();
    for level in levels(dir) {
        for name in names {
            let path = level.join(name);
            if let Ok(text) = std::fs::read_to_string(&path)
                && !text.trim().is_empty()
            {
                sections.push(format!("## {}\n\n{}", path.display(), text.trim()));
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

/// Directories from the enclosing repository root down to `dir`.
fn levels(dir: &Path) -> Vec<PathBuf> {
    let root = dir
        .ancestors()
        .find(|a| a.join(".git").exists())
        .unwrap_or(dir);
    let mut levels: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| a.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    levels.reverse();
    levels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::ProfileInfo;

    fn profile(docs: &[&str]) -> Profile {
        Profile {
            info: ProfileInfo {
                id: "p".into(),
                adapter: "anthropic".into(),
                default_model: "m".into(),
                context_window: 1000,
                parallel_tool_calls: true,
                tool_names: vec![],
                project_doc_files: docs.iter().map(|s| s.to_string()).collect(),
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
        }];
        let p = profile(&["CLAUDE.md"]);
        let prompt = build(&PromptInputs {
            profile: &p,
            tools: &tools,
            working_dir: dir.path(),
            model: "model-7",
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
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".git")).unwrap();
        let deep = root.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(root.path().join("AGENTS.md"), "ROOT DOC").unwrap();
        std::fs::write(deep.join("AGENTS.md"), "DEEP DOC").unwrap();
        let docs = project_docs(&deep, &["AGENTS.md".into()], PROJECT_DOCS_BUDGET);
        assert!(docs.find("ROOT DOC").unwrap() < docs.find("DEEP DOC").unwrap());
        std::fs::write(root.path().join("AGENTS.md"), "x".repeat(40_000)).unwrap();
        let docs = project_docs(&deep, &["AGENTS.md".into()], PROJECT_DOCS_BUDGET);
        assert!(docs.len() < PROJECT_DOCS_BUDGET + 100);
        assert!(docs.ends_with("[... project instructions truncated at 32 KB ...]"));
    }

    #[test]
    fn environment_reports_git_state() {
        let dir = tempfile::tempdir().unwrap();
        let env = environment(dir.path(), "m");
        assert!(env.contains("Is directory a git repo: no"), "{env}");
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .output()
                .unwrap()
        };
        if git(&["init", "-q", "-b", "trunk"]).status.success() {
            std::fs::write(dir.path().join("f.txt"), "x").unwrap();
            let env = environment(dir.path(), "m");
            assert!(env.contains("Is directory a git repo: yes"), "{env}");
            assert!(env.contains("Git branch: trunk"), "{env}");
            assert!(env.contains("?? f.txt"), "{env}");
        }
    }
}
