//! The tool registry: register (the latest registration of a name wins),
//! look up, list definitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::plugin::{LoadedPlugin, ToolCallContext, ToolOutput, ToolSpec};

/// What a tool call runs with.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// The session (thread) id.
    pub session_id: String,
    /// The top-level conversation of a subagent's call, where questions
    /// about it are asked (empty: the session is its own).
    pub root_session_id: String,
    /// The model's id for this call.
    pub call_id: String,
    /// Where live output (of programs the tool runs) goes.
    pub live_output: Option<crate::process::LiveOutput>,
    /// Where the agent works, on the host (None: the workspace root).
    pub working_dir: Option<std::path::PathBuf>,
    /// Turns true when the call moves to the background.
    pub detach: Option<tokio::sync::watch::Receiver<bool>>,
    /// Where the programs the call starts are recorded (for its receipt).
    pub programs: Option<crate::plugin::ActivityLog>,
    /// The model started the call as a background job.
    pub background: bool,
    /// The call was given the network (see
    /// [`crate::plugin::ToolCallContext::network`]).
    pub network: bool,
    /// Where model calls made for the call are counted against the
    /// session's caps (None: outside a session).
    pub spend: Option<std::sync::Arc<crate::llm::spend::Ledger>>,
    /// The span of the call, passed on to whoever answers it (an MCP
    /// server, a subagent).
    pub trace: Option<crate::telemetry::SpanContext>,
}

/// Something that runs a tool. `Err` is a failure with its status and the
/// message for the model.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, super::ToolError>;

    /// Who runs `tool` and under which grants (for its receipt): the host
    /// itself unless the executor says otherwise.
    fn standing(&self, tool: &str) -> super::receipt::Standing {
        super::receipt::Standing::host(tool)
    }
}

/// A tool of a loaded plugin.
pub struct PluginTool {
    plugin: Arc<LoadedPlugin>,
    name: String,
}

impl PluginTool {
    pub fn new(plugin: Arc<LoadedPlugin>, name: &str) -> Self {
        PluginTool {
            plugin,
            name: name.to_string(),
        }
    }
}

#[async_trait]
impl ToolExecutor for PluginTool {
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, super::ToolError> {
        let call_ctx = ToolCallContext {
            session_id: ctx.session_id.clone(),
            call_id: ctx.call_id.clone(),
            working_dir: ctx.working_dir.clone(),
            detach: ctx.detach.clone(),
            programs: ctx.programs.clone(),
            background: ctx.background,
            network: ctx.network,
        };
        self.plugin
            .call_tool(
                &self.name,
                &args.to_string(),
                &call_ctx,
                ctx.live_output.clone(),
            )
            .await
            .map_err(|e| {
                use crate::plugin::{ToolCallError, ToolFailure};
                let status = match &e {
                    ToolCallError::Tool(ToolFailure::Denied(_)) => super::ToolStatus::Denied,
                    ToolCallError::Tool(ToolFailure::InvalidArguments(_)) => {
                        super::ToolStatus::InvalidArguments
                    }
                    _ => super::ToolStatus::Failed,
                };
                super::ToolError::new(status, e.to_string())
            })
    }

    fn standing(&self, _tool: &str) -> super::receipt::Standing {
        super::receipt::Standing::plugin(&self.plugin)
    }
}

/// A host-native tool from an async closure (its `Err` is a plain failure).
pub struct FnTool<F>(pub F);

#[async_trait]
impl<F, Fut> ToolExecutor for FnTool<F>
where
    F: Fn(serde_json::Value, ToolContext) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, super::ToolError> {
        (self.0)(args, ctx.clone())
            .await
            .map(ToolOutput::from)
            .map_err(Into::into)
    }
}

/// A registered tool: its definition, its compiled argument validator and
/// its executor.
pub struct RegisteredTool {
    pub spec: ToolSpec,
    pub(super) validator: Result<jsonschema::Validator, String>,
    pub executor: Arc<dyn ToolExecutor>,
}

/// Tools by name.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Who a call of `name` runs as, and under which grants and sandbox
    /// (the host itself for a tool that is not here).
    pub fn standing(&self, name: &str) -> super::receipt::Standing {
        self.get(name)
            .map(|t| t.executor.standing(name))
            .unwrap_or_else(|| super::receipt::Standing::host(name))
    }

    /// Register a tool; one with the same name is replaced.
    pub fn register(&mut self, spec: ToolSpec, executor: Arc<dyn ToolExecutor>) {
        let validator = jsonschema::validator_for(&spec.parameters)
            .map_err(|e| format!("the schema of tool '{}' is invalid: {e}", spec.name));
        self.tools.insert(
            spec.name.clone(),
            Arc::new(RegisteredTool {
                spec,
                validator,
                executor,
            }),
        );
    }

    /// Register every tool of a tool plugin.
    pub fn register_plugin(&mut self, plugin: &Arc<LoadedPlugin>) {
        for spec in &plugin.tools {
            self.register(
                spec.clone(),
                Arc::new(PluginTool::new(plugin.clone(), &spec.name)),
            );
        }
    }

    /// Register the tool `tool` of `plugin` (nothing if it has none of
    /// that name).
    pub fn register_plugin_tool(&mut self, plugin: &Arc<LoadedPlugin>, tool: &str) {
        if let Some(spec) = plugin.tools.iter().find(|t| t.name == tool) {
            self.register(
                spec.clone(),
                Arc::new(PluginTool::new(plugin.clone(), tool)),
            );
        }
    }

    /// Every tool of `other` added, replacing tools of the same name.
    pub fn overlay(&mut self, other: &ToolRegistry) {
        for (name, tool) in &other.tools {
            self.tools.insert(name.clone(), tool.clone());
        }
    }

    /// A registry of every tool of every tool plugin in `plugins` (a
    /// later plugin's tool replaces an earlier one of the same name).
    pub fn from_plugins(plugins: &[Arc<LoadedPlugin>]) -> Self {
        let mut registry = ToolRegistry::new();
        for plugin in plugins {
            registry.register_plugin(plugin);
        }
        registry
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(name)
    }

    /// Remove a tool.
    pub fn remove(&mut self, name: &str) -> bool {
        self.tools.remove(name).is_some()
    }

    /// Every definition, sorted by name.
    pub fn definitions(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec.clone()).collect()
    }

    /// Tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// A registry with only the tools named in `names` (those present).
    pub fn subset(&self, names: &[String]) -> ToolRegistry {
        ToolRegistry {
            tools: self
                .tools
                .iter()
                .filter(|(name, _)| names.contains(name))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
