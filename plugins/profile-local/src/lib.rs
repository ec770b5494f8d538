//! The profile for local models behind an OpenAI-compatible server: the
//! edit_file tool set (exact-string edits suit smaller models better than
//! patches), no invented default model, a conservative context window (the
//! host asks the server for the real one), and short, direct instructions.

use sandcrab_sdk::prelude::*;

struct Local;

impl Profile for Local {
    fn info() -> ProfileInfo {
        ProfileInfo {
            id: "openai-compatible".into(),
            default_model: String::new(),
            context_window: 8192,
            parallel_tool_calls: false,
            tool_names: [
                "read_file",
                "edit_file",
                "write_file",
                "shell",
                "grep",
                "glob",
                "list_dir",
            ]
            .map(String::from)
            .to_vec(),
            project_doc_files: Vec::new(),
            max_output_tokens: 4096,
        }
    }

    fn base_instructions() -> String {
        include_str!("instructions.md").to_string()
    }
}

export_profile!(Local);
