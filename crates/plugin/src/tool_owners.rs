//! Which plugin provides each tool name. Plugins claim their tools in load
//! order (first-party first); a later plugin's tool of a name already
//! taken is refused, unless the operator names the override in
//! `[policy.plugins.NAME] override_tools`, in which case it replaces the
//! earlier one. Nothing is replaced silently.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::loaded::LoadedPlugin;
use super::policy::Policy;

/// Tool name → the plugin that provides it.
pub type Owners = BTreeMap<String, Arc<LoadedPlugin>>;

/// Something to tell the operator about one plugin's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The plugin whose tool it is about.
    pub plugin: String,
    /// A refused tool (true) or an override that took effect (false).
    pub refused: bool,
    pub message: String,
}

/// Resolve the owners of every tool of `plugins` (in load order).
pub fn resolve(plugins: &[Arc<LoadedPlugin>], policy: &Policy) -> (Owners, Vec<Claim>) {
    let mut owners: Owners = BTreeMap::new();
    let mut claims = Vec::new();
    for plugin in plugins {
        let overrides = policy
            .plugins
            .get(plugin.name())
            .map(|g| g.override_tools.as_slice())
            .unwrap_or_default();
        for tool in &plugin.tools {
            let Some(earlier) = owners.get(&tool.name) else {
                owners.insert(tool.name.clone(), plugin.clone());
                continue;
            };
            let earlier = earlier.name().to_string();
            if overrides.contains(&tool.name) {
                claims.push(Claim {
                    plugin: plugin.name().to_string(),
                    refused: false,
                    message: format!(
                        "{}: plugin '{}': tool '{}' replaces the one of plugin '{earlier}' ([policy.plugins.{}] override_tools)",
                        plugin.source.display(),
                        plugin.name(),
                        tool.name,
                        plugin.name()
                    ),
                });
                owners.insert(tool.name.clone(), plugin.clone());
            } else {
                claims.push(Claim {
                    plugin: plugin.name().to_string(),
                    refused: true,
                    message: format!(
                        "{}: plugin '{}': tool '{}' is not loaded: plugin '{earlier}' already provides it (to replace that one, add override_tools = [\"{}\"] to [policy.plugins.{}] in {})",
                        plugin.source.display(),
                        plugin.name(),
                        tool.name,
                        tool.name,
                        plugin.name(),
                        crate::user_files::config_file_shown()
                    ),
                });
            }
        }
    }
    (owners, claims)
}
