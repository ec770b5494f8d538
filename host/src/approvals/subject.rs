//! What a tool call is to the rules: its tool, its shell command line, and
//! the workspace-relative paths it writes (from the arguments its tool
//! declares as paths).

use std::path::Path;

use super::rules::{SHELL_TOOL, Subject};
use crate::plugin::{ToolTraits, Writes};

/// A tool call as the rules see it: `tool` called with `arguments` (an
/// object, or the raw text the model produced), which writes what its
/// `traits` say and may ask for the network (`network: true`, when its
/// traits let it), for an agent working in `working_dir` of `workspace`.
pub fn call_subject(
    tool: &str,
    arguments: &serde_json::Value,
    traits: Option<&ToolTraits>,
    workspace: &Path,
    working_dir: &Path,
) -> Subject {
    let writes = traits.map(|t| &t.writes);
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
        // A patch names the files it writes in its headers.
        Some(Writes::Workspace) => args["patch"]
            .as_str()
            .map(patch_paths)
            .unwrap_or_default()
            .iter()
            .map(|p| relative(p, workspace, working_dir))
            .collect(),
        _ => Vec::new(),
    };
    let network = traits.is_some_and(|t| t.network) && args["network"] == serde_json::json!(true);
    Subject::Call {
        tool: tool.to_string(),
        command,
        paths,
        network,
    }
}

/// The files a patch (`*** Add File: …`, `*** Update File: …`, `*** Delete
/// File: …`, `*** Move to: …`) writes.
fn patch_paths(patch: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    patch
        .lines()
        .filter_map(|line| {
            HEADERS
                .iter()
                .find_map(|h| line.trim_start().strip_prefix(h))
                .map(|p| p.trim().to_string())
        })
        .collect()
}

/// `path` relative to the workspace, the way the file tools resolve it:
/// against the working directory, a guest path (`/workspace/…`) mapped to
/// the workspace, `.` and `..` resolved by name. Left as given when it is
/// not inside the workspace (so no glob matches it; the tools refuse it).
fn relative(path: &str, workspace: &Path, working_dir: &Path) -> String {
    let guest = crate::plugin::GUEST_WORKSPACE;
    let mapped = match path.strip_prefix(guest) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            workspace.join(rest.trim_start_matches('/'))
        }
        _ => working_dir.join(path),
    };
    let mut normal = std::path::PathBuf::new();
    for part in mapped.components() {
        match part {
            std::path::Component::ParentDir => {
                normal.pop();
            }
            std::path::Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    normal
        .strip_prefix(workspace)
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
        assert_eq!(
            relative("src/../secrets/k", ws, Path::new("/w")),
            "secrets/k"
        );
        assert_eq!(
            relative("/workspace/secrets/k", ws, Path::new("/w/src")),
            "secrets/k"
        );
        assert_eq!(
            relative("../../etc/x", ws, Path::new("/w/src")),
            "../../etc/x"
        );
    }

    #[test]
    fn a_patch_is_judged_by_the_files_its_headers_name() {
        let patch = "*** Begin Patch\n*** Add File: .github/workflows/x.yml\n+on: push\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n*** End Patch";
        assert_eq!(
            patch_paths(patch),
            [".github/workflows/x.yml", "src/a.rs", "src/b.rs"]
        );
    }
}
