//! The registry of what the host keeps ([`crate::kept`]), computed from
//! the resolved configuration and installed once at start: the defaults
//! before any command runs, then each file and folder the operator's
//! configuration and flags name.

use std::path::{Path, PathBuf};

use crate::config::{Config, LoadedConfig};
use crate::kept::{Item, Registry};
use crate::plugin::discovery::PluginSource;

/// What every command keeps before it reads any configuration: the
/// user's sandcrab folders (the token and data folders created private
/// now, so they are covered before anything is written into them) and
/// the user's credential stores.
pub fn install_defaults() {
    let registry = Registry::defaults();
    let folders = registry
        .entries()
        .iter()
        .filter(|e| matches!(e.item, Item::BridgeTokens | Item::DataDir))
        .map(|e| e.path.clone())
        .chain(crate::user_files::keys_dir());
    for folder in folders {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder);
    }
    crate::kept::install(registry);
}

/// Where the trusted plugins of this start come from.
pub struct PluginOrigins<'a> {
    /// The plugin folders (`plugin_dirs`, `--plugins`, a trusted
    /// project's `.sandcrab/plugins`).
    pub roots: &'a [PathBuf],
    /// Each plugin found in them.
    pub sources: &'a [PluginSource],
    /// Where a trusted project's links lead (its plugins behind a link).
    pub link_targets: &'a [PathBuf],
}

/// The registry for a command that loaded `loaded` (with `config` after
/// its flags) and loads plugins from `plugins`.
pub fn registry_for(config: &Config, loaded: &LoadedConfig, plugins: &PluginOrigins) -> Registry {
    let mut registry = Registry::defaults();
    let file = loaded
        .trusted_path
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(crate::user_files::config_file_shown);
    let named = |key: &str| format!("{file}: {key}");
    if let Some(path) = &loaded.trusted_path {
        registry.keep(Item::OperatorConfig, path, "--config");
    }
    if let Some(rules) = &config.approvals.rules_file {
        let base = loaded
            .trusted_path
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        registry.keep(
            Item::RulesFile,
            &base.join(rules),
            &named("[approvals] rules_file"),
        );
    }
    if let Some(db) = &config.store.path {
        for part in crate::store::database_files(db) {
            registry.keep(Item::SessionDatabase, &part, &named("[store] path"));
        }
    }
    if let Some(password) = &config.store.password_file {
        registry.keep(
            Item::StorePassword,
            password,
            &named("[store] password_file"),
        );
    }
    if let Some(ca) = &config.store.ca_file {
        registry.keep(Item::CaFile, ca, &named("[store] ca_file"));
    }
    for ca in &config.policy.http_ca_files {
        registry.keep(Item::CaFile, ca, &named("[policy] http_ca_files"));
    }
    if let Some(cache) = &config.cache_dir {
        registry.keep(Item::ComponentCache, cache, &named("cache_dir"));
        registry.keep(
            Item::HostKeys,
            &crate::user_files::cache_key_file(cache),
            &named("cache_dir"),
        );
    }
    for path in &config.policy.kept_paths {
        registry.keep(
            Item::OperatorNamed,
            &expand_home(path),
            &named("[policy] kept_paths"),
        );
    }
    for path in trusted_plugin_paths(plugins) {
        registry.keep(Item::TrustedPlugins, &path, "plugin folders");
    }
    registry
}

/// `~/x` as the home directory's `x`.
fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), crate::user_files::home()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

/// Everything third-party plugins are loaded from, as it resolves: each
/// plugin folder (whether it exists yet or not: a plugin written into it
/// later would load at the next start), each plugin directory, its
/// manifest and its component, and where a trusted project's links lead.
fn trusted_plugin_paths(plugins: &PluginOrigins) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = plugins.roots.to_vec();
    let mut found = Vec::new();
    for source in plugins.sources {
        let PluginSource::Dir(dir) = source else {
            continue;
        };
        found.push(dir.clone());
        found.push(dir.join("plugin.toml"));
        if let Ok(manifest) = crate::plugin::Manifest::read(dir) {
            found.push(dir.join(manifest.wasm));
        }
    }
    found.extend(plugins.link_targets.iter().cloned());
    paths.extend(found.into_iter().filter_map(|p| p.canonicalize().ok()));
    paths
}
