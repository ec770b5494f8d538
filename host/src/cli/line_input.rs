//! What the operator types in `chat`. On a terminal, a line editor
//! (rustyline, on a thread of its own): arrows and Emacs keys, history per
//! workspace kept across runs (Ctrl-R searches it), several lines in one
//! input (Alt-Enter, a line ending in `\`, or a bracketed paste; Ctrl-J
//! and Enter both send, as a terminal driver expects), Tab completion of slash commands and of workspace paths after
//! `@`. Otherwise (a pipe, `TERM=dumb`) plain lines from stdin.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{FileHistory, History};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Cmd, Config, Editor, KeyCode, KeyEvent, Modifiers};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;

/// One thing the operator did at a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line, or the end of input.
    End,
}

/// The operator's input.
pub enum LineInput {
    Plain(tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>),
    Editor(EditorThread),
}

impl LineInput {
    /// The line editor when stdin and stderr are terminals (and `TERM` is
    /// not `dumb`), else plain lines. `commands` are the slash commands
    /// Tab completes.
    pub fn open(workspace: &Path, commands: &'static [&'static str]) -> LineInput {
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(0) == 1 && libc::isatty(2) == 1 };
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        if tty && !dumb {
            match EditorThread::start(workspace, commands) {
                Ok(editor) => return LineInput::Editor(editor),
                Err(err) => errln!("note: no line editing ({err}); reading plain lines"),
            }
        }
        LineInput::Plain(tokio::io::BufReader::new(tokio::io::stdin()).lines())
    }

    /// Show `prompt` and read one input. Cancel-safe: a read dropped
    /// before it ends keeps its line for the next read.
    pub async fn read(&mut self, prompt: &str) -> std::io::Result<Line> {
        match self {
            LineInput::Plain(lines) => {
                err!("{prompt}");
                tokio::select! {
                    line = lines.next_line() => Ok(match line? {
                        Some(text) => Line::Text(text),
                        None => Line::End,
                    }),
                    _ = tokio::signal::ctrl_c() => Ok(Line::Interrupted),
                }
            }
            LineInput::Editor(editor) => editor.read(prompt).await,
        }
    }
}

type Reply = oneshot::Sender<std::io::Result<Line>>;

/// The line editor, on a thread of its own (it blocks reading keys).
pub struct EditorThread {
    requests: std::sync::mpsc::Sender<(String, Reply)>,
    pending: Option<oneshot::Receiver<std::io::Result<Line>>>,
}

impl EditorThread {
    fn start(workspace: &Path, commands: &'static [&'static str]) -> Result<Self, ReadlineError> {
        let config = Config::builder()
            .auto_add_history(false)
            .max_history_size(5000)?
            .history_ignore_dups(true)?
            .history_ignore_space(true)
            .bracketed_paste(true)
            .build();
        let mut editor: Editor<Helper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(Helper {
            workspace: workspace.to_path_buf(),
            commands,
        }));
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        let history = history_file(workspace);
        if let Some(file) = &history {
            let _ = editor.load_history(file);
        }
        let (requests, incoming) = std::sync::mpsc::channel::<(String, Reply)>();
        std::thread::Builder::new()
            .name("sandcrab-input".into())
            .spawn(move || {
                while let Ok((prompt, reply)) = incoming.recv() {
                    let line = match editor.readline(&prompt) {
                        Ok(text) => {
                            let text = joined(&text);
                            if !text.trim().is_empty() {
                                let _ = editor.add_history_entry(text.as_str());
                                if let Some(file) = &history {
                                    save_history(&mut editor, file);
                                }
                            }
                            Ok(Line::Text(text))
                        }
                        Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
                        Err(ReadlineError::Eof) => Ok(Line::End),
                        Err(ReadlineError::Io(err)) => Err(err),
                        Err(other) => Err(std::io::Error::other(other.to_string())),
                    };
                    let _ = reply.send(line);
                }
            })
            .map_err(ReadlineError::Io)?;
        Ok(EditorThread {
            requests,
            pending: None,
        })
    }

    async fn read(&mut self, prompt: &str) -> std::io::Result<Line> {
        if self.pending.is_none() {
            let (reply, answer) = oneshot::channel();
            self.requests
                .send((prompt.to_string(), reply))
                .map_err(|_| std::io::Error::other("the line editor stopped"))?;
            self.pending = Some(answer);
        }
        let answer = self.pending.as_mut().expect("a read is pending");
        let line = answer
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the line editor stopped")));
        self.pending = None;
        line
    }
}

/// An input whose lines ended in `\` (to go on typing) without the `\`.
fn joined(text: &str) -> String {
    text.split('\n')
        .map(|line| line.strip_suffix('\\').unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// This workspace's history file: `DATA/sandcrab/history/HASH` (the
/// workspace's path hashed, so the name says nothing of it).
fn history_file(workspace: &Path) -> Option<PathBuf> {
    let data = crate::store::default_path()?.parent()?.join("history");
    let key = blake3::hash(workspace.as_os_str().as_encoded_bytes());
    Some(data.join(&key.to_hex()[..24]))
}

fn save_history(editor: &mut Editor<Helper, FileHistory>, file: &Path) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(dir) = file.parent() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    if editor.history_mut().save(file).is_ok() {
        let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600));
    }
}

/// Completion and multi-line rules for the editor.
struct Helper {
    workspace: PathBuf,
    commands: &'static [&'static str],
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        if before.starts_with('/') && !before.contains(char::is_whitespace) {
            let found = self
                .commands
                .iter()
                .filter(|c| c.starts_with(before))
                .map(|c| Pair {
                    display: c.to_string(),
                    replacement: format!("{c} "),
                })
                .collect();
            return Ok((0, found));
        }
        let start = before
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
        match before[start..].strip_prefix('@') {
            Some(partial) => Ok((start + 1, workspace_paths(&self.workspace, partial))),
            None => Ok((pos, Vec::new())),
        }
    }
}

/// Workspace entries completing `partial` (a path relative to the
/// workspace that never climbs out of it); directories end in `/`. Links
/// are listed but not followed.
pub fn workspace_paths(workspace: &Path, partial: &str) -> Vec<Pair> {
    let (dir, prefix) = match partial.rsplit_once('/') {
        Some((dir, prefix)) => (dir, prefix),
        None => ("", partial),
    };
    let inside = Path::new(dir)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(workspace.join(dir)) else {
        return Vec::new();
    };
    let mut found: Vec<Pair> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let is_dir = entry.file_type().ok()?.is_dir();
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            let slash = if is_dir { "/" } else { "" };
            Some(Pair {
                display: format!("{name}{slash}"),
                replacement: format!("{path}{slash}"),
            })
        })
        .collect();
    found.sort_by(|a, b| a.replacement.cmp(&b.replacement));
    found.truncate(200);
    found
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for Helper {
    /// A line ending in `\` goes on to the next line.
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl rustyline::Helper for Helper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_complete_inside_the_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("src/.hidden"), "").unwrap();
        let names = |partial: &str| -> Vec<String> {
            workspace_paths(dir.path(), partial)
                .into_iter()
                .map(|p| p.replacement)
                .collect()
        };
        assert_eq!(names("sr"), ["src/"]);
        assert_eq!(names("src/"), ["src/deep/", "src/main.rs"]);
        assert_eq!(names("src/m"), ["src/main.rs"]);
        assert_eq!(names("src/."), ["src/.hidden"]);
        assert!(names("../").is_empty() && names("/etc/").is_empty());
    }

    #[test]
    fn continued_lines_lose_their_backslash() {
        assert_eq!(joined("one\\\ntwo"), "one\ntwo");
        assert_eq!(joined("a\\b"), "a\\b");
    }
}
