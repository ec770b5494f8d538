//! `sandcrab run PROMPT` and `sandcrab chat`.

use std::process::ExitCode;

use clap::Args;
use tokio::io::AsyncBufReadExt;

use super::render::Renderer;
use super::setup::HostArgs;
use crate::agent::{
    AgentKit, AgentOptions, LivePlugins, PluginReport, Session, SessionError, SessionState,
};
use crate::llm::ProviderKind;
use crate::plugin::watch::PluginWatcher;

/// Options shared by `run` and `chat`.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// LLM provider: anthropic, openai, gemini or openai-compatible.
    #[arg(long)]
    pub provider: Option<ProviderKind>,
    /// Model name (default: the profile's).
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Provider profile (default: the provider's).
    #[arg(long)]
    pub profile: Option<String>,
    /// Most model turns for the session (0 = unlimited).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Most tool rounds per input (0 = unlimited).
    #[arg(long, value_name = "N")]
    pub max_tool_rounds: Option<u32>,
    /// When to need the operator's approval for calls no rule speaks to:
    /// never, on-risk (shell commands) or always (default: the
    /// configuration's `[approvals] mode`, else on-risk for `chat` and
    /// `serve`, never for `run`). `chat` asks on the terminal, `serve`
    /// through the bridge; `run` has nobody to ask, so there a call that
    /// needs approval is refused with what would allow it.
    #[arg(long, value_name = "MODE")]
    pub approvals: Option<crate::approvals::Mode>,
    /// Allow calls matching RULE without asking: `shell:git push`,
    /// `path:src/**` or `tool:NAME` (repeatable).
    #[arg(long = "approve", value_name = "RULE")]
    pub approve: Vec<String>,
    /// The approvals mode when neither the flag nor the configuration
    /// names one (the command's default).
    #[arg(skip)]
    pub default_approvals: crate::approvals::Mode,
    /// Print every event as one JSON object per line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Continue this workspace's most recent saved session.
    #[arg(long = "continue", conflicts_with = "resume")]
    pub continue_last: bool,
    /// Continue the saved session ID (without ID: the most recent one in
    /// this workspace); see `sandcrab sessions list`.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
}

impl AgentArgs {
    /// Load plugins and build the agent; with `defer`, third-party plugins
    /// that must be compiled first are left in `Setup::deferred`.
    async fn kit(&self, defer: bool) -> anyhow::Result<(super::setup::Setup, AgentKit)> {
        self.kit_with(defer, false).await
    }

    /// Like `kit`; with `stub_ok`, a provider without a key is kept (every
    /// model call then fails with what to set) instead of refused.
    pub(super) async fn kit_with(
        &self,
        defer: bool,
        stub_ok: bool,
    ) -> anyhow::Result<(super::setup::Setup, AgentKit)> {
        let setup = if defer {
            self.host.setup_deferring().await?
        } else {
            self.host.setup().await?
        };
        let options = AgentOptions {
            provider: self.provider,
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            profile: self.profile.clone(),
            max_turns: self.max_turns,
            max_tool_rounds: self.max_tool_rounds,
            approvals: self.approvals,
            approve: self.approve.clone(),
            default_approvals: self.default_approvals,
        };
        let kit = AgentKit::build(&setup.host, &setup.config, &options, |k| {
            std::env::var(k).ok()
        })
        .await;
        let kit = match kit {
            Ok(kit) if kit.configured || stub_ok => kit,
            Ok(kit) => {
                setup.print_warnings();
                anyhow::bail!("{}", kit.unconfigured_reason);
            }
            Err(err) => {
                setup.print_warnings();
                return Err(err.into());
            }
        };
        let kit = match super::sessions_cmd::open_store(&setup.config) {
            Ok(store) => kit.with_store(store),
            Err(err) => {
                errln!(
                    "warning: sessions are not saved: {}",
                    super::terminal::sanitize(&err.to_string())
                );
                kit
            }
        };
        Ok((setup, kit))
    }

    /// A new session, or the saved one `--resume`/`--continue` names.
    async fn session(&self, kit: &AgentKit) -> anyhow::Result<std::sync::Arc<Session>> {
        let id = match (&self.resume, self.continue_last) {
            (Some(id), _) if !id.is_empty() => id.clone(),
            (Some(_), _) | (None, true) => kit.latest_session()?.ok_or_else(|| {
                anyhow::anyhow!(
                    "no saved session in {} to continue (see `sandcrab sessions list --all`)",
                    kit.workspace.display()
                )
            })?,
            (None, false) => return Ok(kit.session().await),
        };
        let session = kit.resume(&id).await?;
        errln!("resumed session {id} ({} turns)", session.history().len());
        Ok(session)
    }
}

/// Run one input to completion.
pub async fn run(args: AgentArgs, prompt: String, wait_jobs: u64) -> anyhow::Result<ExitCode> {
    let (setup, kit) = args.kit(false).await?;
    let session = args.session(&kit).await?;
    warn_session(&setup, &kit, &session);
    let renderer = Renderer::spawn(session.events(), args.json);
    let mut result = session.submit(&prompt).await;
    // Background jobs still running: wait for them (each that finishes
    // gives the agent a turn to react), at most `wait_jobs` seconds.
    if result.is_ok() {
        match session
            .settle(std::time::Duration::from_secs(wait_jobs))
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                let cancelled = session.cancel_jobs();
                session.warn(&format!(
                    "{} background job(s) still running after {wait_jobs} s were cancelled: {} (raise --wait-jobs to wait longer)",
                    cancelled.len(),
                    cancelled.join(", ")
                ));
            }
            Err(err) => result = Err(err),
        }
    }
    session.abort().await;
    renderer.finish().await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            errln!("sandcrab: {}", super::terminal::sanitize(&err.to_string()));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// An interactive session.
pub async fn chat(mut args: AgentArgs, watch_plugins: bool) -> anyhow::Result<ExitCode> {
    args.default_approvals = crate::approvals::Mode::OnRisk;
    // Ctrl-C is ours from the first instant: while plugins load and MCP
    // servers start, it quits cleanly (what was typed stays in the
    // terminal for the first prompt otherwise).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let (setup, mut kit) = tokio::select! {
        built = args.kit(true) => built?,
        _ = interrupt.recv() => {
            errln!("\nsandcrab: interrupted while starting; nothing was sent");
            return Ok(ExitCode::from(130));
        }
    };
    drop(interrupt);
    // Calls that need the operator wait for the terminal's answer.
    let asks = crate::approvals::PermissionQueue::new(CHAT_APPROVAL_TIMEOUT);
    kit.config.asker = Some(asks.clone());
    let session = args.session(&kit).await?;
    warn_session(&setup, &kit, &session);
    let live = LivePlugins::new(
        setup.host,
        kit.tools.clone(),
        kit.profile.clone(),
        kit.config.tools.clone(),
    );
    live.keep_tools(kit.mcp_tools.clone());
    let deferred = live.load_deferred(setup.deferred, reporter(session.clone()));
    let watching = watch_plugins.then(|| {
        live.watch(
            PluginWatcher::new(setup.roots),
            WATCH_INTERVAL,
            reporter(session.clone()),
        )
    });
    errln!(
        "sandcrab chat — {} / {} in {}\nType a message; /exit quits, Ctrl-C interrupts the current turn, /retry asks again after an error.",
        kit.provider,
        kit.config.model,
        setup.workspace.display()
    );
    let renderer = Renderer::spawn(session.events(), args.json);
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut waiting = asks.waiting();
    let mut show_prompt = true;
    loop {
        if show_prompt {
            // The last turn is drawn whole before the next prompt.
            renderer.flush().await;
            err!("> ");
        }
        show_prompt = true;
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = tokio::signal::ctrl_c() => {
                errln!("\n(type /exit to quit)");
                continue;
            }
            // Between turns, a background job or subagent may ask.
            Ok(()) = waiting.changed() => {
                if asks.pending().is_empty() {
                    show_prompt = false;
                } else {
                    renderer.flush().await;
                    super::approval_prompt::answer_waiting(&asks, &mut lines, session.workspace()).await;
                }
                continue;
            }
        };
        let Some(line) = line else { break };
        let input = line.trim();
        match input {
            "" => continue,
            "/exit" | "/quit" => break,
            "/retry" => {
                if let Some(reason) = retry(&session, &asks, &mut lines, &renderer).await {
                    renderer.flush().await;
                    errln!("sandcrab: {}", super::terminal::sanitize(&reason));
                    if session.state() == SessionState::Closed {
                        break;
                    }
                }
                continue;
            }
            "/compact" => {
                session.compact_on_request().await;
                continue;
            }
            "/plugins" => {
                list_plugins(&live).await;
                continue;
            }
            "/jobs" | "/jobs all" => {
                list_jobs(&kit, &session, input == "/jobs all");
                continue;
            }
            _ if input.starts_with("/cancel") => {
                cancel_job(&kit, &session, input.trim_start_matches("/cancel").trim());
                continue;
            }
            _ => {}
        }
        if let Some(reason) = turn(&session, input, &asks, &mut lines, &renderer).await {
            renderer.flush().await;
            errln!("sandcrab: {}", super::terminal::sanitize(&reason));
            if session.state() == SessionState::Closed {
                break;
            }
        }
    }
    let closed_by_error = session.state() == SessionState::Closed;
    deferred.abort();
    if let Some(watching) = watching {
        watching.abort();
    }
    session.abort().await;
    renderer.finish().await;
    Ok(if closed_by_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// How often `chat` looks at the plugin folders.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// `/plugins`: what is loaded now.
async fn list_plugins(live: &LivePlugins) {
    for plugin in live.plugins().await {
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

/// Repeat what setup warned about (already on stderr) as WARNING events,
/// so `--json` consumers see it too.
fn warn_session(setup: &super::setup::Setup, kit: &AgentKit, session: &Session) {
    for warning in setup.warnings.iter().chain(&kit.warnings) {
        session.warn(warning);
    }
    for d in setup.host.diagnostics() {
        session.warn(&d.message);
    }
}

/// Where plugin reports go: what went well to the terminal; what a plugin
/// lost or why it was refused as WARNING events of the session, so a
/// `--json` reader sees them too (and the terminal shows them once, as
/// warnings).
fn reporter(session: std::sync::Arc<Session>) -> impl Fn(PluginReport) + Send + Sync + 'static {
    move |report: PluginReport| match report {
        failed @ PluginReport::Failed { .. } => session.warn(&failed.to_string()),
        report => {
            let (headline, notes) = report.split_notes();
            errln!("plugins: {headline}");
            for note in &notes {
                session.warn(note);
            }
        }
    }
}

/// How long a call waits for the operator's answer in `chat`.
const CHAT_APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// The terminal's input lines.
type Input = tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>;

/// Process one chat input; Ctrl-C interrupts it, approvals are asked on
/// the terminal. Returns an error reason.
async fn turn(
    session: &std::sync::Arc<Session>,
    input: &str,
    asks: &std::sync::Arc<crate::approvals::PermissionQueue>,
    lines: &mut Input,
    renderer: &Renderer,
) -> Option<String> {
    interruptible(session, session.submit(input), asks, lines, renderer).await
}

/// Ask the model again after an error; like [`turn`].
async fn retry(
    session: &std::sync::Arc<Session>,
    asks: &std::sync::Arc<crate::approvals::PermissionQueue>,
    lines: &mut Input,
    renderer: &Renderer,
) -> Option<String> {
    interruptible(session, session.retry(), asks, lines, renderer).await
}

/// Drive `work`, turning Ctrl-C into an interrupt of the session and
/// asking the operator about every call that waits for approval; the
/// error reason, if any.
async fn interruptible(
    session: &std::sync::Arc<Session>,
    work: impl std::future::Future<Output = Result<(), SessionError>>,
    asks: &std::sync::Arc<crate::approvals::PermissionQueue>,
    lines: &mut Input,
    renderer: &Renderer,
) -> Option<String> {
    tokio::pin!(work);
    let mut waiting = asks.waiting();
    // A request already waiting (a background job asked between turns)
    // is asked about first.
    waiting.mark_changed();
    loop {
        tokio::select! {
            Ok(()) = waiting.changed() => {
                // The turn goes on while the operator reads: a parallel
                // call may finish, another may ask (asked in order). What
                // the turn showed so far is drawn first.
                renderer.flush().await;
                let answering = super::approval_prompt::answer_waiting(asks, lines, session.workspace());
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
            _ = tokio::signal::ctrl_c() => {
                errln!("\n(interrupted)");
                session.interrupt();
            }
        }
    }
}

/// Why a turn failed, if it did.
fn failure(result: Result<(), SessionError>) -> Option<String> {
    match result {
        Ok(()) => None,
        Err(SessionError::Closed) => Some("the session is closed".into()),
        Err(err) => Some(err.to_string()),
    }
}

fn list_jobs(kit: &AgentKit, session: &Session, all: bool) {
    let jobs = kit.jobs.registry.list(
        session.id(),
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

fn cancel_job(kit: &AgentKit, session: &Session, job_id: &str) {
    match kit
        .jobs
        .registry
        .cancel(session.id(), job_id, crate::jobs::Actor::User)
    {
        Ok(record) => errln!("job {} is now {}", record.job_id, record.status.as_str()),
        Err(err) => errln!("cannot cancel: {err}"),
    }
}
