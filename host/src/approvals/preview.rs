//! What a file edit would change, shown before the operator answers: a
//! unified diff of the file as it is against the file as the call would
//! leave it. Read from the call's arguments by the file tools' own
//! conventions (`content` replaces the file, `old_string`/`new_string`
//! replace text, `patch` is already a diff).

use std::path::Path;

use similar::TextDiff;

use crate::tools::PreparedCall;

/// Largest file read for a diff.
const MAX_READ: u64 = 1 << 20;
/// Longest diff shown.
const MAX_DIFF_CHARS: usize = 20_000;

/// The diff `call` would make to the file it writes, if it is a file edit
/// sandcrab can foresee. Only files inside `workspace` are read.
pub fn edit_diff(call: &PreparedCall, workspace: &Path) -> Option<String> {
    if !call.writes.writes() {
        return None;
    }
    let args = call.arguments.as_ref().ok()?;
    if let Some(patch) = args["patch"].as_str() {
        return Some(clip(patch.to_string()));
    }
    let written = call.writes.paths.first()?;
    let (name, path) = (written.named.as_str(), &written.host);
    let before = read_small(path, workspace);
    let after = if let Some(content) = args["content"].as_str() {
        content.to_string()
    } else {
        let (old, new) = (args["old_string"].as_str()?, args["new_string"].as_str()?);
        let before = before.as_deref()?;
        if !before.contains(old) {
            // The tool may still match it loosely (whitespace, line ends):
            // what it would change cannot be shown exactly, so say so and
            // show both texts.
            let quote = |text: &str, mark: char| {
                text.lines()
                    .map(|l| format!("{mark}{l}\n"))
                    .collect::<String>()
            };
            return Some(clip(format!(
                "(the text to replace is not in {name} as written; the tool may match it with different spacing, so the exact change cannot be shown)\n{}{}",
                quote(old, '-'),
                quote(new, '+')
            )));
        }
        if args["replace_all"].as_bool() == Some(true) {
            before.replace(old, new)
        } else {
            before.replacen(old, new, 1)
        }
    };
    let before = before.unwrap_or_default();
    let diff = TextDiff::configure()
        .timeout(crate::checkpoint::DIFF_TIME)
        .diff_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    Some(clip(diff))
}

/// The file's text, if it is a small regular file inside `workspace`
/// (never through a FIFO or a device, never outside).
fn read_small(path: &Path, workspace: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    if !real.starts_with(std::fs::canonicalize(workspace).ok()?) {
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() || meta.len() > MAX_READ {
        return None;
    }
    std::fs::read_to_string(real).ok()
}

fn clip(mut text: String) -> String {
    if text.chars().count() > MAX_DIFF_CHARS {
        text = text.chars().take(MAX_DIFF_CHARS).collect();
        text.push_str("\n… (diff cut)\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn diff(args: serde_json::Value, dir: &Path) -> Option<String> {
        let place = crate::tools::CallPlace {
            workspace: dir,
            working_dir: dir,
        };
        let tools = crate::tools::testing::file_tools();
        let name = if args.get("patch").is_some() {
            "apply_patch"
        } else if args.get("command").is_some() {
            "shell"
        } else if args.get("content").is_some() {
            "write_file"
        } else {
            "edit_file"
        };
        edit_diff(&PreparedCall::new("c", name, &args, &tools, place), dir)
    }

    #[test]
    fn edits_show_the_change_they_would_make() {
        let dir = tempfile::tempdir().unwrap();
        let dir_path = dir.path();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let edit = json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"});
        let shown = diff(edit, dir_path).unwrap();
        assert!(shown.contains("--- a/a.txt\n+++ b/a.txt\n"), "{shown}");
        assert!(shown.contains("-two\n+2\n"), "{shown}");
        let write = json!({"file_path": "/workspace/new.txt", "content": "hello\n"});
        assert!(diff(write, dir_path).unwrap().contains("+hello\n"));
        let patch = json!({"patch": "*** Begin Patch\n*** End Patch"});
        assert!(
            diff(patch, dir_path)
                .unwrap()
                .starts_with("*** Begin Patch")
        );
        assert_eq!(diff(json!({"command": "ls"}), dir_path), None);
        // Text the tool would match loosely: said, both texts shown.
        let loose =
            json!({"file_path": "a.txt", "old_string": "one\n  two", "new_string": "curl x | sh"});
        let shown = diff(loose, dir_path).unwrap();
        assert!(
            shown.starts_with("(the text to replace is not in a.txt as written"),
            "{shown}"
        );
        assert!(shown.contains("+curl x | sh"), "{shown}");
        // An encoded call is shown as the same call.
        let encoded = serde_json::Value::String(
            json!({"file_path": "a.txt", "content": "new\n"}).to_string(),
        );
        assert!(diff(encoded, dir_path).unwrap().contains("+new\n"));
        // Nothing outside the workspace is read, even for a diff.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret\n").unwrap();
        let edit = json!({"file_path": outside.path().join("secret"), "content": "x\n"});
        let shown = diff(edit, dir_path).unwrap();
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
