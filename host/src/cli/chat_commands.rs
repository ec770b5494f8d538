//! `chat`'s slash commands: what each is called, how it reads, what it
//! does. Everything they print of the session's content goes through the
//! same safe styling as the answer.

use super::chat_state::Chat;
use super::render::Renderer;
use super::terminal::{Sink, sanitize, write_styled};
use super::view::diff_view::{render_change, render_titled};
use super::view::style::{Style, Styled, width_of, word_wrap};

/// The commands Tab completes.
pub const COMMANDS: &[&str] = &[
    "/help",
    "/diff",
    "/undo",
    "/model",
    "/sessions",
    "/resume",
    "/approvals",
    "/retry",
    "/compact",
    "/jobs",
    "/cancel",
    "/plugins",
    "/exit",
];

/// A slash command, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Exit,
    Retry,
    Compact,
    Plugins,
    Jobs {
        all: bool,
    },
    Cancel(String),
    Diff,
    /// `force`: even over files changed since the turn.
    Undo {
        force: bool,
    },
    /// Forget the last turn's checkpoints without restoring.
    UndoSkip,
    Model(Option<String>),
    Sessions,
    /// `force`: even if it cancels this session's running jobs.
    Resume {
        id: Option<String>,
        force: bool,
    },
    Approvals,
    /// An MCP server's prompt, `/mcp__SERVER__PROMPT ARGS` (the whole
    /// line): rendered and sent as the message.
    Prompt(String),
    Unknown(String),
}

impl Command {
    /// `input` as a command (None: a message for the model).
    pub fn parse(input: &str) -> Option<Command> {
        let input = input.trim();
        if !input.starts_with('/') || input.contains('\n') {
            return None;
        }
        let (name, arg) = match input.split_once(char::is_whitespace) {
            Some((name, arg)) => (name, Some(arg.trim().to_string()).filter(|a| !a.is_empty())),
            None => (input, None),
        };
        Some(match (name, arg) {
            ("/help" | "/?", _) => Command::Help,
            ("/exit" | "/quit", _) => Command::Exit,
            ("/retry", _) => Command::Retry,
            ("/compact", _) => Command::Compact,
            ("/plugins", _) => Command::Plugins,
            ("/jobs", arg) => Command::Jobs {
                all: arg.as_deref() == Some("all"),
            },
            ("/cancel", arg) => Command::Cancel(arg.unwrap_or_default()),
            ("/diff", _) => Command::Diff,
            ("/undo", None) => Command::Undo { force: false },
            ("/undo", Some(arg)) if arg == "force" => Command::Undo { force: true },
            ("/undo", Some(arg)) if arg == "skip" => Command::UndoSkip,
            ("/undo", Some(arg)) => Command::Unknown(format!("/undo {arg}")),
            ("/model", arg) => Command::Model(arg),
            ("/sessions", _) => Command::Sessions,
            ("/resume", None) => Command::Resume {
                id: None,
                force: false,
            },
            ("/resume", Some(arg)) => match arg.split_whitespace().collect::<Vec<_>>()[..] {
                [id] => Command::Resume {
                    id: Some(id.to_string()),
                    force: false,
                },
                [id, "force"] => Command::Resume {
                    id: Some(id.to_string()),
                    force: true,
                },
                _ => Command::Unknown(format!("/resume {arg}")),
            },
            ("/approvals", _) => Command::Approvals,
            (name, _) if name.starts_with(crate::mcp::prompts::PREFIX) => {
                Command::Prompt(input.to_string())
            }
            (other, _) => Command::Unknown(other.to_string()),
        })
    }
}

const HELP: &[(&str, &str)] = &[
    ("/diff", "every file this conversation changed, as a diff"),
    (
        "/undo [force|skip]",
        "put back the files the last turn changed (again: the turn before); force: even those changed since; skip: forget that turn's checkpoints, restoring nothing",
    ),
    (
        "/model [NAME]",
        "show the model, or ask NAME from the next turn on",
    ),
    ("/sessions", "this workspace's saved sessions, numbered"),
    (
        "/resume N|ID [force]",
        "continue a saved session here: its number in /sessions, or its id (the start is enough); force: even if that cancels this session's running jobs",
    ),
    (
        "/approvals",
        "the approvals mode and the rules in force here",
    ),
    ("/retry", "ask the model again after an error"),
    ("/compact", "summarize older turns now"),
    ("/jobs [all]", "background jobs (running, or all)"),
    ("/cancel ID", "cancel a background job"),
    ("/plugins", "the plugins loaded now"),
    ("/exit", "quit (also Ctrl-D)"),
];

/// Do `command` (not `/exit` or `/retry`, which the loop handles).
pub(super) async fn run(chat: &mut Chat, command: Command) {
    match command {
        Command::Help => help(chat).await,
        Command::Compact => {
            chat.session.compact_on_request().await;
        }
        Command::Plugins => list_plugins(chat).await,
        Command::Jobs { all } => list_jobs(chat, all),
        Command::Cancel(id) => cancel_job(chat, &id),
        Command::Diff => diff(chat),
        Command::Undo { force } => undo(chat, force),
        Command::UndoSkip => undo_skip(chat),
        Command::Model(name) => model(chat, name),
        Command::Sessions => sessions(chat),
        Command::Resume { id, force } => resume(chat, id, force).await,
        Command::Approvals => approvals(chat),
        Command::Unknown(name) => errln!(
            "unknown command {}; /help lists them",
            super::terminal::one_line(&name, 60)
        ),
        Command::Exit | Command::Retry | Command::Prompt(_) => {}
    }
}

async fn help(chat: &Chat) {
    let mut out = Styled::new(chat.look.color);
    // The MCP servers' prompts are commands too.
    let (prompts, _) = chat.kit.mcp.prompts().await;
    let prompts: Vec<(String, String)> = prompts
        .iter()
        .map(|p| {
            let name = format!("/{} {}", p.name(), p.hint());
            (
                sanitize(name.trim()).into_owned(),
                sanitize(&p.summary()).into_owned(),
            )
        })
        .collect();
    let prompts: Vec<(&str, &str)> = prompts
        .iter()
        .map(|(n, w)| (n.as_str(), w.as_str()))
        .collect();
    // One column for the names, as wide as the widest and two more; the
    // descriptions wrap at the terminal's width under their column.
    let column = HELP
        .iter()
        .chain(&prompts)
        .map(|(name, _)| width_of(name))
        .max()
        .unwrap_or(0)
        + 2;
    let room = chat
        .look
        .width
        .map_or(usize::MAX, |w| w.saturating_sub(column + 1).max(20));
    for (name, what) in HELP.iter().chain(&prompts) {
        out.styled(Style::Bold, name)
            .text(&" ".repeat(column - width_of(name)));
        for (i, line) in word_wrap(what, room).iter().enumerate() {
            if i > 0 {
                out.text(&" ".repeat(column));
            }
            out.text(line).text("\n");
        }
    }
    out.styled(
        Style::Dim,
        "@path attaches a workspace file · Tab completes commands and @paths · Ctrl-R searches history · Alt-Enter or \\ at the end: new line · Ctrl-C interrupts a turn\n",
    );
    write_styled(&out, Sink::Err);
}

fn diff(chat: &Chat) {
    let diff = chat.session.conversation_changes();
    if diff.changes.is_empty() && diff.unshown.is_empty() {
        errln!(
            "no file changed by a tool in this conversation (shell commands' changes are not tracked)"
        );
        return;
    }
    for change in &diff.changes {
        write_styled(&render_change(change, chat.look, usize::MAX), Sink::Out);
    }
    for (path, why) in &diff.unshown {
        errln!(
            "changed, not shown: {}: {}",
            super::terminal::one_line(path, 200),
            super::terminal::one_line(why, 300)
        );
    }
}

fn undo(chat: &Chat, force: bool) {
    let undone = match chat.session.undo_last_changes(force) {
        Ok(undone) => undone,
        Err(err) => {
            errln!("{}", super::terminal::one_line(&err.to_string(), 500));
            return;
        }
    };
    for change in &undone.restored {
        write_styled(&render_titled(change, "restored", chat.look, 20), Sink::Err);
    }
    for (path, why) in &undone.failed {
        errln!(
            "could not restore {}: {}",
            super::terminal::one_line(path, 200),
            super::terminal::one_line(why, 300)
        );
    }
    if !undone.failed.is_empty() {
        errln!(
            "their checkpoints are kept: /undo again puts them back once that is mended, /undo skip forgets them"
        );
    }
    if undone.restored.is_empty() && undone.failed.is_empty() {
        errln!("the files the last turn changed are already as they were");
    }
    let names: Vec<String> = undone
        .restored
        .iter()
        .map(|c| super::terminal::one_line(&c.path, 200))
        .collect();
    if !names.is_empty() {
        // The model's idea of these files is now out of date.
        chat.session.steer(&format!(
            "The operator undid the file changes of the previous turn: {} are back as they were before it. Read them again before relying on their content.",
            names.join(", ")
        ));
    }
}

fn undo_skip(chat: &Chat) {
    let forgotten = chat.session.forget_last_changes();
    if forgotten.is_empty() {
        errln!("nothing to skip: no checkpoint is left");
        return;
    }
    let names: Vec<String> = forgotten
        .iter()
        .map(|p| super::terminal::one_line(p, 200))
        .collect();
    errln!(
        "forgot the checkpoints of {} (the files stay as they are); /undo now goes to the turn before",
        names.join(", ")
    );
}

fn model(chat: &Chat, name: Option<String>) {
    match name {
        None => errln!(
            "model: {} ({}); /model NAME switches from the next turn on",
            sanitize(&chat.session.model()),
            chat.kit.provider
        ),
        Some(name) if crate::agent::Session::valid_model_name(&name) => {
            chat.session.set_model(&name);
            errln!("the next turn asks {name}");
        }
        Some(_) => errln!("a model name is one word of printable ASCII"),
    }
}

fn sessions(chat: &Chat) {
    let Some(store) = &chat.kit.store else {
        errln!("sessions are not saved here (no store)");
        return;
    };
    let workspace = chat.kit.workspace.display().to_string();
    match super::session_pick::recent(store.as_ref(), &workspace) {
        Ok(list) => {
            for row in super::session_pick::rows(&list, Some(chat.session.id())) {
                errln!("{row}");
            }
            if list.len() > super::session_pick::SHOWN {
                errln!(
                    "… {} more (sandcrab sessions list --here)",
                    list.len() - super::session_pick::SHOWN
                );
            }
            errln!("/resume N (its number) or /resume ID (or the start of it) continues one");
        }
        Err(err) => errln!("cannot list sessions: {err}"),
    }
}

async fn resume(chat: &mut Chat, id: Option<String>, force: bool) {
    let Some(given) = id else {
        sessions(chat);
        return;
    };
    let Some(store) = &chat.kit.store else {
        errln!("sessions are not saved here (no store)");
        return;
    };
    let workspace = chat.kit.workspace.display().to_string();
    let id = match super::session_pick::chosen(store.as_ref(), &workspace, &given) {
        Ok(id) => id,
        Err(err) => {
            errln!("cannot resume: {err}");
            return;
        }
    };
    if id == chat.session.id() {
        errln!("this is session {id} already");
        return;
    }
    let running = chat.kit.jobs.registry.list(chat.session.id(), None).len();
    if running > 0 && !force {
        errln!(
            "not resumed: leaving this session cancels its {running} running background job{}; wait for them (/jobs), /cancel them, or `/resume {} force`",
            if running == 1 { "" } else { "s" },
            super::terminal::one_line(&id, 80)
        );
        return;
    }
    let next = match chat.kit.resume(&id).await {
        Ok(next) => next,
        Err(err) => {
            errln!(
                "cannot resume {}: {err}",
                super::terminal::one_line(&id, 80)
            );
            return;
        }
    };
    chat.renderer.flush().await;
    let previous = std::mem::replace(&mut chat.session, next);
    previous.abort().await;
    let drawing = Renderer::spawn(chat.session.events(), chat.json, chat.look);
    // Reports follow once something draws the new session's events.
    chat.shown.set(chat.session.clone());
    std::mem::replace(&mut chat.renderer, drawing)
        .finish()
        .await;
    errln!(
        "resumed session {id} ({}); the previous one is saved",
        super::terminal::count(chat.session.inputs() as u64, "turn")
    );
    let recap = super::view::recap::recap(&chat.session.history(), chat.look, chat.session.id());
    write_styled(&recap, Sink::Err);
}

/// The mode, the configured rules, and what was allowed in this
/// conversation.
fn approvals(chat: &Chat) {
    use super::terminal::one_line;
    let approvals = &chat.kit.config.approvals;
    errln!(
        "approvals: {} for calls no rule speaks to",
        approvals.mode.as_str()
    );
    let configured: Vec<_> = approvals.rules.iter().collect();
    let granted = chat.session.granted_rules();
    if configured.is_empty() && granted.is_empty() {
        errln!("no rules (answer s or a at an approval prompt to add one)");
    }
    for rule in configured {
        errln!(
            "  {:<5} {}  {}",
            rule.decision.as_str(),
            one_line(&rule.describe(), 200),
            one_line(&rule.applies_in(), 200)
        );
    }
    for rule in &granted {
        errln!(
            "  {:<5} {}  (this conversation)",
            rule.decision.as_str(),
            one_line(&rule.describe(), 200)
        );
    }
    errln!("(`sandcrab approvals list --all` and `revoke N` manage the saved rules)");
}

async fn list_plugins(chat: &Chat) {
    for plugin in chat.live.plugins().await {
        let tools: Vec<&str> = plugin.tools.iter().map(|t| t.name.as_str()).collect();
        errln!(
            "{} {} ({}, {}){}{}",
            plugin.name(),
            plugin.manifest.version,
            plugin.kind(),
            plugin.origin.label(),
            if tools.is_empty() { "" } else { ": " },
            tools.join(", ")
        );
    }
}

fn list_jobs(chat: &Chat, all: bool) {
    let jobs = chat.kit.jobs.registry.list(
        chat.session.id(),
        all.then_some(&crate::jobs::JobStatus::ALL[..]),
    );
    if jobs.is_empty() {
        errln!("no {}background jobs", if all { "" } else { "running " });
    }
    for job in jobs {
        errln!(
            "{}  {:<14} {:<12} started {}",
            job.job_id,
            job.status.as_str(),
            job.tool_name,
            job.started_at
        );
    }
}

fn cancel_job(chat: &Chat, job_id: &str) {
    match chat
        .kit
        .jobs
        .registry
        .cancel(chat.session.id(), job_id, crate::jobs::Actor::User)
    {
        Ok(record) => errln!("job {} is now {}", record.job_id, record.status.as_str()),
        Err(err) => errln!("cannot cancel: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_with_their_arguments_and_messages_are_not_commands() {
        assert_eq!(
            Command::parse("/undo"),
            Some(Command::Undo { force: false })
        );
        assert_eq!(
            Command::parse("/undo force"),
            Some(Command::Undo { force: true })
        );
        assert_eq!(Command::parse("/undo skip"), Some(Command::UndoSkip));
        assert!(matches!(
            Command::parse("/undo everything"),
            Some(Command::Unknown(_))
        ));
        assert_eq!(
            Command::parse("/model  gpt-x "),
            Some(Command::Model(Some("gpt-x".into())))
        );
        assert_eq!(
            Command::parse("/jobs all"),
            Some(Command::Jobs { all: true })
        );
        for (line, id, force) in [
            ("/resume abc", "abc", false),
            ("/resume abc  force", "abc", true),
            ("/resume abc\tforce ", "abc", true),
        ] {
            assert_eq!(
                Command::parse(line),
                Some(Command::Resume {
                    id: Some(id.into()),
                    force
                }),
                "{line}"
            );
        }
        assert!(matches!(
            Command::parse("/resume abc force extra"),
            Some(Command::Unknown(_))
        ));
        assert_eq!(
            Command::parse("/nope"),
            Some(Command::Unknown("/nope".into()))
        );
        assert_eq!(Command::parse("fix /etc/hosts"), None);
        assert_eq!(Command::parse("/path/to/file\nexplain it"), None);
        for name in COMMANDS {
            assert!(
                !matches!(Command::parse(name), Some(Command::Unknown(_))),
                "{name} completes but is unknown"
            );
        }
    }
}
