//! Which plugin tools the model is offered: the profile's core tools (of
//! first-party plugins), every tool of every third-party plugin, then the
//! operator's `[agent.tools]` choice.
//!
//! ```toml
//! [agent.tools]
//! include = ["read_file", "grep", "word-count"]  # only these plugin tools (tool or plugin names)
//! exclude = ["shell", "spawn_agent"]             # never these (sandcrab's own tools too)
//! ```

use serde::Serialize;

use super::profile::Profile;
use crate::plugin::{PluginHost, PluginOrigin};
use crate::tools::ToolRegistry;

pub use crate::tools::ToolSelection;

/// Tools sandcrab itself provides (they win over a plugin tool of the same
/// name, which is then not offered).
pub fn host_tool_names() -> impl Iterator<Item = &'static str> {
    crate::jobs::TOOL_NAMES
        .iter()
        .chain(super::subagents::TOOL_NAMES)
        .chain(super::session_memory::tools::TOOL_NAMES)
        .copied()
}

/// Whether the model sees a plugin tool, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    Offered,
    /// A first-party tool the profile does not name.
    NotInProfile,
    /// `[agent.tools] include` is set and does not name it.
    NotIncluded,
    /// `[agent.tools] exclude` names it.
    Excluded,
    /// sandcrab's own tool of that name wins.
    HostTool,
    /// Another plugin provides this name.
    Shadowed,
}

impl Offer {
    /// A few words for `sandcrab plugins list`.
    pub fn describe(self) -> &'static str {
        match self {
            Offer::Offered => "offered",
            Offer::NotInProfile => "not in the profile",
            Offer::NotIncluded => "not in [agent.tools] include",
            Offer::Excluded => "[agent.tools] exclude",
            Offer::HostTool => "sandcrab's own tool of that name wins",
            Offer::Shadowed => "another plugin provides it",
        }
    }
}

/// The offered plugin tools, and a warning for each name in the selection
/// that matches nothing.
pub struct ToolSet {
    pub registry: ToolRegistry,
    pub warnings: Vec<String>,
}

/// Whether the tool `tool` of plugin `plugin` is offered.
pub fn offer(
    host: &PluginHost,
    profile: Option<&Profile>,
    selection: &ToolSelection,
    plugin: &str,
    tool: &str,
) -> Offer {
    let Some(owner) = host.tool_owner(tool).filter(|p| p.name() == plugin) else {
        return Offer::Shadowed;
    };
    if host_tool_names().any(|n| n == tool) {
        return Offer::HostTool;
    }
    if selection.excludes(tool, Some(plugin)) {
        return Offer::Excluded;
    }
    match selection.included(tool, Some(plugin)) {
        Some(false) => Offer::NotIncluded,
        Some(true) => Offer::Offered,
        None => {
            let core = profile.is_none_or(|p| p.info.tool_names.iter().any(|n| n == tool));
            if owner.origin == PluginOrigin::Builtin && !core {
                Offer::NotInProfile
            } else {
                Offer::Offered
            }
        }
    }
}

/// The plugin tools to offer with `profile` under `selection`.
pub fn plugin_tools(host: &PluginHost, profile: &Profile, selection: &ToolSelection) -> ToolSet {
    tools_for(host, Some(profile), selection, &|_| false)
}

/// Like [`plugin_tools`], where names `also_known` accepts (MCP servers
/// and their tools) are not reported as matching nothing.
pub fn plugin_tools_knowing(
    host: &PluginHost,
    profile: &Profile,
    selection: &ToolSelection,
    also_known: &dyn Fn(&str) -> bool,
) -> ToolSet {
    tools_for(host, Some(profile), selection, also_known)
}

/// The plugin tools `sandcrab mcp serve` offers: every loaded plugin
/// tool (no profile narrows the built-in ones) under the operator's
/// `selection`; names `also_known` accepts (the configured MCP servers
/// and their tools, served onward) are not reported as matching nothing.
pub fn served_tools(
    host: &PluginHost,
    selection: &ToolSelection,
    also_known: &dyn Fn(&str) -> bool,
) -> ToolSet {
    tools_for(host, None, selection, also_known)
}

fn tools_for(
    host: &PluginHost,
    profile: Option<&Profile>,
    selection: &ToolSelection,
    also_known: &dyn Fn(&str) -> bool,
) -> ToolSet {
    let mut registry = ToolRegistry::new();
    for (tool, plugin) in host.tool_owners() {
        if offer(host, profile, selection, plugin.name(), tool) == Offer::Offered {
            registry.register_plugin_tool(plugin, tool);
        }
    }
    let known = |name: &String| {
        host.tool_owner(name).is_some()
            || host.get(name).is_some()
            || host_tool_names().any(|n| n == name)
            || also_known(name)
    };
    let mut warnings = Vec::new();
    let lists = [
        ("include", selection.include.as_deref().unwrap_or_default()),
        ("exclude", selection.exclude.as_slice()),
    ];
    for (key, list) in lists {
        for name in list.iter().filter(|n| !known(n)) {
            warnings.push(format!(
                "[agent.tools] {key} names '{name}', which is neither a loaded tool nor a loaded plugin (see `sandcrab plugins list`)"
            ));
        }
    }
    for (tool, plugin) in host.tool_owners() {
        if host_tool_names().any(|n| n == tool) {
            warnings.push(format!(
                "plugin '{}': tool '{tool}' is not offered: sandcrab's own tool of that name takes precedence (rename the plugin's tool)",
                plugin.name()
            ));
        }
    }
    ToolSet { registry, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusion_matches_tool_or_plugin_names() {
        let s = ToolSelection {
            include: None,
            exclude: vec!["shell".into(), "word-count".into()],
        };
        assert!(s.excludes("shell", Some("coding-tools")));
        assert!(s.excludes("count", Some("word-count")));
        assert!(!s.excludes("grep", Some("coding-tools")));
        assert!(s.excludes("shell", None));
    }
}
