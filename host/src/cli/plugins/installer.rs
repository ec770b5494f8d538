//! The installer every `sandcrab plugins` command that changes the
//! install folder works through: the operator's file (alone: never a
//! project's), the install folder and its staging folder, the signers,
//! and the two steps of an install: stage (write the files in staging,
//! load the plugin once: refused there if it is not a plugin of its
//! kind, and its tools listed) and commit (move it in, lock it, grant
//! it).

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::pin::operator_file;
use crate::cli::setup::HostArgs;
use crate::config::Config;
use crate::plugin::{Manifest, PluginHost, PluginHostConfig, PluginOrigin, PluginSource};
use crate::supply::Signers;
use crate::supply::fetch::Fetched;
use crate::supply::lockfile::{Locked, Lockfile};
use crate::supply::signature::{self, SignatureError};

/// How an install treats signatures and consent.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Consent {
    /// Grant what it asks without asking.
    #[arg(long)]
    pub yes: bool,
    /// Install it even though no signer you trust signed it.
    #[arg(long)]
    pub allow_unsigned: bool,
    /// (update) Go to a lower version: a rollback.
    #[arg(long)]
    pub allow_downgrade: bool,
    /// (update) Take a version another signer signed, or nobody you trust.
    #[arg(long)]
    pub allow_signer_change: bool,
}

/// What every install command works with.
pub(super) struct Installer {
    pub(super) config: Config,
    pub(super) config_file: PathBuf,
    pub(super) root: PathBuf,
    pub(super) signers: Signers,
    pub(super) required: bool,
    pub(super) http: crate::supply::download::Http,
}

impl Installer {
    pub(super) fn new(args: &HostArgs) -> anyhow::Result<Installer> {
        // Only the operator's own file decides what is installed and
        // granted: a project's grants are that project's, and are never
        // written into the operator's file.
        let config_file = operator_file(args)?;
        let mut config = Config::read_operator(&config_file)?;
        if let Some(mode) = args.sandbox {
            config.policy.sandbox = Some(mode);
        }
        let root = crate::cli::setup::install_dir(&config)
            .context("no folder to install plugins into: set plugin_install_dir, or HOME")?;
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let installer = Installer {
            signers: Signers::from_toml(&config.trust.signers)?,
            required: config.trust.signatures_required(config.policy.locked()),
            config_file,
            http: crate::supply::download::Http::new(&config.plugin_redirect_hosts),
            root,
            config,
        };
        installer.sweep_staging();
        Ok(installer)
    }

    pub(super) fn staging(&self) -> PathBuf {
        self.root.join(".staging")
    }

    /// Drop what an install left in the staging folder more than a day
    /// ago (a broken download nobody resumed), so it cannot fill the disk.
    fn sweep_staging(&self) {
        let day = std::time::Duration::from_secs(24 * 3600);
        // Only a folder of our own: a link planted there is not followed.
        let plain = std::fs::symlink_metadata(self.staging()).is_ok_and(|m| m.file_type().is_dir());
        let Ok(entries) = std::fs::read_dir(self.staging())
            .map_err(drop)
            .and_then(|e| if plain { Ok(e) } else { Err(()) })
        else {
            return;
        };
        for entry in entries.flatten() {
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > day);
            if stale {
                let path = entry.path();
                let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
            }
        }
    }

    /// Who signed `fetched`, or why it may not be installed.
    pub(super) fn signer(
        &self,
        fetched: &Fetched,
        consent: Consent,
    ) -> anyhow::Result<Option<String>> {
        let verdict = signature::verify_optional(
            fetched.package.signature.as_deref(),
            &fetched.digests,
            &fetched.manifest.name,
            &self.signers,
        );
        match verdict {
            Ok(signer) => Ok(Some(signer.label())),
            Err(e) if e.leaves_it_unsigned() && !self.required => {
                if !consent.allow_unsigned {
                    bail!(
                        "refused: {}; pass --allow-unsigned to take it as an unsigned plugin",
                        match e {
                            SignatureError::Unsigned => "it carries no signature".to_string(),
                            other => other.to_string(),
                        }
                    );
                }
                errln!(
                    "warning: installing '{}' as an unsigned plugin (--allow-unsigned)",
                    fetched.manifest.name
                );
                Ok(None)
            }
            Err(e) => bail!("refused: {e}"),
        }
    }

    /// Write `fetched` into the staging folder and load it once there
    /// (its component compiled into the cache for the first real load):
    /// one that is not a plugin of its kind is refused here, before it is
    /// anywhere a load would find it.
    pub(super) async fn stage(&self, fetched: &Fetched) -> anyhow::Result<Staged> {
        crate::supply::files::plain_dir(&self.staging())?;
        let dir = self.staging().join(format!(
            "{}.new-{}",
            fetched.manifest.name,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir)?;
        let mut staged = Staged {
            dir,
            tools: Vec::new(),
        };
        fetched.package.write_dir(&staged.dir, &fetched.manifest)?;
        let scratch = tempfile::tempdir()?;
        let mut host_config = PluginHostConfig::new(scratch.path());
        host_config.cache_dir = self.config.cache_dir.clone().or(host_config.cache_dir);
        let mut host = PluginHost::new(host_config)?;
        let plugin = host
            .load(&PluginSource::Dir(staged.dir.clone()))
            .await
            .map_err(|e| anyhow::anyhow!("refused: {e}"))?;
        staged.tools = plugin.tools.iter().map(|t| t.name.clone()).collect();
        Ok(staged)
    }

    /// The tools of `staged` that another installed plugin already
    /// offers, with that plugin's name: a plugin never takes another's
    /// tools (whichever loads first would answer the model's calls).
    pub(super) fn taken_tools(&self, lock: &Lockfile, name: &str, staged: &Staged) -> Vec<String> {
        lock.plugins
            .iter()
            .filter(|p| p.name != name)
            .flat_map(|p| {
                p.tools
                    .iter()
                    .filter(|t| staged.tools.contains(t))
                    .map(move |t| format!("{t} (from {})", p.name))
            })
            .collect()
    }

    /// Move `staged` into the install folder, lock it and grant it (a
    /// fresh install's grant replaces whatever table had its name).
    pub(super) fn commit(
        &self,
        staged: Staged,
        fetched: &Fetched,
        source: &str,
        signer: Option<String>,
        fresh: bool,
    ) -> anyhow::Result<PathBuf> {
        let name = &fetched.manifest.name;
        let target = self.root.join(name);
        let old = self
            .staging()
            .join(format!("{name}.old-{}", std::process::id()));
        if target.exists() {
            std::fs::rename(&target, &old)?;
        }
        std::fs::rename(&staged.dir, &target)?;
        let _ = std::fs::remove_dir_all(&old);
        let mut lock = Lockfile::read(&self.root)?;
        lock.put(Locked {
            name: name.clone(),
            version: fetched.manifest.version.clone(),
            source: source.to_string(),
            digest: fetched.digest.clone(),
            component_sha256: fetched.digests.component.clone(),
            manifest_sha256: fetched.digests.manifest.clone(),
            signer,
            installed_at: crate::time::now_rfc3339(),
            granted: fetched.manifest.capabilities.clone(),
            tools: staged.tools.clone(),
        });
        lock.write(&self.root)?;
        // Granted for this component, and pinned to it: the pin is what
        // locked mode and its HTTP grants ask of a third-party plugin.
        let sha = &fetched.digests.component;
        if fresh {
            crate::config::edit::remove_plugin_grant(&self.config_file, name)?;
        }
        crate::config::edit::grant_plugin(
            &self.config_file,
            name,
            &fetched.manifest.capabilities,
            sha,
        )?;
        crate::config::edit::pin_plugin(&self.config_file, name, sha)?;
        Ok(target)
    }

    /// What `manifest` asks beyond what its plugin is granted now; for a
    /// fresh install, beyond what a third-party plugin gets by default (a
    /// grant left in the file under its name is not this plugin's).
    pub(super) fn beyond_grant(&self, manifest: &Manifest, fresh: bool) -> Vec<String> {
        let mut policy = self.config.policy.clone();
        if fresh {
            policy.plugins.remove(&manifest.name);
        }
        policy.decide(manifest, PluginOrigin::ThirdParty).denied
    }
}

/// A plugin written into the staging folder and loaded once; its folder
/// goes away unless it was committed.
pub(super) struct Staged {
    dir: PathBuf,
    /// The tools it declares.
    pub(super) tools: Vec<String>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
