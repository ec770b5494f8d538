//! The Anthropic profile: Claude models, the edit_file tool set, and base
//! instructions in the Claude Code style.

use sandcrab_sdk::prelude::*;

struct Anthropic;

impl Profile for Anthropic {
    fn info() -> ProfileInfo {
        ProfileInfo {
            id: "anthropic".into(),
            default_model: "claude-sonnet-4-5".into(),
            context_window: 200_000,
            parallel_tool_calls: true,
            tool_names: [
                "read_file",
                "edit_file",
                "write_file",
                "shell",
                "grep",
                "glob",
            ]
            .map(String::from)
            .to_vec(),
            project_doc_files: vec!["CLAUDE.md".into()],
            max_output_tokens: 0,
        }
    }

    fn base_instructions() -> String {
        include_str!("instructions.md").to_string()
    }
}

export_profile!(Anthropic);
