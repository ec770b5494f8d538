//! The Gemini profile: Gemini models, the edit_file tool set plus list_dir,
//! and base instructions in the gemini-cli style.

use sandcrab_sdk::prelude::*;

struct Gemini;

impl Profile for Gemini {
    fn info() -> ProfileInfo {
        ProfileInfo {
            id: "gemini".into(),
            default_model: "gemini-2.5-pro".into(),
            context_window: 1_048_576,
            parallel_tool_calls: true,
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
            project_doc_files: vec!["GEMINI.md".into()],
            max_output_tokens: 0,
        }
    }

    fn base_instructions() -> String {
        include_str!("instructions.md").to_string()
    }
}

export_profile!(Gemini);
