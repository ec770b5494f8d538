//! The typed shapes of the sections other parts of sandcrab resolve:
//! `[agent]` and `[jobs]` (the others are typed where they are used:
//! `[truncation]` by the tools, `[summarization]` by compaction). Each
//! file is deserialized into them once, when it is read, so a mistyped key
//! fails at start naming the file.

use serde::Deserialize;

use crate::tools::ToolSelection;

/// `[agent]`: limits and options of the agent loop (every key optional;
/// absent keys keep the session defaults).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentToml {
    pub max_turns: Option<u32>,
    pub max_tool_rounds: Option<u32>,
    pub loop_detection_window: Option<usize>,
    pub max_subagent_depth: Option<usize>,
    pub max_subagents: Option<usize>,
    pub subagent_max_turns: Option<u32>,
    pub subagent_models: Option<Vec<String>>,
    /// The user's instructions, the last prompt layer.
    pub instructions: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub reasoning_effort: Option<String>,
    /// Which tools the model is offered (`[agent.tools]`).
    pub tools: Option<ToolSelection>,
}

impl AgentToml {
    /// The tool selection (none set: every tool the profile offers).
    pub fn tool_selection(&self) -> ToolSelection {
        self.tools.clone().unwrap_or_default()
    }
}

/// `[approvals]`: the mode for calls no rule speaks to, and the rules.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsToml {
    pub mode: Option<crate::approvals::Mode>,
    /// `[[approvals.rules]]`, accepted here; each file's rules are read
    /// with their lines by [`crate::approvals::Rules::parse`] when the file
    /// is loaded, into `parsed`.
    #[serde(default)]
    pub rules: Vec<toml::Value>,
    /// A file of more `[[approvals.rules]]` (relative to the configuration
    /// file naming it); read only from the operator's own file.
    pub rules_file: Option<std::path::PathBuf>,
    /// The rules of every layer, in order (the operator's, then the
    /// project's ask and deny rules).
    #[serde(skip)]
    pub parsed: crate::approvals::Rules,
    /// The project's `[approvals] mode`: asking is at least this strict
    /// unless the operator's `--approvals` says otherwise (a project never
    /// makes it looser).
    #[serde(skip)]
    pub project_floor: Option<crate::approvals::Mode>,
    /// The operator's file, where an "always in this workspace" answer is
    /// written (the `--config` file, else the user's, created if need be).
    #[serde(skip)]
    pub remember_in: Option<std::path::PathBuf>,
}

impl ApprovalsToml {
    /// The mode when no `--approvals` flag names one: the operator's, else
    /// the command's `default`, made no looser than the project's.
    pub fn mode_or(&self, default: crate::approvals::Mode) -> crate::approvals::Mode {
        self.mode
            .unwrap_or(default)
            .max(self.project_floor.unwrap_or_default())
    }
}

/// `[jobs]`: when a call moves to the background and how long a job may
/// run.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobsToml {
    pub background_after_ms: Option<u64>,
    pub max_duration_ms: Option<u64>,
}
