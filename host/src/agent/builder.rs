//! Putting an agent together from the loaded plugins, the configuration and
//! command-line choices: provider, profile, model, client, tools, limits.

use std::path::PathBuf;
use std::sync::Arc;

use super::config::SessionConfig;
use super::profile::Profile;
use super::session::{Session, SessionJobs, SessionParts};
use super::window::{Told, Window, WindowSource};
use crate::config::Config;
use crate::jobs::{BackgroundSettings, JobRegistry};
use crate::llm::{LlmClient, ProviderConfig, ProviderKind, client_for};
use crate::plugin::PluginHost;
use crate::tools::{ToolCatalog, ToolRegistry};

/// Choices that override the configuration file.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    pub provider: Option<ProviderKind>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub profile: Option<String>,
    pub max_turns: Option<u32>,
    pub max_tool_rounds: Option<u32>,
    /// `--max-tokens-total`, `--max-cost`, `--max-duration`: over
    /// `[budget]`'s caps.
    pub caps: crate::llm::spend::Caps,
    /// The approvals mode (default: the configuration's, else `never`).
    pub approvals: Option<crate::approvals::Mode>,
    /// `--approve` rules (`shell:git push`, `path:src/**`, …).
    pub approve: Vec<String>,
    /// The mode when neither `approvals` nor the configuration names one.
    pub default_approvals: crate::approvals::Mode,
}

pub use super::build_error::BuildError;

/// Everything needed to start sessions.
pub struct AgentKit {
    pub provider: ProviderKind,
    pub client: Arc<dyn LlmClient>,
    /// False when no key is set and every call will fail with a
    /// configuration error.
    pub configured: bool,
    /// The message to show when not configured.
    pub unconfigured_reason: String,
    pub profile: Arc<Profile>,
    /// The plugin and MCP tools offered (replaced when plugins reload).
    pub tools: ToolCatalog,
    /// The configured MCP servers (their programs stop when the last
    /// holder drops them).
    pub mcp: crate::mcp::McpServers,
    /// The tools that are not plugins' — the MCP servers' and the `skill`
    /// tool — kept when plugins reload.
    pub mcp_tools: ToolRegistry,
    /// Things about the tool choice the operator should know.
    pub warnings: Vec<String>,
    pub config: SessionConfig,
    pub workspace: PathBuf,
    /// Background jobs of every session this kit starts.
    pub jobs: SessionJobs,
    /// Summarizes for compaction (`[summarization]`).
    pub summarizer: Arc<dyn crate::compaction::Summarizer>,
    pub summarization: crate::compaction::SummarizationConfig,
    /// Where sessions are kept (None: in memory only); see
    /// [`AgentKit::with_store`].
    pub store: Option<Arc<dyn crate::store::Store>>,
    /// How stored sessions are recorded (`[store] recording`).
    pub recording: super::recorder::RecordingSettings,
    /// The embedding endpoint of `[embeddings]` (none: memory is searched
    /// by words alone).
    pub embedder: Option<crate::embeddings::Embedder>,
    /// The workspace's protected paths (`/undo` never writes them).
    pub protected: crate::kept::Protected,
    /// The model's window, shared by the sessions this kit starts.
    pub window: Arc<Window>,
    /// The workspace's repository facts, read while the host set up, for
    /// the first session ([`AgentKit::with_repo_facts`]).
    repo_prefetch: std::sync::Mutex<Option<super::repo_facts::Prefetched>>,
}

impl AgentKit {
    /// The operator answers through `queue`: the calls the approval rules
    /// ask about, and the questions of the MCP servers.
    pub fn ask_through(&mut self, queue: std::sync::Arc<crate::approvals::PermissionQueue>) {
        self.mcp.ask_through(queue.clone());
        self.config.asker = Some(queue);
    }

    /// Resolve provider (flag, config, the first key set, anthropic),
    /// profile (flag, provider), model (flag, config, profile default).
    pub async fn build(
        host: &PluginHost,
        config: &Config,
        options: &AgentOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AgentKit, BuildError> {
        let (provider, profile_id) = resolve_provider(config, options, &env)?;
        let mut profile = Profile::load(host, &profile_id).await?;
        let per_provider = config
            .providers
            .get(provider.id())
            .cloned()
            .unwrap_or_default();
        let base_url = options
            .base_url
            .clone()
            .or(per_provider.base_url)
            .or_else(|| config.base_url.clone());
        let mut provider_config = ProviderConfig::from_env(provider, base_url.as_deref(), &env);
        let llm = &config.llm;
        let ms = std::time::Duration::from_millis;
        if let Some(v) = llm.connect_timeout_ms {
            provider_config.connect_timeout = ms(v);
        }
        if let Some(v) = per_provider
            .first_byte_timeout_ms
            .or(llm.first_byte_timeout_ms)
        {
            provider_config.first_byte_timeout = ms(v);
        }
        if let Some(v) = per_provider.read_timeout_ms.or(llm.read_timeout_ms) {
            provider_config.read_timeout = ms(v);
        }
        if let Some(n) = llm.max_retries {
            provider_config.retry.max_retries = n;
        }
        provider_config.proxy = llm.proxy.clone();
        provider_config
            .check_key_transport()
            .map_err(BuildError::Config)?;
        let configured = !provider.requires_key() || provider_config.api_key.is_some();
        // Nobody chose a provider and no key is set: every way in, named.
        let chosen = options.provider.is_some() || config.provider.is_some();
        let unconfigured_reason = if chosen {
            format!(
                "LLM provider not configured: set {} (or choose another provider with --provider)",
                provider.key_vars().join(" or ")
            )
        } else {
            "no LLM provider configured: set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY, or use a local model with `--provider openai-compatible --base-url http://127.0.0.1:11434 --model NAME` (see docs/local-models.md)".to_string()
        };
        let named_model = options
            .model
            .clone()
            .or(per_provider.model.clone())
            .or_else(|| config.model.clone())
            .or_else(|| Some(profile.info.default_model.clone()).filter(|m| !m.is_empty()));
        let mut told_window = per_provider.context_window.map(|tokens| Told {
            tokens,
            source: WindowSource::Configured,
        });
        let (model, served) = if provider == ProviderKind::OpenAiCompatible {
            // Ask the local server what it serves and with how much context
            // (nothing when the operator said both).
            let server = match (&named_model, per_provider.context_window) {
                (Some(_), Some(_)) => Default::default(),
                _ => super::server_facts::described(&provider_config, named_model.as_deref()).await,
            };
            told_window = told_window.or(server.context_window.map(|tokens| Told {
                tokens,
                source: WindowSource::Server,
            }));
            let picked = named_model
                .or_else(|| (server.models.len() == 1).then(|| server.models[0].clone()));
            (picked, Some(server.models))
        } else {
            if provider == ProviderKind::Gemini
                && told_window.is_none()
                && let Some(model) = &named_model
            {
                // Gemini's model metadata says the window.
                told_window = super::server_facts::described(&provider_config, Some(model))
                    .await
                    .context_window
                    .map(|tokens| Told {
                        tokens,
                        source: WindowSource::Server,
                    });
            }
            (named_model, None)
        };
        let model = model.ok_or_else(|| {
            BuildError::Config(format!(
                "no model named for provider {provider}: pass --model or set [providers.{provider}] model in your configuration (profile '{}' has no default model){}",
                profile.info.id,
                served_models_hint(&provider_config, served.as_deref())
            ))
        })?;
        let window = Arc::new(model_window(
            &mut profile,
            told_window,
            &model,
            &provider_config.root(),
        ));
        let profile = Arc::new(profile);
        let still_waiting_every = provider_config.read_timeout;
        let client = client_for(provider_config);
        let mut session_config = SessionConfig::new(model);
        session_config.still_waiting_every = still_waiting_every;
        session_config.max_tokens = per_provider
            .max_tokens
            .or(Some(profile.info.max_output_tokens).filter(|n| *n > 0));
        session_config.apply(&config.agent);
        let mut rules = config.approvals.parsed.clone();
        rules.extend(
            crate::approvals::rules_from_flags(&options.approve)
                .map_err(|e| BuildError::Config(e.to_string()))?,
        );
        session_config.approvals = crate::approvals::Approvals {
            rules,
            mode: options
                .approvals
                .unwrap_or_else(|| config.approvals.mode_or(options.default_approvals)),
        };
        session_config.remember_in = config.approvals.remember_in.clone();
        session_config.truncation = config.truncation_policy();
        if let Some(n) = options.max_turns {
            session_config.max_turns = n;
        }
        if let Some(n) = options.max_tool_rounds {
            session_config.max_tool_rounds_per_input = n;
        }
        session_config.budget = config.budget.resolve(&options.caps);
        let (hooks, hook_warnings) = crate::hooks::Hooks::load(
            &config.hooks,
            config.project_hooks.as_ref(),
            &config.consented,
            host.sandbox_context(),
        );
        session_config.hooks = hooks;
        session_config.docs = crate::consent::DocsConsent {
            trusted: config
                .project_trusted
                .then(|| host.sandbox_context().workspace.clone()),
            records: config.consented.clone(),
        };
        let mcp = crate::mcp::McpServers::new(&config.mcp.servers, host.sandbox_context());
        // A server the operator allows sampling asks the session's model.
        mcp.sample_with(client.clone(), &session_config.model);
        let mut mcp_tools = ToolRegistry::new();
        let mcp_warnings = mcp
            .register_tools(&mut mcp_tools, |server, tool| {
                session_config.tools.admits(tool, Some(server))
            })
            .await;
        // Skills, pinned by content: the `skill` tool is kept beside the
        // MCP tools, so a plugin reload keeps it too.
        let places = crate::skills::SkillPlaces::of(
            &host.sandbox_context().workspace,
            config.project_trusted,
        );
        let (skills, skill_warnings) = crate::skills::found(&places, &config.consented);
        if session_config.tools.admits(crate::skills::tool::NAME, None) {
            crate::skills::tool::register(&mut mcp_tools, &skills);
        }
        let known =
            |name: &str| mcp_tools.get(name).is_some() || mcp.iter().any(|s| s.name() == name);
        let mut tool_set =
            super::tool_set::plugin_tools_knowing(host, &profile, &session_config.tools, &known);
        tool_set.warnings.extend(mcp_warnings);
        tool_set.warnings.extend(hook_warnings);
        tool_set.warnings.extend(skill_warnings);
        if let Some(section) = crate::skills::prompt_section(&skills) {
            session_config.user_instructions =
                Some(match session_config.user_instructions.take() {
                    Some(before) => format!("{before}\n\n{section}"),
                    None => section,
                });
        }
        tool_set.registry.overlay(&mcp_tools);
        let mut offered = tool_set.registry.names();
        offered.extend(["spawn_agent".to_string(), "memory_read".to_string()]);
        tool_set
            .warnings
            .extend(session_config.hooks.unmatched(&offered));
        let summarization = config.summarization.clone();
        let persona = format!(
            "a coding agent (profile {}) working in {}",
            profile.info.id,
            host.sandbox_context().workspace.display()
        );
        let summarizer = Arc::new(super::summarizer_setup::summarizer(
            &summarization,
            &client,
            &session_config.model,
            persona,
            host,
            &env,
        )?);
        let embedder = config
            .embeddings
            .clone()
            .map(|c| crate::embeddings::Embedder::new(c, &env))
            .transpose()
            .map_err(|e| BuildError::Config(e.to_string()))?;
        let jobs = SessionJobs {
            registry: JobRegistry::new(session_config.truncation.clone()),
            settings: job_settings(&config.jobs),
        };
        Ok(AgentKit {
            jobs,
            provider,
            client,
            configured,
            unconfigured_reason,
            profile,
            tools: ToolCatalog::new(tool_set.registry),
            mcp,
            mcp_tools,
            warnings: tool_set.warnings,
            config: session_config,
            workspace: host.sandbox_context().workspace.clone(),
            summarizer,
            summarization,
            store: None,
            recording: recording_settings(&config.store),
            embedder,
            protected: host.sandbox_context().judge.protected().clone(),
            window,
            repo_prefetch: std::sync::Mutex::new(None),
        })
    }

    /// Give the first session the repository facts read in the background
    /// since set-up (`prefetched`), rather than reading them again.
    pub fn with_repo_facts(self, prefetched: Option<super::repo_facts::Prefetched>) -> Self {
        *self.repo_prefetch.lock().unwrap_or_else(|e| e.into_inner()) = prefetched;
        self
    }

    /// This workspace's repository facts: prefetched once, else read now.
    async fn repo_facts(&self) -> Option<super::repo_facts::RepoFacts> {
        let prefetched = self
            .repo_prefetch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(prefetched) = prefetched
            && let Some(facts) = prefetched.take(&self.workspace).await
        {
            return facts;
        }
        super::repo_facts::read(&self.workspace, &self.workspace).await
    }

    /// Keep sessions in `store` from now on.
    pub fn with_store(mut self, store: Arc<dyn crate::store::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// A session's recorder (None: recording is off) and its compactor,
    /// whose summaries it records.
    fn recorded_compactor(
        &self,
        store: &Arc<dyn crate::store::Store>,
        recorded_bytes: u64,
    ) -> (
        Option<Arc<super::recorder::Recorder>>,
        Arc<crate::compaction::Compactor>,
    ) {
        super::recorder::recorded_compactor(
            self.recording,
            recorded_bytes,
            self.summarizer.clone(),
            store.clone(),
            self.summarization.clone(),
        )
    }

    /// A new stored session's memory (None without a store, or when the
    /// store fails: the session then lives in memory only, with a warning).
    fn new_memory(&self) -> (Option<Arc<super::memory::SessionMemory>>, Option<String>) {
        let Some(store) = &self.store else {
            return (None, None);
        };
        let info = super::memory::SessionInfo {
            workspace: self.workspace.display().to_string(),
            provider: self.provider.id().to_string(),
            profile: self.profile.info.id.clone(),
            model: self.config.model.clone(),
        };
        let (recorder, compactor) = self.recorded_compactor(store, 0);
        match super::memory::SessionMemory::create(store.clone(), compactor, &info) {
            Ok(memory) => {
                if let Some(recorder) = recorder {
                    memory.record_with(recorder);
                }
                self.search_by_meaning(&memory);
                (Some(memory), None)
            }
            Err(err) => (None, Some(format!("this session will not be saved: {err}"))),
        }
    }

    /// Continue the stored session `id`.
    pub async fn resume(&self, id: &str) -> Result<Arc<Session>, crate::store::StoreError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| crate::store::StoreError::UnknownSession(id.to_string()))?;
        let id = &store.resolve_id(id)?;
        let record = store
            .session(id)?
            .ok_or_else(|| crate::store::StoreError::UnknownSession(id.to_string()))?;
        let workspace = self.workspace.display().to_string();
        if record.workspace != workspace {
            return Err(crate::store::StoreError::OtherWorkspace {
                id: id.to_string(),
                session_workspace: record.workspace,
                workspace,
            });
        }
        let (recorder, compactor) = self.recorded_compactor(store, store.recording_size(id)?);
        let memory = super::memory::SessionMemory::resume(store.clone(), compactor, id)?;
        if let Some(recorder) = recorder {
            memory.record_with(recorder);
        }
        self.search_by_meaning(&memory);
        Ok(self.start(Some(memory)).await)
    }

    /// Let `memory` be searched by meaning when `[embeddings]` is set.
    fn search_by_meaning(&self, memory: &super::memory::SessionMemory) {
        if let Some(embedder) = &self.embedder {
            memory.search_by_meaning(super::recall::Semantic::new(embedder.clone()));
        }
    }

    /// The id of this workspace's most recently updated stored session.
    pub fn latest_session(&self) -> Result<Option<String>, crate::store::StoreError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let workspace = self.workspace.display().to_string();
        Ok(store
            .sessions(Some(&workspace))?
            .first()
            .map(|s| s.id.clone()))
    }

    /// A new top-level session (reads the repository facts for its
    /// prompt, confined), kept in the store when there is one.
    pub async fn session(&self) -> Arc<Session> {
        let (memory, warning) = self.new_memory();
        let session = self.start(memory).await;
        if let Some(warning) = warning {
            session.warn(&warning);
        }
        let known = session.tools().names();
        for warning in crate::approvals::unknown_tools(&self.config.approvals.rules, &known) {
            session.warn(&warning);
        }
        session
    }

    async fn start(&self, memory: Option<Arc<super::memory::SessionMemory>>) -> Arc<Session> {
        let repo = self.repo_facts().await;
        let session = Session::new(SessionParts {
            repo,
            jobs: Some(self.jobs.clone()),
            children: Some(super::subagents::Subagents::new()),
            // A stored session's model may compact on demand and search
            // what was archived.
            host_tools: if memory.is_some() {
                vec![Arc::new(super::session_memory::tools::MemoryTools)]
            } else {
                Vec::new()
            },
            memory,
            window: Some(Arc::new(self.window.fresh())),
            ..SessionParts::new(
                self.client.clone(),
                self.profile.clone(),
                self.tools.clone(),
                self.config.clone(),
                self.workspace.clone(),
            )
        });
        if let Some(root) = crate::checkpoint::default_root() {
            session.keep_checkpoints(&root, self.protected.clone());
        }
        session
    }
}

/// The provider (flag, config, the first key set, anthropic) and the
/// profile id (flag, else the provider's).
pub fn resolve_provider(
    config: &Config,
    options: &AgentOptions,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(ProviderKind, String), BuildError> {
    let provider = match options.provider {
        Some(p) => p,
        None => match &config.provider {
            Some(id) => id.parse().map_err(BuildError::Config)?,
            None => detect_provider(env),
        },
    };
    let profile_id = options
        .profile
        .clone()
        .unwrap_or_else(|| provider.id().to_string());
    Ok((provider, profile_id))
}

/// `[jobs]`: `background_after_ms` (default 10,000), `max_duration_ms`
/// (default one hour).
fn recording_settings(store: &crate::config::StoreSettings) -> super::recorder::RecordingSettings {
    let defaults = super::recorder::RecordingSettings::default();
    super::recorder::RecordingSettings {
        mode: store.recording.unwrap_or(defaults.mode),
        cap_bytes: store
            .recording_max_mb
            .map_or(defaults.cap_bytes, |mb| mb.saturating_mul(1024 * 1024)),
    }
}

fn job_settings(jobs: &crate::config::JobsToml) -> BackgroundSettings {
    let mut settings = BackgroundSettings::default();
    if let Some(ms) = jobs.background_after_ms {
        settings.after = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = jobs.max_duration_ms {
        settings.max_duration = std::time::Duration::from_millis(ms);
    }
    settings
}

/// The provider whose key is set (Anthropic, OpenAI, Gemini in that order),
/// else Anthropic.
fn detect_provider(env: &impl Fn(&str) -> Option<String>) -> ProviderKind {
    [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::Gemini,
    ]
    .into_iter()
    .find(|kind| {
        kind.key_vars()
            .iter()
            .any(|v| env(v).is_some_and(|k| !k.is_empty()))
    })
    .unwrap_or(ProviderKind::Anthropic)
}

/// What the local server said it serves, for the error that no model was
/// named (nothing for the hosted providers).
fn served_models_hint(config: &crate::llm::ProviderConfig, served: Option<&[String]>) -> String {
    match served {
        None => String::new(),
        Some([]) => format!(
            "; the server at {} listed no models (GET /v1/models): is it running, and is that its address?",
            config.root()
        ),
        Some(models) => format!(
            "; the server at {} serves: {}",
            config.root(),
            models.join(", ")
        ),
    }
}

/// The model's window (see [`Window::of_model`]); the profile carries
/// its size (a recording keeps it).
fn model_window(profile: &mut Profile, told: Option<Told>, model: &str, root: &str) -> Window {
    let window = Window::of_model(told, model, root, profile.info.context_window);
    profile.info.context_window = window.facts().tokens;
    window
}
