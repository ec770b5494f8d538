//! `sandcrab plugins list | inspect NAME | check DIR | pin NAME | grant
//! NAME | new NAME | install REF | update NAME | remove NAME | verify |
//! statement DIR | package DIR | publish DIR REF`.

mod check;
mod grant;
mod install;
mod installed;
mod installer;
mod list;
mod new;
mod pin;
mod publish;

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
    /// Install a plugin from oci://HOST/NS/NAME:TAG (or @sha256:…), an
    /// https:// URL with #sha256=HEX, or a local folder or .tar: checked
    /// against your [trust.signers], recorded in sandcrab.lock, granted
    /// what it asks with your consent.
    Install {
        /// Where from.
        reference: String,
        #[command(flatten)]
        consent: installer::Consent,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Update an installed plugin from where it came from, showing what
    /// the new version asks beyond what it was granted (which needs your
    /// consent).
    Update {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        consent: installer::Consent,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Remove an installed plugin: its folder, lock entry and grant.
    Remove {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Check every installed plugin against sandcrab.lock and your
    /// signers, as a load would.
    Verify {
        #[command(flatten)]
        host: HostArgs,
    },
    /// Print what a plugin's signature is made over; sign it with
    /// `| ssh-keygen -Y sign -f KEY -n sandcrab-plugin > DIR/plugin.sig`.
    Statement {
        /// The plugin directory.
        dir: PathBuf,
    },
    /// Write a plugin directory as an OCI artifact (an image layout .tar).
    Package {
        /// The plugin directory.
        dir: PathBuf,
        /// The .tar to write.
        #[arg(long, short)]
        out: PathBuf,
        /// The tag inside the layout.
        #[arg(long, default_value = "latest")]
        tag: String,
    },
    /// Push a plugin directory to an OCI registry as oci://HOST/NS/NAME:TAG.
    Publish {
        /// The plugin directory.
        dir: PathBuf,
        /// Where to.
        reference: String,
    },
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
        PluginsCommand::Install {
            reference,
            consent,
            host,
        } => install::install(host, &reference, consent).await,
        PluginsCommand::Update {
            name,
            consent,
            host,
        } => install::update(host, &name, consent).await,
        PluginsCommand::Remove { name, host } => installed::remove(host, &name),
        PluginsCommand::Verify { host } => installed::verify(host),
        PluginsCommand::Statement { dir } => publish::print_statement(&dir),
        PluginsCommand::Package { dir, out, tag } => publish::package(&dir, &out, &tag),
        PluginsCommand::Publish { dir, reference } => publish::publish(&dir, &reference).await,
    }
}
