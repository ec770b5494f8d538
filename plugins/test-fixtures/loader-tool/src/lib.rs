//! Test fixture: `tools()` hangs, returns 100,000 tools, a 50 MB schema or
//! a 1 MB description, as the LOADER_MODE variable says, so the host's
//! tests can check loading stays bounded.

use sandcrab_sdk::bindings::tool::exports::sandcrab::plugin::tool::Guest;
use sandcrab_sdk::{CallContext, ToolError, ToolOutput, ToolSpec, Writes};

struct Loader;

fn spec(name: String, description: String, schema: String) -> ToolSpec {
    ToolSpec {
        name,
        description,
        parameters_schema: schema,
        writes: Writes::Nothing,
        background: false,
        output_limit: None,
    }
}

const SCHEMA: &str = r#"{"type":"object","properties":{}}"#;

impl Guest for Loader {
    fn tools() -> Vec<ToolSpec> {
        match std::env::var("LOADER_MODE").as_deref() {
            Ok("hang") => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Ok("many") => (0..100_000)
                .map(|i| spec(format!("tool_{i}"), "x".into(), SCHEMA.into()))
                .collect(),
            Ok("huge-schema") => {
                let big = format!(
                    r#"{{"type":"object","description":"{}","properties":{{}}}}"#,
                    "x".repeat(50 << 20)
                );
                vec![
                    spec("huge".into(), "huge schema".into(), big),
                    spec("fine".into(), "fine".into(), SCHEMA.into()),
                ]
            }
            Ok("long-description") => vec![
                spec("wordy".into(), "y".repeat(1 << 20), SCHEMA.into()),
                spec("fine".into(), "fine".into(), SCHEMA.into()),
            ],
            _ => vec![spec("fine".into(), "fine".into(), SCHEMA.into())],
        }
    }

    fn call(name: String, _args: String, _ctx: CallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput {
            text: format!("{name} ran"),
            timed_out: false,
        })
    }
}

sandcrab_sdk::bindings::tool::export_tool_plugin!(Loader);
