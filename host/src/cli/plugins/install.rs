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
    http: crate::supply::download::Http,
}

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

impl Installer {
    fn new(args: &HostArgs) -> anyhow::Result<Installer> {
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

    fn staging(&self) -> PathBuf {
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
                    bail!("refused: {e}");
                }
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

    /// Move `fetched` into the install folder, lock it and grant it (a
    /// fresh install's grant replaces whatever table had its name).
    fn commit(
        &self,
        fetched: &Fetched,
        source: &str,
        signer: Option<String>,
        fresh: bool,
    ) -> anyhow::Result<PathBuf> {
        let name = &fetched.manifest.name;
        let staged = self
            .staging()
            .join(format!("{name}.new-{}", std::process::id()));
        crate::supply::files::plain_dir(&self.staging())?;
        let _ = std::fs::remove_dir_all(&staged);
        std::fs::create_dir(&staged)?;
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
            // Granted for this component, and pinned to it: the pin is what
            // locked mode and its HTTP grants ask of a third-party plugin.
            let sha = crate::plugin::integrity::sha256_hex(&fetched.package.component);
            if fresh {
                crate::config::edit::remove_plugin_grant(&self.config_file, name)?;
            }
            crate::config::edit::grant_plugin(
                &self.config_file,
                name,
                &fetched.manifest.capabilities,
                &sha,
            )?;
            crate::config::edit::pin_plugin(&self.config_file, name, &sha)?;
            Ok::<_, anyhow::Error>(target)
        })();
        let _ = std::fs::remove_dir_all(&staged);
        result
    }

    /// What `manifest` asks beyond what its plugin is granted now; for a
    /// fresh install, beyond what a third-party plugin gets by default (a
    /// grant left in the file under its name is not this plugin's).
    fn beyond_grant(&self, manifest: &Manifest, fresh: bool) -> Vec<String> {
        let mut policy = self.config.policy.clone();
        if fresh {
            policy.plugins.remove(&manifest.name);
        }
        policy.decide(manifest, PluginOrigin::ThirdParty).denied
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
    // A local source is recorded where it really is, so `update` never
    // reads another folder that happens to have the same relative name.
    if let Reference::Local(path) = &reference {
        let real = path
            .canonicalize()
            .with_context(|| format!("{}: cannot be read", path.display()))?;
        reference = Reference::Local(real);
    }
    let source = reference.to_string();
    let lock = Lockfile::read(&installer.root)?;
    // The lockfile wins over a tag that moved since the install.
    let locked = lock.plugins.iter().find(|p| p.source == source);
    if let (Reference::Oci(oci), Some(entry)) = (&reference, locked)
        && oci.digest.is_none()
    {
        let now = crate::supply::registry::Registry::new(oci, &installer.http)?
            .resolve()
            .await
            .ok();
        if let Some(now) = now.filter(|now| now.digest != entry.digest) {
            outln!(
                "{source} now points to {}, but sandcrab.lock fixes {}: installing the locked digest (`sandcrab plugins update {}` moves to the new one)",
                now.digest,
                entry.digest,
                entry.name
            );
        }
        reference = Reference::Oci(oci.at(&entry.digest));
    }
    let fetched = fetch::fetch(&reference, &installer.staging(), &installer.http).await?;
    let name = &fetched.manifest.name;
    let installed = lock.get(name);
    if let Some(other) = installed.filter(|p| p.source != source) {
        bail!(
            "a plugin named '{name}' is already installed from {}; `sandcrab plugins remove {name}` first, or `sandcrab plugins update {name}`",
            other.source
        );
    }
    if installed.is_none() && installer.root.join(name).exists() {
        bail!(
            "{} exists but sandcrab.lock does not name it (put there by hand?); move it out of the install folder first",
            installer.root.join(name).display()
        );
    }
    let signer = installer.signer(&fetched, consent)?;
    // The same source again, with other content (a local folder rebuilt,
    // a download's new digest): an update, with an update's checks.
    if let Some(entry) = installed.filter(|e| e.digest != fetched.digest) {
        outln!(
            "{name}: {} → {} ({} → {})",
            entry.version,
            fetched.manifest.version,
            entry.digest,
            fetched.digest
        );
        succession(entry, &fetched, &signer, consent)?;
    }
    let fresh = installed.is_none();
    consent_to(
        name,
        &installer.beyond_grant(&fetched.manifest, fresh),
        consent,
    )?;
    if fresh && installer.config.policy.plugins.contains_key(name) {
        outln!(
            "replacing the [policy.plugins.{name}] table in {} with this plugin's grant (what was there was not granted to it)",
            installer.config_file.display()
        );
    }
    let target = installer.commit(&fetched, &source, signer.clone(), fresh)?;
    outln!(
        "installed {name} {} from {source} ({}) into {}, {}",
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
        Reference::Oci(oci) if oci.tag.is_some() && oci.digest.is_none() => {
            Reference::Oci(oci.by_tag())
        }
        Reference::Oci(_) => bail!(
            "'{name}' was installed by digest ({}); install another reference to change it",
            entry.source
        ),
        other => other,
    };
    let fetched = fetch::fetch(&reference, &installer.staging(), &installer.http).await?;
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
    succession(&entry, &fetched, &signer, consent)?;
    if signer != entry.signer {
        outln!(
            "  signer: {} → {}",
            entry.signer.as_deref().unwrap_or("unsigned"),
            signer.as_deref().unwrap_or("unsigned")
        );
    }
    consent_to(
        name,
        &installer.beyond_grant(&fetched.manifest, false),
        consent,
    )?;
    installer.commit(&fetched, &entry.source, signer, false)?;
    outln!("updated {name} to {}", fetched.manifest.version);
    Ok(ExitCode::SUCCESS)
}

/// Whether `fetched` (signed by `signer`) may follow the installed
/// `entry`: a rollback to an older release, or a release the installed
/// one's signer did not sign, is what a moved tag or a taken-over account
/// looks like, so each needs the operator's word.
fn succession(
    entry: &Locked,
    fetched: &Fetched,
    signer: &Option<String>,
    consent: Consent,
) -> anyhow::Result<()> {
    if is_older(&fetched.manifest.version, &entry.version) && !consent.allow_downgrade {
        bail!(
            "refused: {} is older than the installed {} (a rollback); pass --allow-downgrade if that is meant",
            fetched.manifest.version,
            entry.version
        );
    }
    if entry.signer.is_some() && *signer != entry.signer && !consent.allow_signer_change {
        bail!(
            "refused: {} signed the installed version, but {} signed this one; pass --allow-signer-change if that is meant",
            entry.signer.as_deref().unwrap_or("unsigned"),
            signer.as_deref().unwrap_or("nobody you trust")
        );
    }
    Ok(())
}

/// Whether version `new` is lower than `old`, compared as dot-separated
/// numbers (a suffix after '-' or '+' ignored); false when either is not.
fn is_older(new: &str, old: &str) -> bool {
    let numbers = |v: &str| -> Option<Vec<u64>> {
        v.split(['-', '+'])
            .next()?
            .split('.')
            .map(|part| part.parse().ok())
            .collect()
    };
    match (numbers(new), numbers(old)) {
        (Some(new), Some(old)) => new < old,
        _ => false,
    }
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
        crate::supply::files::plain_dir(&installer.staging())?;
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
    let verdict = match &package.signature {
        Some(sig) => signature::verify(
            sig,
            &package.manifest,
            &package.component,
            &manifest.name,
            &installer.signers,
        ),
        None => Err(SignatureError::Unsigned),
    };
    // The same verdict a load reaches.
    match verdict {
        Ok(signer) => Ok(format!("signed by {}", signer.label())),
        Err(SignatureError::Unsigned) if !installer.required => Ok("unsigned".into()),
        Err(e @ SignatureError::UnknownKey { .. }) if !installer.required => {
            Ok(format!("loads as unsigned: {e}"))
        }
        Err(e) => bail!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_older_version_is_told_apart() {
        assert!(super::is_older("0.1.0", "0.2.0"));
        assert!(super::is_older("1.9", "1.10"));
        assert!(!super::is_older("0.3.0", "0.2.0"));
        assert!(!super::is_older("0.2.0-rc1", "0.2.0"));
        assert!(!super::is_older("next", "0.2.0"));
    }
}
