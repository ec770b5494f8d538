//! Configuration: `sandcrab.toml` in the workspace, else
//! `~/.config/sandcrab/config.toml`; command-line flags override it.
//!
//! ```toml
//! provider = "anthropic"        # anthropic | openai | gemini | openai-compatible
//! model = "claude-sonnet-4-5"
//! base_url = "http://127.0.0.1:11434"
//! plugin_dirs = ["~/sandcrab-plugins"]
//!
//! [policy]                      # see plugin::policy
//! mode = "default"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::plugin::policy::Policy;

/// The whole configuration file. Every section is optional.
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
    /// Directory for compiled plugins (default: the user cache dir).
    pub cache_dir: Option<PathBuf>,
    /// Cap on the captured stdout and on the stderr of each program a plugin
    /// runs, in MiB (default 10).
    pub process_output_cap_mb: Option<u64>,
    /// Operator policy for plugins and programs.
    #[serde(default)]
    pub policy: Policy,
    /// Agent loop limits and options.
    #[serde(default)]
    pub agent: toml::Table,
    /// Tool output truncation overrides.
    #[serde(default)]
    pub truncation: toml::Table,
    /// Background job settings.
    #[serde(default)]
    pub jobs: toml::Table,
    /// HTTP settings for model calls.
    #[serde(default)]
    pub llm: LlmSettings,
    /// Per-provider settings, by provider id (`[providers.anthropic]`).
    #[serde(default)]
    pub providers: std::collections::BTreeMap<String, ProviderSettings>,
    /// Context compaction settings.
    #[serde(default)]
    pub summarization: toml::Table,
}

/// `[llm]`: timeouts and retries of model calls.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// Connect timeout (default 10,000).
    pub connect_timeout_ms: Option<u64>,
    /// Longest wait for the next bytes of a response (default 30,000).
    pub read_timeout_ms: Option<u64>,
    /// Retries of a failed request or stream connection (default 2).
    pub max_retries: Option<u32>,
}

/// `[providers.ID]`: settings for one provider.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// Base URL of this provider's API.
    pub base_url: Option<String>,
    /// Model used with this provider (overrides the profile default).
    pub model: Option<String>,
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
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.plugin_dirs = config
            .plugin_dirs
            .iter()
            .map(|dir| resolve_dir(base, dir))
            .collect();
        Ok(config)
    }

    /// Read `path`.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// The configuration file that applies to `workspace`, if any:
    /// `<workspace>/sandcrab.toml`, else the user's config file.
    pub fn locate(workspace: &Path) -> Option<PathBuf> {
        let local = workspace.join("sandcrab.toml");
        if local.is_file() {
            return Some(local);
        }
        let user = user_config_dir()?.join("sandcrab").join("config.toml");
        user.is_file().then_some(user)
    }

    /// Load the configuration for `workspace` (explicit `path` first);
    /// no file means defaults.
    pub fn load(
        workspace: &Path,
        path: Option<&Path>,
    ) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let found = path
            .map(Path::to_path_buf)
            .or_else(|| Config::locate(workspace));
        match found {
            Some(path) => Ok((Config::read(&path)?, Some(path))),
            None => Ok((Config::default(), None)),
        }
    }
}

fn user_config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
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
