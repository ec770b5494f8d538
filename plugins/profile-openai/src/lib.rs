//! The OpenAI profile: GPT models on the Responses API, the apply_patch tool
//! set, and base instructions in the codex style.

use sandcrab_sdk::prelude::*;

struct OpenAi;

impl Profile for OpenAi {
    fn info() -> ProfileInfo {
        ProfileInfo {
            id: "openai".into(),
            default_model: "gpt-5".into(),
            context_window: 400_000,
            parallel_tool_calls: true,
            tool_names: [
                "read_file",
                "apply_patch",
                "write_file",
                "shell",
                "grep",
                "glob",
            ]
            .map(String::from)
            .to_vec(),
            project_doc_files: vec![".codex/instructions.md".into()],
            max_output_tokens: 0,
        }
    }

    fn base_instructions() -> String {
        include_str!("instructions.md").to_string()
    }
}

export_profile!(OpenAi);
