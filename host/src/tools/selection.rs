//! Which tools the operator offers the model: `[agent.tools]`.

use serde::Deserialize;

/// The operator's `[agent.tools]` table.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolSelection {
    /// When set, only the plugin tools named here, by tool name or by
    /// plugin name, are offered (any loaded tool may be named, including a
    /// first-party tool the profile leaves out).
    pub include: Option<Vec<String>>,
    /// Tools never offered, by tool or plugin name. This also removes
    /// sandcrab's own job and subagent tools.
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl ToolSelection {
    /// Whether the tool `tool` of plugin `plugin` is excluded.
    pub fn excludes(&self, tool: &str, plugin: Option<&str>) -> bool {
        names(&self.exclude, tool, plugin)
    }

    /// Whether `include` names the tool `tool` of `source` (None when
    /// `include` is not set).
    pub fn included(&self, tool: &str, source: Option<&str>) -> Option<bool> {
        self.include
            .as_ref()
            .map(|include| names(include, tool, source))
    }

    /// Whether the tool `tool` of `source` (a plugin or an MCP server) may
    /// be offered: not excluded, and included when `include` is set.
    pub fn admits(&self, tool: &str, source: Option<&str>) -> bool {
        !self.excludes(tool, source)
            && self
                .include
                .as_ref()
                .is_none_or(|include| names(include, tool, source))
    }
}

fn names(list: &[String], tool: &str, plugin: Option<&str>) -> bool {
    list.iter().any(|n| n == tool || Some(n.as_str()) == plugin)
}
