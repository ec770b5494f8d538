//! Test fixture: a global marker that outlives a call only if the host
//! calls the same instance again.

use std::sync::Mutex;

use sandcrab_sdk::bindings::tool::exports::sandcrab::plugin::tool::Guest;
use sandcrab_sdk::{CallContext, ToolError, ToolOutput, ToolSpec, Writes};

/// What the previous call of this instance left.
static MARKER: Mutex<String> = Mutex::new(String::new());

struct Stateful;

fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters_schema:
            r#"{"type":"object","properties":{"marker":{"type":"string"}},"required":["marker"]}"#
                .into(),
        writes: Writes::Nothing,
        background: false,
        output_limit: None,
    }
}

/// Leave `args.marker` in the global; the marker that was there before.
fn swap_marker(args: &str) -> String {
    let marker = args
        .split("\"marker\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
        .to_string();
    let mut kept = MARKER.lock().unwrap();
    std::mem::replace(&mut *kept, marker)
}

impl Guest for Stateful {
    fn tools() -> Vec<ToolSpec> {
        vec![
            spec("remember", "Leave a marker; answer the previous one"),
            spec("crash", "Leave a marker, then trap"),
            spec("spin", "Leave a marker, then spin until the time limit"),
            spec("hog", "Leave a marker, then allocate past the memory limit"),
        ]
    }

    fn call(name: String, args: String, _ctx: CallContext) -> Result<ToolOutput, ToolError> {
        let previous = swap_marker(&args);
        match name.as_str() {
            // A trap (wasm `unreachable`), after the marker was left.
            "crash" => std::process::abort(),
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "hog" => {
                let mut held: Vec<Vec<u8>> = Vec::new();
                loop {
                    held.push(vec![1u8; 8 << 20]);
                    std::hint::black_box(&held);
                }
            }
            _ => {}
        }
        Ok(ToolOutput {
            text: format!("previous: {previous}"),
            timed_out: false,
        })
    }
}

sandcrab_sdk::bindings::tool::export_tool_plugin!(Stateful);
