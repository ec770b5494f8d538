//! A provider profile loaded from its plugin: facts, base instructions, and
//! the tool subset it offers.

use std::sync::Arc;

use crate::plugin::{LoadedPlugin, PluginHost, PluginKind, ProfileInfo};
use crate::tools::ToolRegistry;

/// A loaded profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub info: ProfileInfo,
    pub base_instructions: String,
}

/// Why a profile could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no profile plugin provides profile '{0}' (see `sandcrab plugins list`)")]
    NotFound(String),
    #[error("profile plugin '{plugin}' failed: {message}")]
    Plugin { plugin: String, message: String },
}

impl Profile {
    /// Load the profile `id` from the host's profile plugins.
    pub async fn load(host: &PluginHost, id: &str) -> Result<Profile, ProfileError> {
        for plugin in host
            .plugins()
            .iter()
            .filter(|p| p.kind() == PluginKind::Profile)
        {
            let info = plugin
                .profile_info()
                .await
                .map_err(|e| plugin_error(plugin, e))?;
            if info.id == id {
                let base_instructions = plugin
                    .base_instructions()
                    .await
                    .map_err(|e| plugin_error(plugin, e))?;
                return Ok(Profile {
                    info,
                    base_instructions,
                });
            }
        }
        Err(ProfileError::NotFound(id.to_string()))
    }

    /// The profile's tools from `all` (the tools it names that exist).
    pub fn tools(&self, all: &ToolRegistry) -> ToolRegistry {
        all.subset(&self.info.tool_names)
    }
}

fn plugin_error(plugin: &Arc<LoadedPlugin>, e: impl std::fmt::Display) -> ProfileError {
    ProfileError::Plugin {
        plugin: plugin.name().to_string(),
        message: e.to_string(),
    }
}
