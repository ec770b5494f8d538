//! `sandcrab plugins install | update`: plugins from OCI registries,
//! archives and HTTPS downloads, into the install folder
//! (`plugin_install_dir`, else `<data dir>/plugins`) and its
//! `sandcrab.lock`. Each is checked against the operator's signers, loaded
//! once in staging before it is moved in (so nothing broken or
//! half-written is ever in the folder), and its capabilities granted only
//! with the operator's consent; an update shows what it asks beyond what
//! was granted, and a rollback or a change of signer needs the operator's
//! word.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::installer::{Consent, Installer};
use crate::cli::setup::HostArgs;
use crate::supply::Reference;
use crate::supply::fetch::{self, Fetched};
use crate::supply::lockfile::{Locked, Lockfile};

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
    outln!("(a yes writes that grant into your configuration)");
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
    let lock = Lockfile::read(&installer.root)?;
    let (source, reference) = what_to_fetch(&installer, &lock, given).await?;
    let fetched = fetch::fetch(&reference, &installer.staging(), &installer.http).await?;
    let name = &fetched.manifest.name;
    let installed = lock.get(name);
    if let Some(other) = installed.filter(|p| p.source != source) {
        bail!(
            "a plugin named '{name}' is already installed from {}; to take it from here instead, `sandcrab plugins remove {name}` first",
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
        succession(entry, &fetched, &signer, consent)?;
    }
    let fresh = installed.is_none();
    let staged = stage_with_consent(&installer, &lock, &fetched, fresh, consent).await?;
    if fresh && installer.config.policy.plugins.contains_key(name) {
        outln!(
            "replacing the [policy.plugins.{name}] table in {} with this plugin's grant (what was there was not granted to it)",
            installer.config_file.display()
        );
    }
    let tools = staged.tools.clone();
    let target = installer.commit(staged, &fetched, &source, signer.clone(), fresh)?;
    outln!(
        "installed {name} {} from {source} ({}) into {}, {}; tools: {}",
        fetched.manifest.version,
        fetched.digest,
        target.display(),
        match &signer {
            Some(s) => format!("signed by {s}"),
            None => "unsigned".to_string(),
        },
        if tools.is_empty() {
            "none".to_string()
        } else {
            tools.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The source as it is recorded (a local one where it really is, so
/// `update` never reads another folder of the same relative name), and
/// what to fetch for it: the digest the lockfile fixes, when the source
/// is a tag installed before (the lockfile wins over a tag that moved).
async fn what_to_fetch(
    installer: &Installer,
    lock: &Lockfile,
    given: &str,
) -> anyhow::Result<(String, Reference)> {
    let mut reference = Reference::parse(given)?;
    if let Reference::Local(path) = &reference {
        let real = path
            .canonicalize()
            .with_context(|| format!("{}: cannot be read", path.display()))?;
        reference = Reference::Local(real);
    }
    let source = reference.to_string();
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
    Ok((source, reference))
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
    succession(&entry, &fetched, &signer, consent)?;
    let staged = stage_with_consent(&installer, &lock, &fetched, false, consent).await?;
    installer.commit(staged, &fetched, &entry.source, signer, false)?;
    outln!("updated {name} to {}", fetched.manifest.version);
    Ok(ExitCode::SUCCESS)
}

/// Stage `fetched`, refuse it if it declares a tool another installed
/// plugin offers, and ask the operator for what it asks beyond its grant
/// (beyond a third-party plugin's defaults when `fresh`): what install and
/// update both do before they commit.
async fn stage_with_consent(
    installer: &Installer,
    lock: &Lockfile,
    fetched: &Fetched,
    fresh: bool,
    consent: Consent,
) -> anyhow::Result<super::installer::Staged> {
    let name = &fetched.manifest.name;
    let staged = installer.stage(fetched).await?;
    let taken = installer.taken_tools(lock, name, &staged);
    if !taken.is_empty() {
        bail!(
            "refused: '{name}' declares tools another installed plugin offers: {}; a plugin never takes another's tools (remove that one first)",
            taken.join(", ")
        );
    }
    consent_to(
        name,
        &installer.beyond_grant(&fetched.manifest, fresh),
        consent,
    )?;
    Ok(staged)
}

/// Say what changes from the installed `entry` to `fetched` (signed by
/// `signer`), and whether it may follow: a rollback to an older release,
/// or a release the installed one's signer did not sign, is what a moved
/// tag or a taken-over account looks like, so each needs the operator's
/// word.
fn succession(
    entry: &Locked,
    fetched: &Fetched,
    signer: &Option<String>,
    consent: Consent,
) -> anyhow::Result<()> {
    outln!(
        "{}: {} → {} ({} → {})",
        entry.name,
        entry.version,
        fetched.manifest.version,
        entry.digest,
        fetched.digest
    );
    if *signer != entry.signer {
        outln!(
            "  signer: {} → {}",
            entry.signer.as_deref().unwrap_or("unsigned"),
            signer.as_deref().unwrap_or("unsigned")
        );
    }
    if is_older(&fetched.manifest.version, &entry.version) && !consent.allow_downgrade {
        bail!(
            "refused: {} is older than the installed {} (a rollback); pass --allow-downgrade if that is meant",
            fetched.manifest.version,
            entry.version
        );
    }
    let key_of = crate::supply::signers::key_of_label;
    let same_key = signer.as_deref().map(key_of) == entry.signer.as_deref().map(key_of);
    if entry.signer.is_some() && !same_key && !consent.allow_signer_change {
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
