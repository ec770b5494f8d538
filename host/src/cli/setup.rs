//! Options shared by every command that loads plugins, and turning them
//! plus the configuration file into a [`PluginHost`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::config::Config;
use crate::plugin::discovery::{self, PluginSource};
use crate::plugin::{PluginHost, PluginHostConfig, SandboxMode};

/// Where to work and which plugins to load.
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// Workspace directory (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A plugin directory, or a folder of them (repeatable).
    #[arg(long = "plugins", value_name = "DIR")]
    pub plugins: Vec<PathBuf>,
    /// Configuration file (default: <workspace>/sandcrab.toml, then
    /// ~/.config/sandcrab/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Confinement of programs plugins start: workspace-write, locked or off.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,
    /// Do not use the compiled-plugin cache.
    #[arg(long)]
    pub no_cache: bool,
}

/// The workspace, configuration and loaded plugins of one invocation.
pub struct Setup {
    pub workspace: PathBuf,
    pub config: Config,
    pub config_path: Option<PathBuf>,
    pub host: PluginHost,
}

impl HostArgs {
    /// The workspace directory.
    pub fn workspace_dir(&self) -> anyhow::Result<PathBuf> {
        let dir = match &self.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot determine the current directory")?,
        };
        dir.canonicalize()
            .with_context(|| format!("workspace {} is not usable", dir.display()))
    }

    /// Read the configuration, apply flags, start the plugin host and load
    /// every plugin (bundled, configured, flagged, workspace).
    pub async fn setup(&self) -> anyhow::Result<Setup> {
        let workspace = self.workspace_dir()?;
        let (mut config, config_path) = Config::load(&workspace, self.config.as_deref())?;
        if let Some(mode) = self.sandbox {
            if mode == SandboxMode::Off {
                tracing::warn!("--sandbox off: programs started by plugins run unconfined");
            }
            config.policy.sandbox = Some(mode);
        }
        let mut host_config = PluginHostConfig::new(&workspace);
        host_config.policy = config.policy.clone();
        if let Some(dir) = &config.cache_dir {
            host_config.cache_dir = Some(dir.clone());
        }
        if let Some(mb) = config.process_output_cap_mb {
            host_config.output_cap = (mb as usize) << 20;
        }
        if self.no_cache {
            host_config.cache_dir = None;
        }
        let mut host = PluginHost::new(host_config)?;
        host.load_all(&self.sources(&workspace, &config)).await;
        Ok(Setup {
            workspace,
            config,
            config_path,
            host,
        })
    }

    /// Every plugin source, first-party first.
    pub fn sources(&self, workspace: &std::path::Path, config: &Config) -> Vec<PluginSource> {
        let mut roots = config.plugin_dirs.clone();
        roots.extend(self.plugins.iter().cloned());
        roots.push(discovery::workspace_plugin_dir(workspace));
        let mut sources = discovery::bundled();
        sources.extend(discovery::scan(&roots));
        sources
    }
}
