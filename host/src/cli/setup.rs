//! Options shared by every command that loads plugins, and turning them
//! plus the configuration file into a [`PluginHost`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::config::trust::ProjectSeal;
use crate::config::{Config, LoadedConfig};
use crate::plugin::discovery::{self, PluginSource};
use crate::plugin::{PluginHost, PluginHostConfig, SandboxMode};

/// Where to work and which plugins to load.
#[derive(Debug, Clone, Default, Args)]
pub struct HostArgs {
    /// Workspace directory (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A plugin directory, or a folder of them (repeatable).
    #[arg(long = "plugins", value_name = "DIR")]
    pub plugins: Vec<PathBuf>,
    /// Trusted configuration file (default: ~/.config/sandcrab/config.toml);
    /// the workspace's sandcrab.toml is laid over it as far as it is trusted.
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
    /// Where the configuration came from, and what was ignored.
    pub loaded: LoadedConfig,
    pub host: PluginHost,
    /// The folders third-party plugins come from.
    pub roots: Vec<PathBuf>,
    /// Third-party plugins left to load in the background because their
    /// component must be compiled first (see [`HostArgs::setup_deferring`]).
    pub deferred: Vec<PluginSource>,
    /// The workspace's repository facts, read while the plugins loaded,
    /// when set up for a new session ([`HostArgs::setup_with`]).
    pub repo_facts: Option<crate::agent::repo_facts::Prefetched>,
    /// Things the operator should know (ignored settings, sandbox off):
    /// commands print them ([`Setup::print_warnings`]) or emit them as
    /// WARNING events.
    pub warnings: Vec<String>,
}

impl Setup {
    /// Print the setup warnings and the loader's diagnostics on stderr.
    pub fn print_warnings(&self) {
        for warning in &self.warnings {
            errln!("warning: {}", super::terminal::sanitize(warning));
        }
        for d in self.host.diagnostics() {
            let label = match d.severity {
                crate::plugin::Severity::Error => "error",
                crate::plugin::Severity::Warning => "warning",
                crate::plugin::Severity::Note => "note",
            };
            errln!("{label}: {}", super::terminal::sanitize(&d.message));
        }
    }
}

/// The workspace `dir` names (default: the current directory), resolved.
pub fn resolve_workspace(dir: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    match dir.canonicalize() {
        Ok(dir) if dir.is_dir() => Ok(dir),
        Ok(_) => Err(super::UsageError(format!(
            "workspace {}: not a folder (give -w a folder)",
            dir.display()
        ))
        .into()),
        Err(err) => Err(super::UsageError(format!(
            "workspace {}: {} (give -w a folder that exists)",
            dir.display(),
            super::terminal::io_reason(&err)
        ))
        .into()),
    }
}

impl HostArgs {
    /// The workspace directory.
    pub fn workspace_dir(&self) -> anyhow::Result<PathBuf> {
        resolve_workspace(self.workspace.as_deref())
    }

    /// Read the configuration, apply flags, start the plugin host and load
    /// every plugin (bundled, configured, flagged, workspace).
    pub async fn setup(&self) -> anyhow::Result<Setup> {
        self.setup_with(false, false).await
    }

    /// Like [`HostArgs::setup`], but third-party plugins whose component is
    /// not compiled yet are not loaded: they are returned in
    /// [`Setup::deferred`] for the caller to load in the background.
    pub async fn setup_deferring(&self) -> anyhow::Result<Setup> {
        self.setup_with(true, false).await
    }

    /// [`HostArgs::setup`], deferring as [`HostArgs::setup_deferring`]
    /// when `defer_uncompiled`; for a command that starts a new session at
    /// once (`new_session`), the repository facts its prompt needs are read
    /// while the plugins load.
    pub(super) async fn setup_with(
        &self,
        defer_uncompiled: bool,
        new_session: bool,
    ) -> anyhow::Result<Setup> {
        // What this kernel can enforce is probed while the configuration
        // is read and the plugins load (a session's repository facts need
        // it whatever the mode: git always runs confined); locked mode
        // waits for it below, the other modes report it with the warnings.
        crate::process::probe_in_background();
        let workspace = self.workspace_dir()?;
        let loaded = Config::load(&workspace, self.config.as_deref())?;
        let mut warnings = loaded.warnings.clone();
        let mut config = loaded.config.clone();
        if let Some(mode) = self.sandbox {
            config.policy.sandbox = Some(mode);
        }
        warnings.extend(config.policy.warnings());
        if let Err(e) = crate::telemetry::init(&config.telemetry, |k| std::env::var(k).ok()) {
            warnings.push(format!("telemetry is off: {e}"));
        }
        let mode = config.policy.sandbox_mode();
        if mode == SandboxMode::Locked {
            let missing = crate::process::support().missing(mode, false);
            if !missing.is_empty() {
                anyhow::bail!(
                    "locked mode cannot be enforced on this host (missing: {}); see `sandcrab sandbox status`",
                    missing.join(", ")
                );
            }
            // A probe, not a promise: this boot's check of locked mode
            // (made now if there is none) must have found every door shut.
            let me = std::env::current_exe().context("cannot find the sandcrab binary")?;
            crate::process::probe::verify_locked(&me)
                .await
                .map_err(anyhow::Error::msg)?;
        }
        if mode == SandboxMode::Off {
            warnings.push(
                "sandbox mode is off: programs started by plugins run unconfined".to_string(),
            );
        }
        for dir in &self.plugins {
            if !dir.is_dir() {
                warnings.push(format!(
                    "--plugins {}: no such folder; no plugin was loaded from it",
                    dir.display()
                ));
            }
        }
        let ws_plugins = discovery::workspace_plugin_dir(&workspace);
        if ws_plugins.exists() && !loaded.workspace_plugins_allowed() {
            warnings.push(format!(
                "{}: not loaded: plugins of an untrusted project are never loaded (review them, then run `sandcrab trust {}`)",
                ws_plugins.display(),
                workspace.display()
            ));
        }

        let mut host_config = PluginHostConfig::new(&workspace);
        host_config.policy = config.policy.clone();
        if let Some(dir) = &config.cache_dir {
            host_config.cache_dir = Some(dir.clone());
        }
        if let Some(mb) = config.process_output_cap_mb {
            host_config.output_cap = (mb as usize) << 20;
        }
        host_config.engine.code.native_debug_info = config.plugin_debug_info.unwrap_or(false);
        if self.no_cache {
            host_config.cache_dir = None;
        }
        let sources = self.sources(&workspace, &config, loaded.workspace_plugins_allowed());
        let roots = self.roots(&workspace, &config, loaded.workspace_plugins_allowed());
        // The project's own plugins load only as they were trusted, checked
        // on the bytes loaded, at start and at every reload.
        // Installed plugins load only as their lockfile fixes them, and
        // signatures are checked on the same bytes.
        host_config.admission = vec![
            std::sync::Arc::new(ProjectSeal::new(&workspace, &config.trust.projects)),
            std::sync::Arc::new(signed_installs(&config)?),
        ];
        // What the host keeps, now that the configuration and the plugin
        // folders are known: installed before any plugin or program runs.
        let link_targets = loaded
            .project
            .as_ref()
            .filter(|p| p.trusted)
            .map(|p| p.link_targets.clone())
            .unwrap_or_default();
        crate::kept::install(super::kept_setup::registry_for(
            &config,
            &loaded,
            &super::kept_setup::PluginOrigins {
                roots: &roots,
                sources: &sources,
                link_targets: &link_targets,
            },
        ));
        let repo_facts =
            new_session.then(|| crate::agent::repo_facts::Prefetched::start(&workspace));
        // A first load compiles the component (seconds for Python or
        // JavaScript): said before it starts, where nothing else draws
        // (chat loads what must be compiled in the background, and says
        // so through the session).
        if !defer_uncompiled {
            host_config.compiling = Some(crate::plugin::CompilingNotice(std::sync::Arc::new(
                |dir: &std::path::Path| {
                    errln!(
                        "plugins: compiling {} (first load: a Python or JavaScript plugin takes 10-15 s; cached afterwards)",
                        super::terminal::sanitize(&dir.display().to_string())
                    );
                },
            )));
        }
        let mut host = PluginHost::new(host_config)?;
        let (deferred, now): (Vec<PluginSource>, Vec<PluginSource>) =
            sources.into_iter().partition(|s| {
                defer_uncompiled && matches!(s, PluginSource::Dir(_)) && !host.is_compiled(s)
            });
        host.load_all(&now).await;
        // Every mode waits for the probe here, so what it reports is said
        // at start, never over a screen drawn later.
        let missing = crate::process::support().missing(mode, false);
        if !missing.is_empty() {
            warnings.push(format!(
                "the {mode} sandbox cannot be enforced on this host (missing: {}): programs will be refused; see `sandcrab sandbox status`",
                missing.join(", ")
            ));
        }
        Ok(Setup {
            workspace,
            config,
            loaded,
            host,
            roots,
            deferred,
            repo_facts,
            warnings,
        })
    }

    /// Every plugin source, first-party first; the workspace's own plugins
    /// only when the project is trusted.
    pub fn sources(
        &self,
        workspace: &std::path::Path,
        config: &Config,
        workspace_plugins: bool,
    ) -> Vec<PluginSource> {
        let mut sources = discovery::bundled();
        sources.extend(discovery::scan(&self.roots(
            workspace,
            config,
            workspace_plugins,
        )));
        sources
    }

    /// The folders third-party plugins are found in (what `--watch-plugins`
    /// watches).
    pub fn roots(
        &self,
        workspace: &std::path::Path,
        config: &Config,
        workspace_plugins: bool,
    ) -> Vec<PathBuf> {
        let mut roots = config.plugin_dirs.clone();
        roots.extend(install_dir(config));
        roots.extend(self.plugins.iter().cloned());
        if workspace_plugins {
            roots.push(discovery::workspace_plugin_dir(workspace));
        }
        roots
    }
}

/// The folder `sandcrab plugins install` writes: `plugin_install_dir`,
/// else `<data dir>/plugins`.
pub fn install_dir(config: &Config) -> Option<PathBuf> {
    config
        .plugin_install_dir
        .clone()
        .or_else(crate::supply::default_install_dir)
}

/// The check every load of a third-party folder passes: its install
/// folder's lockfile and the operator's signers.
pub fn signed_installs(
    config: &Config,
) -> anyhow::Result<crate::supply::admission::SignedInstalls> {
    Ok(crate::supply::admission::SignedInstalls {
        signers: crate::supply::Signers::from_toml(&config.trust.signers)?,
        required: config.trust.signatures_required(config.policy.locked()),
        install_dirs: install_dir(config).into_iter().collect(),
    })
}
