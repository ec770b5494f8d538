//! `sandcrab plugins install | update | remove | verify`: plugins from
//! OCI registries, archives and HTTPS downloads, into the install folder
//! (`plugin_install_dir`, else `<data dir>/plugins`) and its
//! `sandcrab.lock`. Each is checked against the operator's signers, its
//! component compiled once before it is moved in (so nothing broken or
//! half-written is ever in the folder), and its capabilities granted only
//! with the operator's consent; an update shows what it asks beyond what
//! was granted.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::pin::operator_file;
use crate::cli::setup::HostArgs;
use crate::config::Config;
use crate::plugin::{Manifest, PluginHost, PluginHostConfig, PluginOrigin, PluginSource};
use crate::supply::fetch::{self, Fetched};
use crate::supply::lockfile::{Locked, Lockfile};
use crate::supply::signature::{self, SignatureError};
use crate::supply::{Reference, Signers};

/// What every install command works with.
struct Installer {
    config: Config,
    config_file: PathBuf,
    root: PathBuf,
    signers: Signers,
    required: bool,
}

/// How an install treats signatures and consent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consent {
    /// Grant what it asks without asking.
    pub yes: bool,
    /// Install a plugin no trusted signer signed.
    pub allow_unsigned: bool,
}

impl Installer {
    fn new(args: &HostArgs) -> anyhow::Result<Installer> {
        let workspace = args.workspace_dir()?;
        let config = Config::load(&workspace, args.config.as_deref())?.config;
        let root = crate::cli::setup::install_dir(&config)
            .context("no folder to install plugins into: set plugin_install_dir, or HOME")?;
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        Ok(Installer {
            signers: Signers::from_toml(&config.trust.signers)?,
            required: config.trust.signatures_required(config.policy.mode),
            config_file: operator_file(args)?,
            root,
            config,
        })
    }

    fn staging(&self) -> PathBuf {
        self.root.join(".staging")
    }

    /// Who signed `fetched`, or why it may not be installed.
    fn signer(&self, fetched: &Fetched, consent: Consent) -> anyhow::Result<Option<String>> {
        let verdict = match &fetched.package.signature {
            Some(sig) => signature::verify(
                sig,
                &fetched.package.manifest,
                &fetched.package.component,
                &fetched.manifest.name,
                &self.signers,
            ),
            None => Err(SignatureError::Unsigned),
        };
        match verdict {
            Ok(signer) => Ok(Some(signer.label())),
            Err(e @ (SignatureError::Unsigned | SignatureError::UnknownKey { .. })) => {
                if self.required {
                    bail!("not installed: {e}");
                }
                if !consent.allow_unsigned {
                    bail!(
                        "not installed: {}; pass --allow-unsigned to install it as an unsigned plugin",
                        match e {
                            SignatureError::Unsigned => "it carries no signature".to_string(),
                            other => other.to_string(),
                        }
                    );
                }
                errln!(
                    "warning: installing '{}' unsigned: {e}",
                    fetched.manifest.name
                );
                Ok(None)
            }
            Err(e) => bail!("not installed: {e}"),
        }
    }

    /// Compile `dir` once (the cache keeps the code for the first load),
    /// so a component that is not a plugin of its kind is refused here.
    fn compile_check(&self, dir: &Path) -> anyhow::Result<()> {
        let scratch = tempfile::tempdir()?;
        let mut host_config = PluginHostConfig::new(scratch.path());
        host_config.cache_dir = self.config.cache_dir.clone().or(host_config.cache_dir);
        let host = PluginHost::new(host_config)?;
        host.check(&PluginSource::Dir(dir.to_path_buf()))
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("not installed: {e}"))
    }

    /// Move `fetched` into the install folder, lock it and grant it.
    fn commit(
        &self,
        fetched: &Fetched,
        source: &str,
        signer: Option<String>,
    ) -> anyhow::Result<PathBuf> {
        let name = &fetched.manifest.name;
        let staged = self
            .staging()
            .join(format!("{name}.new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staged);
        std::fs::create_dir_all(&staged)?;
        let result = (|| {
            fetched.package.write_dir(&staged, &fetched.manifest)?;
            self.compile_check(&staged)?;
            let target = self.root.join(name);
            let old = self
                .staging()
                .join(format!("{name}.old-{}", std::process::id()));
            if target.exists() {
                std::fs::rename(&target, &old)?;
            }
            std::fs::rename(&staged, &target)?;
            let _ = std::fs::remove_dir_all(&old);
            let mut lock = Lockfile::read(&self.root)?;
            lock.put(Locked {
                name: name.clone(),
                version: fetched.manifest.version.clone(),
                source: source.to_string(),
                digest: fetched.digest.clone(),
                component_sha256: crate::plugin::integrity::sha256_hex(&fetched.package.component),
                manifest_sha256: crate::plugin::integrity::sha256_hex(&fetched.package.manifest),
                signer,
                installed_at: crate::time::now_rfc3339(),
                granted: fetched.manifest.capabilities.clone(),
            });
            lock.write(&self.root)?;
            crate::config::edit::grant_plugin(
                &self.config_file,
                name,
                &fetched.manifest.capabilities,
                &crate::plugin::integrity::sha256_hex(&fetched.package.component),
            )?;
            Ok::<_, anyhow::Error>(target)
        })();
        let _ = std::fs::remove_dir_all(&staged);
        result
    }

    /// What `manifest` asks beyond what its plugin is granted now.
    fn beyond_grant(&self, manifest: &Manifest) -> Vec<String> {
        self.config
            .policy
            .decide(manifest, PluginOrigin::ThirdParty)
            .denied
    }
}

/// The operator's yes to `asks`, by `--yes` or on the terminal.
fn consent_to(name: &str, asks: &[String], consent: Consent) -> anyhow::Result<()> {
    if asks.is_empty() {
        return Ok(());
    }
    outln!("'{name}' asks for what it is not granted now:");
    for ask in asks {
        outln!("  + {ask}");
    }
    if consent.yes {
        outln!("granted (--yes)");
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "not installed: granting this needs your consent; run again on a terminal, or pass --yes"
        );
    }
    out!("grant it? [y/N] ");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if !matches!(line.trim(), "y" | "Y" | "yes") {
        bail!("not installed: not granted");
    }
    Ok(())
}

pub async fn install(args: HostArgs, given: &str, consent: Consent) -> anyhow::Result<ExitCode> {
    let installer = Installer::new(&args)?;
    let mut reference = Reference::parse(given)?;
    let lock = Lockfile::read(&installer.root)?;
    // The lockfile wins over a tag that moved since the install.
    let locked = lock.plugins.iter().find(|p| p.source == given);
    if let (Reference::Oci(oci), Some(entry)) = (&reference, locked)
        && oci.digest.is_none()
    {
        let now = crate::supply::registry::Registry::new(oci)?
            .resolve()
            .await
            .ok();
        if let Some(now) = now.filter(|now| now.digest != entry.digest) {
            outln!(
                "{given} now points to {}, but sandcrab.lock fixes {}: installing the locked digest (`sandcrab plugins update {}` moves to the new one)",
                now.digest,
                entry.digest,
                entry.name
            );
        }
        reference = Reference::Oci(oci.at(&entry.digest));
    }
    let fetched = fetch::fetch(&reference, &installer.staging()).await?;
    let name = &fetched.manifest.name;
    if let Some(other) = lock.get(name).filter(|p| p.source != given) {
        bail!(
            "a plugin named '{name}' is already installed from {}; `sandcrab plugins remove {name}` first, or `sandcrab plugins update {name}`",
            other.source
        );
    }
    let signer = installer.signer(&fetched, consent)?;
    consent_to(name, &installer.beyond_grant(&fetched.manifest), consent)?;
    let target = installer.commit(&fetched, given, signer.clone())?;
    outln!(
        "installed {name} {} from {given} ({}) into {}, {}",
        fetched.manifest.version,
        fetched.digest,
        target.display(),
        match &signer {
            Some(s) => format!("signed by {s}"),
            None => "unsigned".to_string(),
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn update(args: HostArgs, name: &str, consent: Consent) -> anyhow::Result<ExitCode> {
    let installer = Installer::new(&args)?;
    let lock = Lockfile::read(&installer.root)?;
    let entry = lock
        .get(name)
        .with_context(|| {
            format!(
                "no plugin named '{name}' is installed (see {})",
                installer
                    .root
                    .join(crate::supply::lockfile::LOCKFILE)
                    .display()
            )
        })?
        .clone();
    let reference = match Reference::parse(&entry.source)? {
        Reference::Oci(oci) if oci.tag.is_some() => Reference::Oci(oci.by_tag()),
        Reference::Oci(_) => bail!(
            "'{name}' was installed by digest ({}); install another reference to change it",
            entry.source
        ),
        other => other,
    };
    let fetched = fetch::fetch(&reference, &installer.staging()).await?;
    if fetched.manifest.name != name {
        bail!(
            "{} now holds a plugin named '{}', not '{name}'; not updated",
            entry.source,
            fetched.manifest.name
        );
    }
    if fetched.digest == entry.digest {
        outln!(
            "{name} is up to date ({} at {})",
            entry.version,
            entry.digest
        );
        return Ok(ExitCode::SUCCESS);
    }
    let signer = installer.signer(&fetched, consent)?;
    outln!(
        "{name}: {} → {} ({} → {})",
        entry.version,
        fetched.manifest.version,
        entry.digest,
        fetched.digest
    );
    if signer != entry.signer {
        outln!(
            "  signer: {} → {}",
            entry.signer.as_deref().unwrap_or("unsigned"),
            signer.as_deref().unwrap_or("unsigned")
        );
    }
    consent_to(name, &installer.beyond_grant(&fetched.manifest), consent)?;
    installer.commit(&fetched, &entry.source, signer)?;
    outln!("updated {name} to {}", fetched.manifest.version);
    Ok(ExitCode::SUCCESS)
}

pub fn remove(args: HostArgs, name: &str) -> anyhow::Result<ExitCode> {
    let installer = Installer::new(&args)?;
    let mut lock = Lockfile::read(&installer.root)?;
    if !lock.remove(name) {
        bail!(
            "no plugin named '{name}' is installed in {}",
            installer.root.display()
        );
    }
    let dir = installer.root.join(name);
    if dir.exists() {
        let gone = installer
            .staging()
            .join(format!("{name}.removed-{}", std::process::id()));
        std::fs::create_dir_all(installer.staging())?;
        std::fs::rename(&dir, &gone)?;
        let _ = std::fs::remove_dir_all(&gone);
    }
    lock.write(&installer.root)?;
    crate::config::edit::remove_plugin_grant(&installer.config_file, name)?;
    outln!(
        "removed {name} (its folder, its lock entry and its grant in {})",
        installer.config_file.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn verify(args: HostArgs) -> anyhow::Result<ExitCode> {
    let installer = Installer::new(&args)?;
    let lock = Lockfile::read(&installer.root)?;
    let mut failed = 0;
    for entry in &lock.plugins {
        match verify_one(&installer, entry) {
            Ok(signed) => outln!(
                "ok: {} {} ({}), {signed}",
                entry.name,
                entry.version,
                entry.digest
            ),
            Err(e) => {
                failed += 1;
                outln!("FAILED: {}: {e}", entry.name);
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(&installer.root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && !name.starts_with('.') && lock.get(&name).is_none() {
                failed += 1;
                outln!(
                    "FAILED: {name}: in {} but not in sandcrab.lock; it is never loaded",
                    installer.root.display()
                );
            }
        }
    }
    outln!("{} installed, {failed} failed", lock.plugins.len());
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn verify_one(installer: &Installer, entry: &Locked) -> anyhow::Result<String> {
    let dir = installer.root.join(&entry.name);
    let (package, manifest) = crate::supply::Package::from_dir(&dir)?;
    for (what, bytes, locked) in [
        ("plugin.toml", &package.manifest, &entry.manifest_sha256),
        ("component", &package.component, &entry.component_sha256),
    ] {
        let found = crate::plugin::integrity::sha256_hex(bytes);
        if &found != locked {
            bail!(
                "its {what} changed after install (sha256 {found}; locked {locked}); `sandcrab plugins install {}` restores it",
                entry.source
            );
        }
    }
    match &package.signature {
        Some(sig) => {
            let signer = signature::verify(
                sig,
                &package.manifest,
                &package.component,
                &manifest.name,
                &installer.signers,
            )?;
            Ok(format!("signed by {}", signer.label()))
        }
        None if installer.required => bail!("{}", SignatureError::Unsigned),
        None => Ok("unsigned".into()),
    }
}
