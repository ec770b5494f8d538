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
    #[error("no profile plugin provides profile '{id}' (the profiles here: {known})")]
    NotFound { id: String, known: String },
    #[error("profile plugin '{plugin}' failed: {message}")]
    Plugin { plugin: String, message: String },
}

impl Profile {
    /// Load the profile `id` from the host's profile plugins.
    pub async fn load(host: &PluginHost, id: &str) -> Result<Profile, ProfileError> {
        let mut known = Vec::new();
        for plugin in host
            .plugins()
            .iter()
            .filter(|p| p.kind() == PluginKind::Profile)
        {
            let info = plugin
                .profile_info()
                .await
                .map_err(|e| plugin_error(plugin, e))?;
            known.push(info.id.clone());
            if info.id == id {
                validate(&info).map_err(|why| {
                    plugin_error(plugin, format!("it returned an invalid profile: {why}"))
                })?;
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
        Err(ProfileError::NotFound {
            id: id.to_string(),
            known: known.join(", "),
        })
    }

    /// The profile's tools from `all` (the tools it names that exist).
    pub fn tools(&self, all: &ToolRegistry) -> ToolRegistry {
        all.subset(&self.info.tool_names)
    }
}

/// A profile the host can use: a context window, tool names that could
/// exist.
fn validate(info: &ProfileInfo) -> Result<(), String> {
    if info.context_window == 0 {
        return Err("context window is 0".into());
    }
    if let Some(bad) = info.tool_names.iter().find(|n| {
        n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    }) {
        return Err(format!("tool name '{bad}' is not valid"));
    }
    Ok(())
}

fn plugin_error(plugin: &Arc<LoadedPlugin>, e: impl std::fmt::Display) -> ProfileError {
    ProfileError::Plugin {
        plugin: plugin.name().to_string(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ProfileInfo {
        ProfileInfo {
            id: "p".into(),
            default_model: "m".into(),
            context_window: 1000,
            parallel_tool_calls: true,
            tool_names: vec!["read_file".into()],
            project_doc_files: vec![],
            max_output_tokens: 0,
        }
    }

    #[test]
    fn garbage_profiles_are_refused_with_the_reason() {
        assert!(validate(&info()).is_ok());
        let mut bad = info();
        bad.context_window = 0;
        assert!(validate(&bad).unwrap_err().contains("context window"));
        let mut bad = info();
        bad.tool_names.push("Read File".into());
        assert!(validate(&bad).unwrap_err().contains("'Read File'"));
    }
}
