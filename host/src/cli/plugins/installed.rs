//! `sandcrab plugins remove | verify`: what is installed, taken out or
//! checked again as a load would check it.

use std::process::ExitCode;

use anyhow::bail;

use super::installer::Installer;
use crate::cli::setup::HostArgs;
use crate::supply::lockfile::{Locked, Lockfile};
use crate::supply::signature::{self, SignatureError};

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
