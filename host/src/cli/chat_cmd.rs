//! `sandcrab chat`: the interactive session. The line editor reads
//! ([`super::line_input`]), the renderer draws ([`super::render`]), slash
//! commands act on the session ([`super::chat_commands`]); a turn is drawn
//! whole before the next prompt, and a status line follows each turn.

use std::process::ExitCode;

use super::agent_cmd::{AgentArgs, ShownSession, reporter, warn_session};
use super::chat_commands::{COMMANDS, Command};
use super::chat_state::Chat;
use super::line_input::{Line, LineInput};
use super::render::Renderer;
use super::view::style::{Look, Style, Styled};
use crate::agent::{LivePlugins, SessionError, SessionState};
use crate::plugin::watch::PluginWatcher;

/// How often `chat` looks at the plugin folders.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);
/// How long a call waits for the operator's answer in `chat`.
const CHAT_APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// An interactive session.
pub async fn chat(mut args: AgentArgs, watch_plugins: bool) -> anyhow::Result<ExitCode> {
    args.default_approvals = super::agent_cmd::ASKING_DEFAULT;
    // Ctrl-C is ours from the first instant: while plugins load and MCP
    // servers start, it quits cleanly (what was typed stays in the
    // terminal for the first prompt otherwise).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let (setup, mut kit) = tokio::select! {
        built = args.kit_with(true, false) => built?,
        _ = interrupt.recv() => {
            errln!("\nsandcrab: interrupted while starting; nothing was sent");
            return Ok(ExitCode::from(130));
        }
    };
    drop(interrupt);
    // Calls that need the operator wait for the terminal's answer.
    let asks = crate::approvals::PermissionQueue::new(CHAT_APPROVAL_TIMEOUT);
    kit.ask_through(asks.clone());
    let session = args.session(&kit).await?;
    warn_session(&setup, &kit, &session);
    let live = LivePlugins::new(
        setup.host,
        kit.tools.clone(),
        kit.profile.clone(),
        kit.config.tools.clone(),
    );
    live.keep_tools(kit.mcp_tools.clone());
    let shown = ShownSession::new(session.clone());
    let deferred = live.load_deferred(setup.deferred, reporter(shown.clone()));
    let watching = watch_plugins.then(|| {
        live.watch(
            PluginWatcher::new(setup.roots),
            WATCH_INTERVAL,
            reporter(shown.clone()),
        )
    });
    let look = Look::detect(args.json);
    let mut banner = Styled::new(look.color);
    banner
        .styled(Style::BoldCyan, "sandcrab chat")
        .text(&format!(
            " — {} / {} in {}\n",
            kit.provider,
            kit.config.model,
            setup.workspace.display()
        ))
        .styled(
            Style::Dim,
            "Type a message (@path attaches a file; Alt-Enter or a line ending in \\ for a new line). /help lists commands, /exit quits, Ctrl-C interrupts a turn.\n",
        );
    super::terminal::write_styled(&banner, super::terminal::Sink::Err);
    // A conversation taken up again shows where it stood.
    if !args.json {
        let recap = super::view::recap::recap(&session.history(), look, session.id());
        super::terminal::write_styled(&recap, super::terminal::Sink::Err);
    }
    let renderer = Renderer::spawn(session.events(), args.json, look);
    let input = LineInput::open(&setup.workspace, COMMANDS);
    let signals = tokio::spawn(super::tty_mode::restore_on_signals());
    let mut chat = Chat {
        kit,
        session,
        shown,
        renderer,
        input,
        asks,
        live,
        look,
        json: args.json,
    };
    let result = chat.run().await;
    signals.abort();
    deferred.abort();
    if let Some(watching) = watching {
        watching.abort();
    }
    let closed_by_error = chat.session.state() == SessionState::Closed;
    // The operator left: the conversation is complete as it stands.
    chat.session.end(crate::agent::EndReason::Completed).await;
    chat.renderer.finish().await;
    result?;
    Ok(if closed_by_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

impl Chat {
    /// Read and act until the operator quits or the session closes.
    async fn run(&mut self) -> anyhow::Result<()> {
        let mut waiting = self.asks.waiting();
        let mut prompt_open = false;
        // Requests shown above the prompt, answered once it is sent.
        let mut announced = std::collections::HashSet::new();
        // Turns the session processed without the operator sending (a
        // finished job woke it) get their status line above the prompt.
        let mut turns = self.renderer.turns_ended();
        loop {
            if !prompt_open {
                // The last turn is drawn whole before the next prompt;
                // while the operator types, what the session shows (a job's
                // notice, a turn it woke) goes above the prompt.
                self.renderer
                    .prompt_open(self.input.while_prompting())
                    .await;
                prompt_open = true;
                // Every turn so far is drawn, with its status line.
                turns.borrow_and_update();
            }
            // A read interrupted by the wake-up below goes on with the
            // prompt it showed; one that never started shows this one.
            let line = tokio::select! {
                line = self.input.read("> ") => line,
                // Between turns, a background job, a turn it woke or a
                // subagent may ask. The request is shown, never answered
                // by a line typed before it was there: it is asked once
                // the operator sends what is at the prompt.
                Ok(()) = waiting.changed() => {
                    let pending = self.asks.pending();
                    announced.retain(|id| pending.iter().any(|r| &r.id == id));
                    for request in pending {
                        if announced.insert(request.id.clone()) {
                            super::approval_prompt::announce(&request, &self.input, self.session.workspace());
                        }
                    }
                    continue;
                }
                Ok(()) = turns.changed() => {
                    if let Some(line) = self.status() {
                        self.input.print_above(&line);
                    }
                    continue;
                }
            };
            self.renderer.prompt_closed().await;
            prompt_open = false;
            let line = line?;
            let quits = match &line {
                Line::End => true,
                Line::Text(text) => Command::parse(text) == Some(Command::Exit),
                Line::Interrupted => false,
            };
            if quits {
                // A waiting call is not asked about: it ends with the
                // session.
                return Ok(());
            }
            if !self.asks.pending().is_empty() {
                let _held = self.renderer.hold().await;
                super::approval_prompt::answer_waiting(
                    &self.asks,
                    &mut self.input,
                    self.session.workspace(),
                )
                .await;
            }
            let text = match line {
                Line::End => return Ok(()),
                Line::Interrupted => {
                    errln!("(Ctrl-C: type /exit or press Ctrl-D to quit)");
                    continue;
                }
                Line::Text(text) => text,
            };
            let input = text.trim();
            if input.is_empty() {
                continue;
            }
            let failed = match Command::parse(input) {
                Some(Command::Exit) => return Ok(()),
                Some(Command::Retry) => {
                    let session = self.session.clone();
                    self.interruptible(session.retry()).await
                }
                Some(Command::Prompt(command)) => {
                    match self.kit.mcp.render_prompt(&command).await {
                        Some(Ok(message)) => self.send(&message).await,
                        Some(Err(e)) => {
                            errln!("{}", super::terminal::sanitize(&e.to_string()));
                            None
                        }
                        None => {
                            let name = command.split_whitespace().next().unwrap_or_default();
                            errln!(
                                "unknown command {}; /help lists them",
                                super::terminal::one_line(name, 60)
                            );
                            None
                        }
                    }
                }
                Some(command) => {
                    super::chat_commands::run(self, command).await;
                    None
                }
                None => {
                    let (message, notes) = super::mentions::attach(&text, self.session.workspace());
                    for note in notes {
                        errln!("{note}");
                    }
                    self.send(&message).await
                }
            };
            if let Some(failed) = failed {
                self.renderer.flush().await;
                if let Some(reason) = failed.unshown {
                    errln!("sandcrab: {}", super::terminal::sanitize(&reason));
                }
                if self.session.state() == SessionState::Closed {
                    return Ok(());
                }
            }
        }
    }

    /// Send `message` as the operator's turn; the failure, if any. A turn
    /// a spend cap stopped asks whether to raise it, and goes on if so.
    async fn send(&mut self, message: &str) -> Option<Failed> {
        let session = self.session.clone();
        let mut failed = self.interruptible(session.submit(message)).await;
        self.renderer.flush().await;
        while failed.is_none()
            && !self.json
            && let Some(reached) = session.spend_stopped()
        {
            let _held = self.renderer.hold().await;
            if !super::spend_prompt::ask_to_raise(&session, &reached, &mut self.input).await {
                break;
            }
            drop(_held);
            failed = self.interruptible(session.retry()).await;
            self.renderer.flush().await;
        }
        self.status_line();
        failed
    }

    /// Drive `work`, turning Ctrl-C into an interrupt of the session and
    /// asking the operator about every call that waits for approval; the
    /// failure, if any.
    async fn interruptible(
        &mut self,
        work: impl std::future::Future<Output = Result<(), SessionError>>,
    ) -> Option<Failed> {
        tokio::pin!(work);
        let _quiet = self.input.quiet();
        // One listener for the whole turn: a Ctrl-C that comes while the
        // loop goes round (an approval asked and answered) is not lost.
        let mut sigint =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        let mut waiting = self.asks.waiting();
        // A request already waiting (a background job asked between turns)
        // is asked about first.
        waiting.mark_changed();
        loop {
            tokio::select! {
                Ok(()) = waiting.changed() => {
                    if self.asks.pending().is_empty() {
                        continue;
                    }
                    // The turn goes on while the operator reads: a parallel
                    // call may finish, another may ask (asked in order). What
                    // the turn showed so far is drawn first; what it shows
                    // meanwhile waits until the answer (nothing draws over
                    // the prompt).
                    let _held = self.renderer.hold().await;
                    let workspace = self.session.workspace().to_path_buf();
                    let answering = super::approval_prompt::answer_waiting(&self.asks, &mut self.input, &workspace);
                    tokio::pin!(answering);
                    tokio::select! {
                        () = &mut answering => {}
                        result = &mut work => {
                            return failure(result);
                        }
                    }
                }
                result = &mut work => {
                    return failure(result);
                }
                _ = async {
                    match sigint.as_mut() {
                        Some(sigint) => {
                            sigint.recv().await;
                        }
                        None => {
                            let _ = tokio::signal::ctrl_c().await;
                        }
                    }
                } => {
                    self.session.interrupt();
                    // Printed between the renderer's lines, not under a
                    // live block that would erase it.
                    let _held = self.renderer.hold().await;
                    errln!("(interrupted)");
                }
            }
        }
    }
}

/// A turn that failed.
struct Failed {
    /// Why, when the session did not show it already (a model error is
    /// an ERROR event, drawn once).
    unshown: Option<String>,
}

/// Whether a turn failed, and why.
fn failure(result: Result<(), SessionError>) -> Option<Failed> {
    let unshown = match result {
        Ok(()) => return None,
        Err(SessionError::Llm(_)) => None,
        Err(SessionError::Closed) => Some("the session is closed".into()),
        Err(err) => Some(err.to_string()),
    };
    Some(Failed { unshown })
}
