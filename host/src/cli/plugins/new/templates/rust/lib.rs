//! {{name}}: a sandcrab tool plugin.
//!
//! Build: `cargo build --release` (needs `rustup target add wasm32-wasip2`).
//! Try it: `sandcrab tool call {{tool}} --args '{"path": "README.md"}' --plugins .`
use sandcrab_sdk::prelude::*;

/// The tool: everything about it is in the `Tool` impl below.
struct FileStats;

/// The model's arguments, deserialized by the SDK.
#[derive(Deserialize)]
struct Args {
    path: String,
}

impl Tool for FileStats {
    const NAME: &'static str = "{{tool}}";
    const DESCRIPTION: &'static str =
        "Count the lines, words and bytes of a text file in the workspace.";
    type Args = Args;

    /// The JSON Schema the host checks every call against.
    fn parameters() -> Schema {
        Schema::object()
            .required(
                "path",
                Schema::string("File to count, relative to the working directory"),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        // Map the model's path (relative, or absolute on the host) to the
        // path the plugin sees; paths outside the workspace are refused.
        let path = sandcrab_sdk::paths::resolve(ctx, &args.path)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ToolError::invalid(format!("cannot read {}: {e}", args.path)))?;
        Ok(format!(
            "{}: {} lines, {} words, {} bytes",
            args.path,
            text.lines().count(),
            text.split_whitespace().count(),
            text.len()
        ))
    }
}

// To run a program, request it in plugin.toml (`programs = ["git"]`), have
// the operator grant it, then:
//     let out = sandcrab_sdk::process::Command::new("git").arg("status").run()?;

export_tools!(FileStats);
