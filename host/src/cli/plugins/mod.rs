//! `sandcrab plugins list | inspect NAME | check DIR | pin NAME | new NAME`.

mod check;
mod grant;
mod list;
mod new;
mod pin;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::setup::HostArgs;

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Every plugin found: name, kind, version, tools (those the model is
    /// not offered in parentheses), effective capabilities.
    List {
        #[command(flatten)]
        host: HostArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One plugin in detail: tool schemas and whether the model sees them,
    /// requested vs granted capabilities.
    Inspect {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Validate a plugin directory without running the plugin (the
    /// compiled component is cached for the next load).
    Check {
        /// The plugin directory (holds plugin.toml).
        dir: PathBuf,
        /// Trusted configuration file (for the cache directory).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Do not use the compiled-plugin cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Pin a plugin's component: write its SHA-256 into your configuration
    /// as `[policy.plugins.NAME] sha256`, so a changed component is refused.
    Pin {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Grant a third-party plugin what its manifest asks for now, bound to
    /// its component (`[policy.plugins.NAME]` with `granted_sha256`): a
    /// changed component gets only these grants until granted again.
    Grant {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Write a new plugin directory that builds with one command.
    New(new::NewArgs),
}

pub async fn run(cmd: PluginsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginsCommand::List { host, json } => list::list(host, json).await,
        PluginsCommand::Inspect { name, host } => list::inspect(host, &name).await,
        PluginsCommand::Check {
            dir,
            config,
            no_cache,
        } => check::check(dir, config, no_cache),
        PluginsCommand::Pin { name, host } => pin::pin(host, &name),
        PluginsCommand::Grant { name, host } => grant::grant(host, &name),
        PluginsCommand::New(args) => new::new(args).await,
    }
}
