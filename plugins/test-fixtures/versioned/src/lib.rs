//! Test fixture for reloading: one source, built twice (the crates
//! `versioned-v1` and `versioned-v2` point their `[lib] path` here), so the
//! only difference between the two components is the version they answer.
use sandcrab_sdk::prelude::*;

struct WhichVersion;

#[derive(Deserialize)]
struct Args {
    /// Keep the call running this long first (a call in flight).
    #[serde(default)]
    sleep_ms: u64,
}

impl Tool for WhichVersion {
    const NAME: &'static str = "which_version";
    const DESCRIPTION: &'static str = "Say which version of this plugin answered.";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .optional("sleep_ms", Schema::integer("Wait this long first"))
            .into()
    }

    fn run(args: Args, _ctx: &CallContext) -> ToolResult {
        std::thread::sleep(std::time::Duration::from_millis(args.sleep_ms));
        Ok(format!("version {}", env!("CARGO_PKG_VERSION")))
    }
}

export_tools!(WhichVersion);
