//! `sandcrab plugins grant NAME`: give a third-party plugin what its
//! manifest asks for now, bound to its component: the operator's
//! `[policy.plugins.NAME]` gets the requested capabilities and the
//! component's SHA-256. A later component gets only these grants, and
//! anything more it asks for is shown as a change until granted again.
//! Nothing of the plugin runs.

use std::process::ExitCode;

use super::pin::{find, operator_file};
use crate::cli::setup::HostArgs;

pub fn grant(args: HostArgs, name: &str) -> anyhow::Result<ExitCode> {
    let (manifest_path, manifest, sha) = find(&args, name)?;
    let file = operator_file(&args)?;
    crate::config::edit::grant_plugin(&file, name, &manifest.capabilities, &sha)?;
    let c = &manifest.capabilities;
    outln!(
        "granted {} {} ({}), component sha256 {sha}, in {}:",
        manifest.name,
        manifest.version,
        manifest_path.display(),
        file.display()
    );
    outln!("  workspace: {}", c.workspace);
    for p in &c.paths {
        outln!("  path:      {} ({})", p.path.display(), p.access);
    }
    if !c.programs.is_empty() {
        outln!("  programs:  {}", c.programs.join(", "));
    }
    if !c.env.is_empty() {
        outln!("  env:       {}", c.env.join(", "));
    }
    outln!(
        "  network:   {}",
        match c.network {
            crate::plugin::manifest::NetworkUse::No => "no",
            crate::plugin::manifest::NetworkUse::Always => "yes",
            crate::plugin::manifest::NetworkUse::OnRequest =>
                "on request (each call, by rule or approval)",
        }
    );
    for origin in &c.http {
        outln!("  http:      {origin}");
    }
    if !c.http.is_empty() {
        outln!(
            "  (a credential for an origin is yours to add: [policy.plugins.{}.credentials.\"ORIGIN\"] header = \"Authorization\", value = \"Bearer ${{VAR}}\")",
            manifest.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
