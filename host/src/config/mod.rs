//! Configuration, decided by where each setting comes from.
//!
//! - **Trusted**: `--config FILE`, else `~/.config/sandcrab/config.toml`
//!   (plus flags and the environment). It may set everything.
//! - **Project**: `<workspace>/sandcrab.toml` is repository content. Until
//!   the operator runs `sandcrab trust`, it may set project settings only
//!   (see [`layers::PROJECT_KEYS`]); any other key is ignored with a
//!   warning naming the key and the file.
//!
//! ```toml
//! provider = "anthropic"        # anthropic | openai | gemini | openai-compatible
//! model = "claude-sonnet-4-5"
//! plugin_dirs = ["~/sandcrab-plugins"]
//!
//! [policy]                      # see plugin::policy
//! mode = "default"
//! ```

pub mod budget;
mod checked;
pub mod consent;
pub mod edit;
mod layers;
mod project;
mod read;
pub mod remembered;
mod sections;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::plugin::policy::Policy;

pub use layers::{LoadedConfig, PROJECT_FILE, PROJECT_KEYS, ProjectLayer};
pub use sections::{AgentToml, ApprovalsToml, JobsToml};
pub use trust::TrustRecord;

/// The whole configuration. Every section is optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// LLM provider id.
    pub provider: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// Base URL of the provider's API.
    pub base_url: Option<String>,
    /// Extra plugin directories.
    #[serde(default)]
    pub plugin_dirs: Vec<PathBuf>,
    /// Where `sandcrab plugins install` puts plugins, with their
    /// `sandcrab.lock` (default: `<data dir>/plugins`); always searched.
    pub plugin_install_dir: Option<PathBuf>,
    /// Hosts a plugin download may be redirected to (a registry's CDN,
    /// such as ghcr.io's `pkg-containers.githubusercontent.com`): https
    /// only, without the registry's credentials, every byte still checked
    /// against its digest. Unset: only the host asked.
    #[serde(default)]
    pub plugin_redirect_hosts: Vec<String>,
    /// Directory for compiled plugins (default: the user cache dir).
    pub cache_dir: Option<PathBuf>,
    /// Compile plugins with native debug information, for `perf` and
    /// debuggers (default off). The built-in plugins' code embedded in the
    /// binary is built without it, so they are then compiled here too.
    pub plugin_debug_info: Option<bool>,
    /// Cap on the captured stdout and on the stderr of each program a plugin
    /// runs, in MiB (default 10).
    pub process_output_cap_mb: Option<u64>,
    /// Operator policy for plugins and programs.
    #[serde(default)]
    pub policy: Policy,
    /// Agent loop limits and options.
    #[serde(default)]
    pub agent: AgentToml,
    /// Spend caps and model prices (operator-only).
    #[serde(default)]
    pub budget: budget::BudgetToml,
    /// OpenTelemetry export (operator-only; off unless an endpoint is
    /// named here or in `OTEL_EXPORTER_OTLP_*`).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryToml,
    /// Tool output truncation overrides, by tool name (`default`: every
    /// other tool).
    #[serde(default)]
    pub truncation: BTreeMap<String, crate::tools::TruncationLimits>,
    /// Background job settings.
    #[serde(default)]
    pub jobs: JobsToml,
    /// Approval rules and mode.
    #[serde(default)]
    pub approvals: ApprovalsToml,
    /// HTTP settings for model calls.
    #[serde(default)]
    pub llm: LlmSettings,
    /// Per-provider settings, by provider id (`[providers.anthropic]`).
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Context compaction settings.
    #[serde(default)]
    pub summarization: crate::compaction::SummarizationConfig,
    /// Where sessions are kept.
    #[serde(default)]
    pub store: StoreSettings,
    /// `[embeddings]`: memory searched by meaning too (absent: by words).
    #[serde(default)]
    pub embeddings: Option<crate::embeddings::EmbeddingsConfig>,
    /// MCP servers whose tools the model is offered (`[mcp.servers.NAME]`).
    #[serde(default)]
    pub mcp: McpSettings,
    /// `[trust]`: the projects the operator trusts, by workspace path
    /// (written by `sandcrab trust`), and the signers whose plugin
    /// signatures count (`[trust.signers.NAME]`).
    #[serde(default)]
    pub trust: trust::TrustSection,
    /// Hooks by event (`[[hooks.PreToolUse]]`), in Claude Code's shape.
    #[serde(default)]
    pub hooks: crate::hooks::HooksToml,
    /// What the operator consented to, by what it is (written by
    /// `sandcrab trust`): hooks and skills, pinned by content.
    #[serde(default)]
    pub consented: BTreeMap<String, crate::consent::ConsentRecord>,
    /// The project's hooks (read apart from the merge, so a project never
    /// replaces the operator's), and whether the project is trusted.
    #[serde(skip)]
    pub project_hooks: Option<crate::hooks::ProjectHooks>,
    /// The project is trusted as it is now (set by the loader).
    #[serde(skip)]
    pub project_trusted: bool,
}

/// `[mcp]`: the MCP servers sandcrab uses as tool sources. Only the
/// operator may set it (never an untrusted project file).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerSettings>,
}

/// One MCP server: a program to start (`command`, `args`) or a streamable
/// HTTP endpoint (`url`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// The program (a name looked up on PATH, or a path).
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Names of environment variables passed to it, with their values
    /// from sandcrab's environment (nothing else is: no secrets unless
    /// named here).
    #[serde(default)]
    pub env: Vec<String>,
    /// A streamable HTTP endpoint instead of a program.
    pub url: Option<String>,
    /// Most milliseconds one tool call may take (default 60000).
    pub timeout_ms: Option<u64>,
    /// Most milliseconds to start and list tools (default 20000).
    pub startup_timeout_ms: Option<u64>,
    /// Let the server ask sandcrab's model while it answers a call (MCP
    /// sampling); off by default. Each request is bounded and recorded in
    /// the call's receipt.
    #[serde(default)]
    pub sampling: bool,
    /// How to sign in to a `url` server that needs it (`sandcrab mcp
    /// login NAME`).
    #[serde(default)]
    pub oauth: OAuthSettings,
}

/// `[mcp.servers.NAME.oauth]`: the client sandcrab signs in as. Nothing
/// set: a client ID metadata document where the server takes one, else
/// dynamic registration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// A client id registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// The environment variable holding that client's secret (a name:
    /// the secret never sits in the file).
    pub client_secret_env: Option<String>,
    /// The scopes to ask for (default: what the server says it needs).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The HTTPS URL of sandcrab's client ID metadata document, where the
    /// operator publishes one.
    pub client_metadata_url: Option<String>,
}

/// `[store]`: the session database.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// The SQLite file (default `$XDG_DATA_HOME/sandcrab/sandcrab.db`).
    pub path: Option<PathBuf>,
    /// How much of each session is recorded for replay: `full` (default),
    /// `digests` or `off`.
    pub recording: Option<crate::store::RecordingMode>,
    /// Most megabytes of recording kept per session (default 256).
    pub recording_max_mb: Option<u64>,
    /// A PostgreSQL database shared by many hosts
    /// (`postgres://USER@HOST:PORT/DATABASE`, `?sslmode=require` for TLS)
    /// instead of the SQLite file.
    pub url: Option<String>,
    /// The variable holding the database password.
    pub password_env: Option<String>,
    /// A file (owner-only) holding the database password.
    pub password_file: Option<PathBuf>,
    /// A CA certificate (PEM) to trust for the database's TLS, besides the
    /// Web PKI roots.
    pub ca_file: Option<PathBuf>,
    /// Most database connections open at once (default 16).
    pub pool_size: Option<usize>,
    /// This host's name in leases and `sessions list` (default: the
    /// machine's host name).
    pub host: Option<String>,
    /// Seconds a session's lease lasts unrenewed (default 15; renewed
    /// every third of it): how long a host that died keeps others from
    /// taking its sessions over.
    pub lease_seconds: Option<u64>,
}

impl StoreSettings {
    /// The database file to use.
    pub fn file(&self) -> Option<PathBuf> {
        self.path.clone().or_else(crate::store::default_path)
    }

    /// The store to open: `url` if set, else the SQLite file (None: no
    /// data directory to put it in).
    pub fn location(&self) -> Result<Option<crate::store::StoreLocation>, String> {
        match (&self.url, &self.path) {
            (Some(_), Some(_)) => Err(
                "[store] url and path are both set: url names a PostgreSQL database, path a SQLite file; keep one".into(),
            ),
            (Some(url), None) => {
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    return Err(format!(
                        "[store] url = \"{}\" is not a PostgreSQL URL: write postgres://USER@HOST:PORT/DATABASE (a SQLite file is [store] path)",
                        crate::store::location::without_credentials(url)
                    ));
                }
                Ok(Some(crate::store::StoreLocation::Postgres(
                    crate::store::PgSettings {
                        url: url.clone(),
                        password_env: self.password_env.clone(),
                        password_file: self.password_file.clone(),
                        ca_file: self.ca_file.clone(),
                        pool_size: self.pool_size,
                    },
                )))
            }
            (None, _) => Ok(self.file().map(crate::store::StoreLocation::Sqlite)),
        }
    }

    /// How leases are held, and the key chain heads are sealed with
    /// (this host's chain key).
    pub fn options(&self) -> crate::store::StoreOptions {
        crate::store::StoreOptions {
            chain_key: crate::store::chain_key(),
            host: self.host.clone(),
            lease_ttl: self
                .lease_seconds
                .map_or(crate::store::lease::DEFAULT_TTL, |s| {
                    // Within what the stores can count in milliseconds
                    // and renew in time.
                    std::time::Duration::from_secs(s.clamp(3, 86_400))
                }),
        }
    }
}

/// `[llm]`: timeouts and retries of model calls.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// Connect timeout (default 10,000).
    pub connect_timeout_ms: Option<u64>,
    /// Longest wait for an answer's first bytes (default 300,000).
    pub first_byte_timeout_ms: Option<u64>,
    /// Longest silence between chunks of a streamed answer (default 30,000).
    pub read_timeout_ms: Option<u64>,
    /// Retries of a failed request or stream connection (default 2).
    pub max_retries: Option<u32>,
    /// The proxy provider requests go through (default: none; the
    /// environment's `HTTP_PROXY` and kin are not read, so a key is never
    /// sent to a proxy the operator did not name for sandcrab).
    pub proxy: Option<String>,
}

/// `[providers.ID]`: settings for one provider.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// Base URL of this provider's API.
    pub base_url: Option<String>,
    /// Model used with this provider (overrides the profile default).
    pub model: Option<String>,
    /// Output token limit of an answer (default: the model's own).
    pub max_tokens: Option<u32>,
    /// Longest wait for an answer's first bytes, for this provider.
    pub first_byte_timeout_ms: Option<u64>,
    /// Longest silence between chunks, for this provider.
    pub read_timeout_ms: Option<u64>,
    /// Context window of the model, in tokens (for local servers that do
    /// not report it).
    pub context_window: Option<u64>,
}

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

impl Config {
    /// Parse configuration text; `path` is used in messages and to resolve
    /// relative plugin directories.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let checked = checked::check(text, path, checked::Keep::All)?;
        let mut config = layers::settle(checked.config, path)?;
        config.approvals.parsed = layers::approval_rules(&config, text, path, true)?;
        Ok(config)
    }

    /// Read `path` (a trusted file).
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = read::trusted_file(path)?;
        Config::parse(&text, path)
    }

    /// The operator's own file alone, with no project laid over it, its
    /// folders resolved against it (what a command that writes grants
    /// into that file must decide from); an absent file is the defaults.
    pub fn read_operator(path: &Path) -> Result<Config, ConfigError> {
        if !path.exists() {
            return Ok(Config::default());
        }
        layers::settle(Config::read(path)?, path)
    }

    /// The truncation of tool output: the defaults with `[truncation]`
    /// laid over them.
    pub fn truncation_policy(&self) -> crate::tools::TruncationPolicy {
        crate::tools::TruncationPolicy::with_overrides(&self.truncation)
    }

    /// The user's configuration file, `$XDG_CONFIG_HOME/sandcrab/config.toml`
    /// or `~/.config/sandcrab/config.toml`.
    pub fn user_file() -> Option<PathBuf> {
        crate::user_files::config_file()
    }

    /// Load the configuration for `workspace`: the trusted file (`explicit`,
    /// else the user's) with the project file layered over it as far as the
    /// project is trusted.
    pub fn load(workspace: &Path, explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        layers::load(workspace, explicit)
    }
}

/// `~/x` → home, relative → against `base`.
fn resolve_dir(base: &Path, dir: &Path) -> PathBuf {
    if let Ok(rest) = dir.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_policy_and_resolves_plugin_dirs() {
        let config = Config::parse(
            "provider = \"openai\"\nplugin_dirs = [\"plugins\", \"/abs\"]\n[policy]\nmode = \"locked\"\n[policy.plugins.lint]\nprograms = [\"eslint\"]\n",
            Path::new("/ws/sandcrab.toml"),
        )
        .unwrap();
        assert_eq!(config.provider.as_deref(), Some("openai"));
        assert_eq!(
            config.plugin_dirs,
            vec![PathBuf::from("/ws/plugins"), PathBuf::from("/abs")]
        );
        assert_eq!(
            config.policy.mode,
            crate::plugin::policy::PolicyMode::Locked
        );
        assert_eq!(config.policy.plugins["lint"].programs, vec!["eslint"]);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_file() {
        let err = Config::parse("modle = \"x\"", Path::new("/ws/sandcrab.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("/ws/sandcrab.toml:") && msg.contains("modle"),
            "{msg}"
        );
    }
}
