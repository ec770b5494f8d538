//! The system prompt, in five layers: the profile's base instructions, an
//! `<environment>` block, the tool descriptions, the project's instruction
//! files (AGENTS.md plus the profile's own, from the repository root down to
//! the working directory, within a 32 KB budget), and the user's override.
//!
//! Nothing here reads the machine: what the prompt shows of it is the
//! session's [`World`], read once at start (and replayed from a
//! recording).

use super::profile::Profile;
use super::world::World;
use crate::plugin::ToolSpec;

/// What the prompt is built from.
pub struct PromptInputs<'a> {
    pub profile: &'a Profile,
    pub tools: &'a [ToolSpec],
    /// What was read from the machine when the session started.
    pub world: &'a World,
    pub model: &'a str,
    /// The user's override (config `agent.instructions`), last.
    pub user_instructions: Option<&'a str>,
}

/// The whole system prompt.
pub fn build(inputs: &PromptInputs) -> String {
    build_with(inputs, tool_section(inputs.tools))
}

/// The system prompt for a small window: the tools named, not described
/// again (each request carries their definitions).
pub fn build_brief(inputs: &PromptInputs) -> String {
    let names: Vec<&str> = inputs.tools.iter().map(|t| t.name.as_str()).collect();
    build_with(
        inputs,
        format!("# Tools\n\nYou can call these tools: {}.", names.join(", ")),
    )
}

fn build_with(inputs: &PromptInputs, tools: String) -> String {
    let mut layers = vec![inputs.profile.base_instructions.trim().to_string()];
    layers.push(environment(inputs.world, inputs.model));
    layers.push(tools);
    if !inputs.world.project_docs.is_empty() {
        layers.push(inputs.world.project_docs.clone());
    }
    if let Some(user) = inputs.user_instructions.filter(|u| !u.trim().is_empty()) {
        layers.push(format!("# Instructions from the user\n\n{}", user.trim()));
    }
    layers.join("\n\n")
}

/// The `<environment>` block.
pub fn environment(world: &World, model: &str) -> String {
    let mut lines = vec![format!("Working directory: {}", world.working_dir)];
    match &world.repo {
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
    lines.push(format!("Platform: {}", world.platform));
    lines.push(format!("OS version: {}", world.os_version));
    lines.push(format!("Today's date: {}", world.today));
    lines.push(format!("Model: {model}"));
    format!("<environment>\n{}\n</environment>", lines.join("\n"))
}

fn tool_section(tools: &[ToolSpec]) -> String {
    let mut out = String::from("# Tools\n\nYou can call these tools:");
    for tool in tools {
        out.push_str(&format!("\n- {}: {}", tool.name, tool.description));
    }
    out
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
        let world = World::observe(&p, &ws, &ws, None, &Default::default());
        let prompt = build(&PromptInputs {
            profile: &p,
            tools: &tools,
            world: &world,
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

    #[tokio::test]
    async fn environment_reports_git_state() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let observe = |repo| World {
            working_dir: dir.display().to_string(),
            repo,
            ..World::default()
        };
        let env = environment(
            &observe(super::super::repo_facts::read(&dir, &dir).await),
            "m",
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
            let env = environment(&observe(facts), "m");
            assert!(env.contains("Is directory a git repo: yes"), "{env}");
            assert!(env.contains("Git branch: trunk"), "{env}");
            assert!(env.contains("?? f.txt"), "{env}");
        }
    }
}
