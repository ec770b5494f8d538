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
use rustyline::validate::Validator;
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Editor, Event, EventContext, EventHandler, KeyCode,
    KeyEvent, Modifiers, Movement, RepeatCount,
};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;

use super::above_prompt::{AbovePrompt, WhilePrompting};
use super::paste::{PasteCollector, SharedPastes};
use super::tty_mode;

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
            tty_mode::remember();
            match EditorThread::start(workspace, commands) {
                Ok(editor) => return LineInput::Editor(editor),
                Err(err) => errln!("note: no line editing ({err}); reading plain lines"),
            }
        }
        LineInput::Plain(tokio::io::BufReader::new(tokio::io::stdin()).lines())
    }

    /// What may draw while a read of this input is under way.
    pub fn while_prompting(&self) -> WhilePrompting {
        match self {
            LineInput::Plain(_) => WhilePrompting::DrawAsUsual,
            LineInput::Editor(editor) => match &editor.above {
                Some(above) => WhilePrompting::Above(above.clone()),
                None => WhilePrompting::Wait,
            },
        }
    }

    /// While a turn runs, the terminal is quiet (see
    /// [`tty_mode::quiet`]); only when the line editor reads it.
    pub fn quiet(&self) -> Option<tty_mode::Quiet> {
        matches!(self, LineInput::Editor(_))
            .then(tty_mode::quiet)
            .flatten()
    }

    /// Print `text` (built by sandcrab, see [`Styled`]) as lines of their
    /// own: above the prompt while the editor reads, else on stderr.
    pub fn print_above(&self, text: &super::view::style::Styled) {
        if let LineInput::Editor(editor) = self
            && editor.pending.is_some()
            && let Some(above) = &editor.above
        {
            let mut bytes = text.as_terminal_bytes().to_string();
            if !bytes.ends_with('\n') {
                bytes.push('\n');
            }
            above.print(bytes);
            return;
        }
        super::terminal::write_styled(text, super::terminal::Sink::Err);
    }

    /// Show `prompt` and read one input. Cancel-safe: a read dropped
    /// before it ends keeps its line for the next read.
    pub async fn read(&mut self, prompt: &str) -> std::io::Result<Line> {
        match self {
            LineInput::Plain(lines) => {
                err!("{prompt}");
                tokio::select! {
                    line = lines.next_line() => Ok(match line? {
                        Some(text) => {
                            // Nobody typed it, so no terminal echoed it: the
                            // transcript shows it after its prompt.
                            // SAFETY: isatty only inspects the descriptor.
                            if unsafe { libc::isatty(0) } != 1 {
                                errln!("{text}");
                            }
                            Line::Text(text)
                        }
                        None => Line::End,
                    }),
                    _ = tokio::signal::ctrl_c() => Ok(Line::Interrupted),
                }
            }
            LineInput::Editor(editor) => editor.read(prompt, Ask::Input).await,
        }
    }

    /// Show `prompt` and read the answer to a question, in an editor of
    /// its own: nothing the input editor read ahead (keys typed before the
    /// question existed) can answer it. Not cancel-safe.
    pub async fn read_answer(&mut self, prompt: &str) -> std::io::Result<Line> {
        match self {
            LineInput::Plain(_) => self.read(prompt).await,
            LineInput::Editor(editor) => editor.read(prompt, Ask::Answer).await,
        }
    }
}

type Reply = oneshot::Sender<std::io::Result<Line>>;

/// What a read is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// The operator's next input (history, completion, type-ahead kept).
    Input,
    /// An answer to a question, read afresh.
    Answer,
}

/// The line editor, on a thread of its own (it blocks reading keys).
pub struct EditorThread {
    requests: std::sync::mpsc::Sender<(String, Ask, Reply)>,
    /// A read begun and not yet answered (a cancelled call), and what for.
    pending: Option<(Ask, oneshot::Receiver<std::io::Result<Line>>)>,
    /// Prints above the prompt (none when the editor cannot).
    above: Option<AbovePrompt>,
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
        let pastes = SharedPastes::default();
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        editor.bind_sequence(
            KeyEvent(KeyCode::Enter, Modifiers::NONE),
            EventHandler::Conditional(Box::new(BackslashContinues(pastes.clone()))),
        );
        editor.bind_sequence(
            Event::Any,
            EventHandler::Conditional(Box::new(PasteCollector(pastes.clone()))),
        );
        let above = editor
            .create_external_printer()
            .ok()
            .and_then(|printer| AbovePrompt::start(printer).ok());
        let history = history_file(workspace);
        if let Some(file) = &history {
            let _ = editor.load_history(file);
        }
        let (requests, incoming) = std::sync::mpsc::channel::<(String, Ask, Reply)>();
        std::thread::Builder::new()
            .name("sandcrab-input".into())
            .spawn(move || {
                while let Ok((prompt, ask, reply)) = incoming.recv() {
                    let read = match ask {
                        Ask::Input => editor.readline(&prompt),
                        Ask::Answer => read_answer(&prompt),
                    };
                    // Long pastes stood in the line as marks; a line not
                    // sent takes its pastes with it.
                    let read = match pastes.lock() {
                        Ok(mut pastes) => match read {
                            Ok(text) => Ok(pastes.expand(&text)),
                            Err(err) => {
                                pastes.forget();
                                Err(err)
                            }
                        },
                        Err(_) => read,
                    };
                    let line = match read {
                        Ok(text) => {
                            let worth_keeping = text.len() <= MAX_HISTORY_ENTRY;
                            if ask == Ask::Input && !text.trim().is_empty() && worth_keeping {
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
            above,
        })
    }

    /// Read with `prompt`, or go on with the read a cancelled call began.
    /// A question never takes over an input read: its line was begun
    /// before the question existed.
    async fn read(&mut self, prompt: &str, ask: Ask) -> std::io::Result<Line> {
        match &self.pending {
            Some((Ask::Input, _)) if ask == Ask::Answer => {
                return Err(std::io::Error::other(
                    "a question came while an input line was being typed",
                ));
            }
            Some(_) => {}
            None => {
                let (reply, answer) = oneshot::channel();
                self.requests
                    .send((prompt.to_string(), ask, reply))
                    .map_err(|_| std::io::Error::other("the line editor stopped"))?;
                self.pending = Some((ask, answer));
            }
        }
        let (_, answer) = self.pending.as_mut().expect("a read is pending");
        let line = answer
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the line editor stopped")));
        self.pending = None;
        line
    }
}

/// One line read by an editor made for it: it has read nothing ahead, and
/// what it reads past the line is dropped with it. A pasted line break is
/// not an Enter.
fn read_answer(prompt: &str) -> rustyline::Result<String> {
    let config = Config::builder()
        .auto_add_history(false)
        .bracketed_paste(true)
        .build();
    rustyline::DefaultEditor::with_config(config)?.readline(prompt)
}

/// The longest input kept in the history (a long paste is not).
const MAX_HISTORY_ENTRY: usize = 10_000;

/// Enter after a `\` typed at the end of the input goes on to a new line:
/// the `\` becomes the line break. Only the key does this, so a pasted
/// text keeps its backslashes; an Enter inside a paste is part of it.
struct BackslashContinues(SharedPastes);

impl ConditionalEventHandler for BackslashContinues {
    fn handle(&self, evt: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if let Ok(mut pastes) = self.0.lock()
            && pastes.collecting()
        {
            if let Some(c) = evt.get(0).copied().and_then(super::paste::pasted_char) {
                pastes.push(c);
            }
            return Some(Cmd::Noop);
        }
        continues(ctx.line(), ctx.pos())
            .then(|| Cmd::Replace(Movement::BackwardChar(1), Some("\n".into())))
    }
}

/// Whether Enter with the cursor at `pos` of `line` continues the input.
fn continues(line: &str, pos: usize) -> bool {
    pos == line.len() && line.ends_with('\\')
}

/// Where the word that ends `before` starts (after the last whitespace
/// character, which may take several bytes).
fn word_start(before: &str) -> usize {
    before
        .char_indices()
        .rfind(|(_, c)| c.is_whitespace())
        .map_or(0, |(at, c)| at + c.len_utf8())
}

/// This workspace's history file: `DATA/sandcrab/history/HASH` (the
/// workspace's path hashed, so the name says nothing of it).
fn history_file(workspace: &Path) -> Option<PathBuf> {
    let data = crate::user_files::data_dir()?.join("history");
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
        let start = word_start(before);
        match before[start..].strip_prefix('@') {
            Some(partial) => Ok((start + 1, workspace_paths(&self.workspace, partial))),
            None => Ok((pos, Vec::new())),
        }
    }
}

/// Most directory entries looked at for one completion.
const MAX_LISTED: usize = 5_000;

/// Workspace entries completing `partial` (a path relative to the
/// workspace that never climbs out of it, through no link); directories
/// end in `/`. A name with a control character (a file the model may have
/// made to reach the terminal) is never offered.
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
    // Every directory on the way is a real directory, not a link.
    let mut walked = workspace.to_path_buf();
    for part in Path::new(dir).components() {
        walked.push(part);
        if !std::fs::symlink_metadata(&walked).is_ok_and(|m| m.is_dir()) {
            return Vec::new();
        }
    }
    let Ok(entries) = std::fs::read_dir(workspace.join(dir)) else {
        return Vec::new();
    };
    let mut found: Vec<Pair> = entries
        .take(MAX_LISTED)
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with(prefix)
                || (name.starts_with('.') && !prefix.starts_with('.'))
                || name.chars().any(crate::terminal_safe::needs_escape)
            {
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

impl Validator for Helper {}

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
        // A name made to drive the terminal is not offered; a linked
        // directory is not entered.
        std::fs::write(dir.path().join("src/\x1b]52;c;aGk=\x07x"), "").unwrap();
        assert_eq!(names("src/"), ["src/deep/", "src/main.rs"]);
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        assert!(names("etc/").is_empty());
    }

    #[test]
    fn only_a_backslash_at_the_cursor_at_the_end_continues() {
        assert!(continues("one\\", 4));
        assert!(!continues("one\\", 3), "the cursor is not at the end");
        assert!(!continues("a\\b", 3));
    }

    #[test]
    fn a_word_starts_after_a_space_of_any_width() {
        // A no-break space (2 bytes) and an ideographic space (3 bytes)
        // once made Tab panic.
        for before in ["see\u{a0}@no", "これは\u{3000}@テ", "x @no", "@no"] {
            let start = word_start(before);
            assert!(before[start..].starts_with('@'), "{before:?}");
        }
        assert_eq!(word_start("no space"), 3);
        assert_eq!(word_start(""), 0);
    }
}
