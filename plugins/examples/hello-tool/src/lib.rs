//! hello-tool: the Rust example plugin. Three tools, one per thing a
//! plugin can do:
//!
//! - `hello`: pure computation on the arguments;
//! - `line_count`: reads a file from the workspace (WASI filesystem, under
//!   the `workspace = "read"` the manifest asks for);
//! - `sort_lines`: runs a program on the host (`sort`, through the
//!   `process` import; the operator must grant it).
//!
//! Build: `cargo build --release --target wasm32-wasip2` (from `plugins/`),
//! then put `hello_tool.wasm` beside `plugin.toml` in a plugin directory and
//! run `sandcrab plugins list --plugins DIR`.
use sandcrab_sdk::prelude::*;
use sandcrab_sdk::process::Command;

/// The tool: a unit struct; everything about it is in the `Tool` impl.
struct Hello;

/// Typed arguments, deserialized from the model's JSON by the SDK.
#[derive(Deserialize)]
struct HelloArgs {
    name: String,
    #[serde(default)]
    shout: bool,
}

impl Tool for Hello {
    const NAME: &'static str = "hello";
    const DESCRIPTION: &'static str = "Greet someone by name.";
    type Args = HelloArgs;

    /// The JSON Schema the host validates every call against.
    fn parameters() -> Schema {
        let name = Schema::string("Who to greet");
        let shout = Schema::boolean("Greet in capitals");
        Schema::object()
            .required("name", name)
            .optional("shout", shout)
            .into()
    }

    fn run(args: HelloArgs, _ctx: &CallContext) -> ToolResult {
        let greeting = format!("Hello, {}!", args.name);
        Ok(if args.shout {
            greeting.to_uppercase()
        } else {
            greeting
        })
    }
}

/// Reads the workspace.
struct LineCount;

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

impl Tool for LineCount {
    const NAME: &'static str = "line_count";
    const DESCRIPTION: &'static str = "Count the lines of a text file in the workspace.";
    type Args = PathArgs;

    fn parameters() -> Schema {
        Schema::object()
            .required(
                "path",
                Schema::string("The file, relative to the working directory"),
            )
            .into()
    }

    fn run(args: PathArgs, ctx: &CallContext) -> ToolResult {
        // The model names host paths (or relative ones); the plugin sees the
        // workspace at ctx.workspace_root. `resolve` maps one to the other
        // and refuses paths outside the workspace.
        let path = sandcrab_sdk::paths::resolve(ctx, &args.path)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ToolError::invalid(format!("cannot read {}: {e}", args.path)))?;
        Ok(format!("{}: {} lines", args.path, text.lines().count()))
    }
}

/// Runs a program on the host.
struct SortLines;

#[derive(Deserialize)]
struct TextArgs {
    text: String,
}

impl Tool for SortLines {
    const NAME: &'static str = "sort_lines";
    const DESCRIPTION: &'static str =
        "Sort lines of text alphabetically with the host's `sort` program.";
    type Args = TextArgs;

    fn parameters() -> Schema {
        Schema::object()
            .required("text", Schema::string("Lines to sort"))
            .into()
    }

    fn run(args: TextArgs, _ctx: &CallContext) -> ToolResult {
        // Refused (the model reads why) unless the operator granted `sort`:
        // [policy.plugins.hello-tool] programs = ["sort"]
        let out = Command::new("sort")
            .stdin(args.text)
            .timeout_ms(5_000)
            .run()?;
        if !out.success() {
            return Err(ToolError::failed(format!(
                "sort failed: {}",
                out.stderr_text()
            )));
        }
        Ok(out.stdout_text())
    }
}

// One line exports every listed tool as this component's `tool` interface.
export_tools!(Hello, LineCount, SortLines);
