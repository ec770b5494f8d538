//! What a tool call is to the rules: its tool, its shell command line, and
//! the workspace-relative paths it writes (from the arguments its tool
//! declares as paths).

use std::path::Path;

use super::rules::{SHELL_TOOL, Subject};
use crate::plugin::Writes;

/// A tool call as the rules see it: `tool` called with `arguments` (an
/// object, or the raw text the model produced), which writes what
/// `writes` says, for an agent working in `working_dir` of `workspace`.
pub fn call_subject(
    tool: &str,
    arguments: &serde_json::Value,
    writes: Option<&Writes>,
    workspace: &Path,
    working_dir: &Path,
) -> Subject {
    let args = match arguments {
        serde_json::Value::String(raw) => serde_json::from_str(raw).unwrap_or_default(),
        other => other.clone(),
    };
    let command = (tool == SHELL_TOOL)
        .then(|| args["command"].as_str().map(String::from))
        .flatten();
    let paths = match writes {
        Some(Writes::Paths(names)) => names
            .iter()
            .filter_map(|name| args[name.as_str()].as_str())
            .map(|p| relative(p, workspace, working_dir))
            .collect(),
        _ => Vec::new(),
    };
    Subject::Call {
        tool: tool.to_string(),
        command,
        paths,
    }
}

/// `path` relative to the workspace (as given when it is not inside it,
/// so no glob matches it).
fn relative(path: &str, workspace: &Path, working_dir: &Path) -> String {
    let full = working_dir.join(path);
    full.strip_prefix(workspace)
        .map(|rel| rel.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_judged_relative_to_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(relative("src/a.rs", ws, Path::new("/w")), "src/a.rs");
        assert_eq!(relative("a.rs", ws, Path::new("/w/src")), "src/a.rs");
        assert_eq!(relative("/w/src/a.rs", ws, Path::new("/w/x")), "src/a.rs");
        assert_eq!(relative("/etc/passwd", ws, Path::new("/w")), "/etc/passwd");
    }
}
