//! `sandcrab plugins pin NAME`: record the SHA-256 of a plugin's component
//! in the operator's configuration. Nothing of the plugin runs: the hash is
//! of the file as it is on disk now.

use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cli::setup::HostArgs;
use crate::config::Config;
use crate::plugin::{PluginSource, component_digest};

pub fn pin(args: HostArgs, name: &str) -> anyhow::Result<ExitCode> {
    let workspace = args.workspace_dir()?;
    let loaded = Config::load(&workspace, args.config.as_deref())?;
    let (manifest_path, manifest, sha) = find(&args, name)?;
    let file = operator_file(&args)?;
    let previous = loaded
        .config
        .policy
        .plugins
        .get(name)
        .and_then(|g| g.sha256.clone());
    crate::config::edit::pin_plugin(&file, name, &sha)?;
    outln!(
        "pinned: {} {} ({}) to sha256 {sha} in {}",
        manifest.name,
        manifest.version,
        manifest_path.display(),
        file.display()
    );
    if let Some(old) = previous.filter(|old| !old.eq_ignore_ascii_case(&sha)) {
        outln!("  (was {old})");
    }
    Ok(ExitCode::SUCCESS)
}

/// The third-party plugin `name` among the sources `args` name: its
/// manifest path, manifest and component SHA-256 (read, not run).
pub(super) fn find(
    args: &HostArgs,
    name: &str,
) -> anyhow::Result<(std::path::PathBuf, crate::plugin::Manifest, String)> {
    let workspace = args.workspace_dir()?;
    let loaded = Config::load(&workspace, args.config.as_deref())?;
    let sources = args.sources(
        &workspace,
        &loaded.config,
        loaded.workspace_plugins_allowed(),
    );
    for source in sources.iter().filter(|s| matches!(s, PluginSource::Dir(_))) {
        // Sources that cannot be read are someone else's problem here.
        if let Ok((manifest, sha)) = component_digest(source)
            && manifest.name == name
        {
            return Ok((source.manifest_path(), manifest, sha));
        }
    }
    // A built-in plugin has no pin or grant to give: it is part of the
    // binary, and it gets what its manifest asks.
    let builtin = sources.iter().any(|s| match s {
        PluginSource::Bundled(b) => {
            crate::plugin::Manifest::parse(b.manifest, std::path::Path::new(b.name))
                .is_ok_and(|m| m.name == name)
        }
        PluginSource::Dir(_) => false,
    });
    if builtin {
        bail!(
            "'{name}' is built into sandcrab: it is pinned by the binary itself and gets what its manifest asks; only third-party plugins are pinned and granted"
        );
    }
    bail!(
        "no third-party plugin named '{name}' was found (looked in --plugins, plugin_dirs and the trusted workspace's .sandcrab/plugins; see `sandcrab plugins list`)"
    )
}

/// The operator's configuration file a command writes: `--config`, else
/// the user's.
pub(super) fn operator_file(args: &HostArgs) -> anyhow::Result<std::path::PathBuf> {
    match &args.config {
        Some(file) => Ok(file.clone()),
        None => Config::user_file().context(
            "no user configuration directory (set HOME or XDG_CONFIG_HOME, or pass --config)",
        ),
    }
}
