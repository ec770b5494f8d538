//! `@path` in a chat input: a workspace file it names is attached to the
//! message (its content, for a text file up to [`MAX_ATTACHED`] bytes; a
//! reference the model can read itself otherwise). Only files beneath the
//! workspace, reached without following a link, are read.

use std::path::Path;

/// Largest file attached whole.
pub const MAX_ATTACHED: u64 = 100 * 1024;

/// What `input` mentions, attached: the input unchanged, then one block
/// per mentioned file; and a line per file for the operator.
pub fn attach(input: &str, workspace: &Path) -> (String, Vec<String>) {
    let mut message = input.to_string();
    let mut notes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for word in input.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', ')', '?', '!']);
        if path.is_empty() || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        let relative = Path::new(path);
        match crate::safe_fs::read_beneath(workspace, relative, MAX_ATTACHED) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => {
                    let lines = text.lines().count();
                    message.push_str(&format!(
                        "\n\n<file path=\"{path}\">\n{text}{}</file>",
                        if text.ends_with('\n') || text.is_empty() {
                            ""
                        } else {
                            "\n"
                        }
                    ));
                    notes.push(format!("attached {path} ({lines} lines)"));
                }
                Err(_) => {
                    message.push_str(&format!(
                        "\n\n(The operator mentioned {path}, a binary file; it is not attached.)"
                    ));
                    notes.push(format!("{path} is not text; mentioned, not attached"));
                }
            },
            Err(err) if err.kind() == std::io::ErrorKind::InvalidData => {
                message.push_str(&format!(
                    "\n\n(The operator mentioned the file {path}; it is too large to attach, read it with your tools.)"
                ));
                notes.push(format!(
                    "{path} is over {} KiB; the model was told to read it",
                    MAX_ATTACHED / 1024
                ));
            }
            // Not a file of the workspace (an e-mail address, a handle, a
            // typo): the word stays as it is.
            Err(_) => {}
        }
    }
    (message, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentioned_files_are_attached_and_nothing_outside_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(dir.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        std::fs::write(ws.join("big"), vec![b'x'; MAX_ATTACHED as usize + 1]).unwrap();
        let (message, notes) = attach(
            "look at @a.txt, @link @../secret @big and mail me@example.com",
            &ws,
        );
        assert!(message.starts_with("look at @a.txt, @link"));
        assert!(
            message.contains("<file path=\"a.txt\">\nalpha\n</file>"),
            "{message}"
        );
        assert!(!message.contains("s3cret"));
        assert!(message.contains("too large to attach"));
        assert_eq!(notes.len(), 2, "{notes:?}");
    }
}
