//! Tools for unit tests: the coding tools' declarations (names, what they
//! write, who may ask for the network) over executors that do nothing.

use std::sync::Arc;

use serde_json::json;

use super::{FnTool, ToolRegistry};
use crate::plugin::{ToolSpec, ToolTraits, Writes};

/// `write_file` and `edit_file` (a `file_path`), `apply_patch` and
/// `shell` (anywhere; `shell` may ask for the network), `read_file`
/// (nothing).
pub fn file_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    let path = || Writes::Paths(vec!["file_path".into()]);
    for (name, writes, network) in [
        ("write_file", path(), false),
        ("edit_file", path(), false),
        ("apply_patch", Writes::Workspace, false),
        ("shell", Writes::Workspace, true),
        ("read_file", Writes::Nothing, false),
    ] {
        tools.register(
            ToolSpec {
                traits: ToolTraits {
                    writes,
                    network,
                    ..Default::default()
                },
                ..ToolSpec::new(name, "", json!({"type": "object"}))
            },
            Arc::new(FnTool(|_, _| async { Ok(String::new()) })),
        );
    }
    tools
}
