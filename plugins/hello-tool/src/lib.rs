//! hello-tool: the smallest useful sandcrab tool plugin.
//!
//! Build: `cargo build --release --target wasm32-wasip2` (from `plugins/`),
//! then put `hello_tool.wasm` beside `plugin.toml` in a plugin directory and
//! run `sandcrab plugins list --plugins DIR`.
use sandcrab_sdk::prelude::*;

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

// One line exports every listed tool as this component's `tool` interface.
export_tools!(Hello);
