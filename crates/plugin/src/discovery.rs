//! Where plugins come from: the bundled first-party plugins, `--plugins`
//! directories, the config file's `plugin_dirs`, and
//! `<workspace>/.sandcrab/plugins`. A directory given may be one plugin
//! (it holds `plugin.toml`) or a folder of plugin directories.

use std::path::{Path, PathBuf};

use sandcrab_bundled_plugins::BundledPlugin;

use super::policy::PluginOrigin;

/// One plugin to load.
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// Embedded in the binary (first-party).
    Bundled(&'static BundledPlugin),
    /// A plugin directory (third-party).
    Dir(PathBuf),
}

impl PluginSource {
    /// Where the plugin's manifest is, for messages.
    pub fn manifest_path(&self) -> PathBuf {
        match self {
            PluginSource::Bundled(b) => PathBuf::from(format!("builtin:{}/plugin.toml", b.name)),
            PluginSource::Dir(dir) => dir.join("plugin.toml"),
        }
    }

    /// First-party or third-party.
    pub fn origin(&self) -> PluginOrigin {
        match self {
            PluginSource::Bundled(_) => PluginOrigin::Builtin,
            PluginSource::Dir(_) => PluginOrigin::ThirdParty,
        }
    }
}

/// The bundled first-party plugins.
pub fn bundled() -> Vec<PluginSource> {
    sandcrab_bundled_plugins::BUNDLED
        .iter()
        .map(PluginSource::Bundled)
        .collect()
}

/// The workspace's own plugin folder.
pub fn workspace_plugin_dir(workspace: &Path) -> PathBuf {
    workspace.join(".sandcrab").join("plugins")
}

/// Plugin directories found under `roots` (each a plugin directory or a
/// folder of them), in the order given, sorted within a folder; hidden
/// folders (an install's `.staging`) are not plugins. Roots that
/// do not exist are skipped; a root that is neither is returned as is so
/// loading reports the missing manifest.
pub fn scan(roots: &[PathBuf]) -> Vec<PluginSource> {
    let mut found = Vec::new();
    for root in roots {
        if root.join("plugin.toml").exists() {
            found.push(PluginSource::Dir(root.clone()));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(root) else {
            if root.exists() {
                found.push(PluginSource::Dir(root.clone()));
            }
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_dir()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
            })
            .collect();
        dirs.sort();
        found.extend(dirs.into_iter().map(PluginSource::Dir));
    }
    found
}
