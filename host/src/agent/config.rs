//! Session settings (the config file's `[agent]` table and CLI flags).

use std::sync::Arc;

use crate::config::AgentToml;
use crate::tools::ToolSelection;
use crate::tools::TruncationPolicy;

/// How a session behaves.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The model to call.
    pub model: String,
    /// Model turns (LLM round trips) across the session; 0 = unlimited.
    pub max_turns: u32,
    /// Tool rounds for one input; 0 = unlimited.
    pub max_tool_rounds_per_input: u32,
    /// Calls looked at by loop detection.
    pub loop_detection_window: usize,
    /// How deep subagents may nest (a top-level session is depth 0).
    pub max_subagent_depth: usize,
    /// Most subagents a session may have open at once.
    pub max_subagents: usize,
    /// Most turns a subagent may take, whatever the model asks (0: the
    /// parent's own limit).
    pub subagent_max_turns: u32,
    /// Models the model may choose for a subagent besides its own.
    pub subagent_models: Vec<String>,
    /// Fraction of the context window that triggers CONTEXT_WARNING.
    pub context_warning_threshold: f64,
    /// The user's instructions, the last prompt layer.
    pub user_instructions: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub reasoning_effort: Option<String>,
    /// Truncation of tool output before the model sees it.
    pub truncation: TruncationPolicy,
    /// Run tool calls of one answer concurrently when the profile allows.
    pub parallel_tool_calls: bool,
    /// Which tools the model is offered (`[agent.tools]`).
    pub tools: ToolSelection,
    /// Which calls run, which are refused, which need the operator.
    pub approvals: crate::approvals::Approvals,
    /// Where a call that needs the operator waits for an answer (None:
    /// nobody can be asked, such a call is refused).
    pub asker: Option<Arc<crate::approvals::PermissionQueue>>,
    /// The operator's configuration file, where an "always in this
    /// workspace" answer is written (None: that answer is not offered).
    pub remember_in: Option<std::path::PathBuf>,
    /// How long a model that has not begun to answer goes unmentioned
    /// (the provider's read timeout: silence longer than that is news).
    pub still_waiting_every: std::time::Duration,
    /// The hooks that run at the session's moments (`[hooks]`).
    pub hooks: crate::hooks::Hooks,
    /// Which instruction files the prompt may include (a trusted
    /// project's: only as consented).
    pub docs: crate::consent::DocsConsent,
    /// What the session and each subagent may spend (`[budget]`).
    pub budget: crate::llm::spend::Budget,
}

impl SessionConfig {
    /// Defaults for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        SessionConfig {
            model: model.into(),
            max_turns: 0,
            max_tool_rounds_per_input: 200,
            loop_detection_window: 5,
            max_subagent_depth: 1,
            max_subagents: 4,
            subagent_max_turns: 0,
            subagent_models: Vec::new(),
            context_warning_threshold: 0.8,
            user_instructions: None,
            max_tokens: None,
            temperature: None,
            reasoning_effort: None,
            truncation: TruncationPolicy::default(),
            parallel_tool_calls: true,
            tools: ToolSelection::default(),
            approvals: Default::default(),
            asker: None,
            remember_in: None,
            still_waiting_every: std::time::Duration::from_secs(30),
            hooks: Default::default(),
            docs: Default::default(),
            budget: Default::default(),
        }
    }

    /// Apply the configuration's `[agent]` section.
    pub fn apply(&mut self, overrides: &AgentToml) {
        if let Some(v) = overrides.max_turns {
            self.max_turns = v;
        }
        if let Some(v) = overrides.max_tool_rounds {
            self.max_tool_rounds_per_input = v;
        }
        if let Some(v) = overrides.loop_detection_window {
            self.loop_detection_window = v;
        }
        if let Some(v) = overrides.max_subagent_depth {
            self.max_subagent_depth = v;
        }
        if let Some(v) = overrides.max_subagents {
            self.max_subagents = v;
        }
        if let Some(v) = overrides.subagent_max_turns {
            self.subagent_max_turns = v;
        }
        if let Some(v) = &overrides.subagent_models {
            self.subagent_models = v.clone();
        }
        if let Some(v) = &overrides.instructions {
            self.user_instructions = Some(v.clone());
        }
        if let Some(v) = overrides.max_tokens {
            self.max_tokens = Some(v);
        }
        if let Some(v) = overrides.temperature {
            self.temperature = Some(v);
        }
        if let Some(v) = &overrides.reasoning_effort {
            self.reasoning_effort = Some(v.clone());
        }
        if let Some(v) = &overrides.tools {
            self.tools = v.clone();
        }
    }
}
