//! `sandcrab plugins remove | verify`: what is installed, taken out or
//! checked again as a load would check it.

use std::process::ExitCode;

use anyhow::bail;

use super::installer::Installer;
use crate::cli::setup::HostArgs;
use crate::supply::lockfile::{Locked, Lockfile};

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

/// The check a load makes, on the installed folder of `entry`.
fn verify_one(installer: &Installer, entry: &Locked) -> anyhow::Result<String> {
    let dir = installer.root.join(&entry.name);
    let (package, _) = crate::supply::Package::from_dir(&dir)?;
    let check = crate::supply::admission::SignedInstalls {
        signers: installer.signers.clone(),
        required: installer.required,
        install_dirs: vec![installer.root.clone()],
    };
    match check.check(&dir, &package.manifest, &package.component) {
        Ok(Some(signer)) => Ok(format!("signed by {signer}")),
        Ok(None) => Ok("unsigned".into()),
        Err(reason) => bail!("{reason}"),
    }
}
