//! `sandcrab run PROMPT` and `sandcrab chat`.

use std::sync::{Arc, RwLock};

use clap::Args;

use super::setup::HostArgs;
use crate::agent::{AgentKit, AgentOptions, PluginReport, Session};
use crate::llm::ProviderKind;

/// The approvals mode of a command whose operator can answer (`chat`,
/// `serve`) when neither the flag nor the configuration names one.
pub const ASKING_DEFAULT: crate::approvals::Mode = crate::approvals::Mode::OnRisk;
/// The same for `run`, where nobody can answer.
pub const UNATTENDED_DEFAULT: crate::approvals::Mode = crate::approvals::Mode::Never;

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
    /// Most input and output tokens the session may spend, as the provider
    /// reports them (subagents' included); over `[budget]`.
    #[arg(long, value_name = "N")]
    pub max_tokens_total: Option<u64>,
    /// Most US dollars the session may spend: the provider's reported cost,
    /// else `[budget.prices]`; never guessed.
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<crate::config::budget::Dollars>,
    /// Most wall time the session may work (90s, 30m, 2h).
    #[arg(long, value_name = "TIME")]
    pub max_duration: Option<crate::config::budget::Span>,
    /// When to need the operator's approval for calls no rule speaks to:
    /// never, on-risk (shell commands) or always (default: the
    /// configuration's `[approvals] mode`, else on-risk for `chat` and
    /// `serve`, never for `run`). `chat` asks on the terminal, `serve`
    /// through the bridge; `run` has nobody to ask, so there a call that
    /// needs approval is refused with what would allow it.
    #[arg(long, value_name = "MODE")]
    pub approvals: Option<crate::approvals::Mode>,
    /// Allow calls matching RULE without asking (repeatable):
    /// `tool:NAME`, `shell:WORDS` (a command starting so), `command:WORDS`
    /// (exactly this command), `path:GLOB`; `net:` before one also gives
    /// its calls the network (`net:shell:npm install`).
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
    /// Continue the saved session ID, or the start of its id (without ID:
    /// chosen from this workspace's sessions on a terminal, else the most
    /// recent one); see `sandcrab sessions list`.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
}

impl AgentArgs {
    /// Load plugins and build the agent; with `defer`, third-party plugins
    /// that must be compiled first are left in `Setup::deferred`.
    pub(super) async fn kit(&self, defer: bool) -> anyhow::Result<(super::setup::Setup, AgentKit)> {
        self.kit_with(defer, false).await
    }

    /// Like `kit`; with `stub_ok`, a provider without a key is kept (every
    /// model call then fails with what to set) instead of refused.
    pub(super) async fn kit_with(
        &self,
        defer: bool,
        stub_ok: bool,
    ) -> anyhow::Result<(super::setup::Setup, AgentKit)> {
        // A session taken up again goes on with the provider and model it
        // was made with, unless the flags name others.
        // Only where the operator pinned no provider or address: a stored
        // session never moves a key to another endpoint.
        // The store is opened here only when a session is taken up again
        // (and used for it below); otherwise once the agent is built.
        let resuming = self.resume.is_some() || self.continue_last;
        let mut setup = self.host.setup_with(defer, !resuming).await?;
        let store = resuming.then(|| super::sessions_cmd::open_store(&setup.config));
        let pinned = setup.config.provider.is_some() || setup.config.base_url.is_some();
        let (stored_provider, stored_model) = match (self.provider, &store) {
            (None, Some(Ok(store))) if !pinned => self.stored_choice(&setup, store.as_ref()),
            _ => (None, None),
        };
        let options = AgentOptions {
            provider: self.provider.or(stored_provider),
            model: self.model.clone().or(stored_model),
            base_url: self.base_url.clone(),
            profile: self.profile.clone(),
            max_turns: self.max_turns,
            max_tool_rounds: self.max_tool_rounds,
            caps: crate::config::budget::CapsToml {
                max_tokens_total: self.max_tokens_total,
                max_cost: self.max_cost,
                max_duration: self.max_duration,
            }
            .caps(),
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
        let kit = kit.with_repo_facts(setup.repo_facts.take());
        let store = store.unwrap_or_else(|| super::sessions_cmd::open_store(&setup.config));
        let kit = match store {
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

    /// The provider and model of the saved session `--resume ID` or
    /// `--continue` names (the latest of this workspace for `--resume`
    /// alone), when there is one.
    fn stored_choice(
        &self,
        setup: &super::setup::Setup,
        store: &dyn crate::store::Store,
    ) -> (Option<ProviderKind>, Option<String>) {
        let id = match self.resume.as_deref() {
            Some(given) if !given.is_empty() => store.resolve_id(given).ok(),
            // A picker will ask which: nothing is known yet.
            Some(_) if !self.json && super::session_pick::will_ask() => None,
            _ => store
                .sessions(Some(&setup.workspace.display().to_string()))
                .ok()
                .and_then(|list| list.first().map(|s| s.id.clone())),
        };
        let Some(record) = id.and_then(|id| store.session(&id).ok().flatten()) else {
            return (None, None);
        };
        match record.provider.parse::<ProviderKind>() {
            Ok(kind) => (Some(kind), Some(record.model).filter(|m| !m.is_empty())),
            Err(_) => (None, None),
        }
    }

    /// A new session, or the saved one `--resume`/`--continue` names
    /// (`--resume` alone: chosen from a list on a terminal).
    pub(super) async fn session(&self, kit: &AgentKit) -> anyhow::Result<Arc<Session>> {
        let workspace = kit.workspace.display().to_string();
        let none_here = || {
            anyhow::anyhow!(
                "no saved session in {} to continue (see `sandcrab sessions list`)",
                kit.workspace.display()
            )
        };
        let id = match (&self.resume, self.continue_last, &kit.store) {
            (None, false, _) => return Ok(kit.session().await),
            (Some(given), _, Some(store)) if !given.is_empty() => store
                .resolve_id(given)
                .map_err(|err| not_a_session(err, given))?,
            (Some(given), _, None) if !given.is_empty() => given.clone(),
            (Some(_), _, Some(store)) if !self.json => {
                super::session_pick::pick(store.as_ref(), &workspace)?.ok_or_else(none_here)?
            }
            _ => kit.latest_session()?.ok_or_else(none_here)?,
        };
        let session = kit.resume(&id).await?;
        errln!(
            "resumed session {} ({})",
            session.id(),
            super::terminal::count(session.inputs() as u64, "turn")
        );
        Ok(session)
    }
}

/// A `--resume` value that names no session; one with spaces was most
/// likely the prompt, taken as the id.
fn not_a_session(err: crate::store::StoreError, given: &str) -> anyhow::Error {
    if given.contains(char::is_whitespace) {
        anyhow::anyhow!(
            "'{}' is not a saved session: `--resume` took the prompt as its id. Give the id first (`--resume ID \"…\"`), or `--continue \"…\"` for this workspace's latest",
            super::terminal::one_line(given, 60)
        )
    } else {
        err.into()
    }
}

/// Repeat what setup warned about (already on stderr) as WARNING events,
/// so `--json` consumers see it too.
pub(super) fn warn_session(setup: &super::setup::Setup, kit: &AgentKit, session: &Session) {
    for warning in setup.warnings.iter().chain(&kit.warnings) {
        session.warn(warning);
    }
    for d in setup.host.diagnostics() {
        session.warn(&d.message);
    }
}

/// The session the terminal shows. `/resume` swaps it, and what the
/// plugin watcher reports follows it, instead of going to a session that
/// was left and whose events nobody draws any more.
#[derive(Clone)]
pub(super) struct ShownSession(Arc<RwLock<Arc<Session>>>);

impl ShownSession {
    pub(super) fn new(session: Arc<Session>) -> Self {
        Self(Arc::new(RwLock::new(session)))
    }

    /// The session shown now.
    pub(super) fn get(&self) -> Arc<Session> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Show `session` from now on.
    pub(super) fn set(&self, session: Arc<Session>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = session;
    }
}

/// Where plugin reports go: what went well to the terminal; what a plugin
/// lost or why it was refused as WARNING events of the session shown, so a
/// `--json` reader sees them too (and the terminal shows them once, as
/// warnings).
pub(super) fn reporter(shown: ShownSession) -> impl Fn(PluginReport) + Send + Sync + 'static {
    move |report: PluginReport| match report {
        failed @ PluginReport::Failed { .. } => shown.get().warn(&failed.to_string()),
        report => {
            let (headline, notes) = report.split_notes();
            let session = shown.get();
            session.notice(&format!("plugins: {headline}"));
            for note in &notes {
                session.warn(note);
            }
        }
    }
}
