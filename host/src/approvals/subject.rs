//! What a tool call is to the rules: its tool, its shell command line, the
//! workspace-relative paths it writes and whether it asks for the network
//! — all read from the call as it was prepared, never from its raw
//! arguments.

use std::path::Path;

use super::rules::{SHELL_TOOL, Subject};
use crate::tools::PreparedCall;

/// `call` as the rules see it, for an agent working in `workspace`.
pub fn call_subject(call: &PreparedCall, workspace: &Path) -> Subject {
    let command = (call.name == SHELL_TOOL)
        .then(|| {
            let args = call.arguments.as_ref().ok()?;
            args["command"].as_str().map(String::from)
        })
        .flatten();
    let paths = call
        .writes
        .paths
        .iter()
        .map(|p| p.in_workspace(workspace))
        .collect();
    Subject::Call {
        tool: call.name.clone(),
        command,
        paths,
        network: call.asks_network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::CallPlace;
    use serde_json::{Value, json};

    fn subject(name: &str, raw: Value, working_dir: &str) -> Subject {
        let tools = crate::tools::testing::file_tools();
        let place = CallPlace {
            workspace: Path::new("/w"),
            working_dir: Path::new(working_dir),
        };
        call_subject(
            &PreparedCall::new("c", name, &raw, &tools, place),
            Path::new("/w"),
        )
    }

    fn paths(subject: Subject) -> Vec<String> {
        match subject {
            Subject::Call { paths, .. } => paths,
            Subject::Grant { .. } => Vec::new(),
        }
    }

    #[test]
    fn paths_are_judged_relative_to_the_workspace() {
        let write = |path: &str, wd: &str| {
            paths(subject("write_file", json!({ "file_path": path }), wd)).remove(0)
        };
        assert_eq!(write("src/a.rs", "/w"), "src/a.rs");
        assert_eq!(write("a.rs", "/w/src"), "src/a.rs");
        assert_eq!(write("/w/src/a.rs", "/w/x"), "src/a.rs");
        assert_eq!(write("/etc/passwd", "/w"), "/etc/passwd");
        assert_eq!(write("src/../secrets/k", "/w"), "secrets/k");
        assert_eq!(write("/workspace/secrets/k", "/w/src"), "secrets/k");
        assert_eq!(write("../../etc/x", "/w/src"), "../../etc/x");
    }

    #[test]
    fn a_patch_is_judged_by_the_files_its_headers_name() {
        let patch = "*** Begin Patch\n*** Add File: .github/workflows/x.yml\n+on: push\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n*** End Patch";
        assert_eq!(
            paths(subject("apply_patch", json!({ "patch": patch }), "/w")),
            [".github/workflows/x.yml", "src/a.rs", "src/b.rs"]
        );
    }

    #[test]
    fn an_encoded_call_is_judged_as_the_same_call() {
        let args = json!({"command": "git push", "network": true});
        let plain = subject(SHELL_TOOL, args.clone(), "/w");
        let encoded = subject(SHELL_TOOL, Value::String(args.to_string()), "/w");
        assert_eq!(plain, encoded);
        assert!(matches!(
            plain,
            Subject::Call { command: Some(ref c), .. } if c == "git push"
        ));
    }
}
