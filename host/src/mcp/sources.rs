//! Every MCP server an agent uses as a tool source, and their tools put
//! into a tool registry (prefixed, capped, never over another tool).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::elicit::Asking;
use super::remote_tool::McpTool;
use super::servers::{MAX_DESCRIPTION, MAX_SCHEMA_BYTES, MAX_TOOLS, McpServer, tool_name};
use crate::config::McpServerSettings;
use crate::plugin::{SandboxContext, ToolSpec};
use crate::tools::ToolRegistry;

/// Every configured server of an agent.
#[derive(Default, Clone)]
pub struct McpServers {
    servers: BTreeMap<String, Arc<McpServer>>,
    /// Who their questions (elicitation) go to.
    asking: Arc<Asking>,
    /// The model their sampling requests are answered with.
    model: Arc<super::sampling::ModelSlot>,
}

impl McpServers {
    /// The servers `settings` name, with their grants from `ctx.policy`.
    pub fn new(settings: &BTreeMap<String, McpServerSettings>, ctx: &SandboxContext) -> Self {
        let asking = Arc::new(Asking::default());
        let model = Arc::new(super::sampling::ModelSlot::default());
        let servers = settings
            .iter()
            .map(|(name, s)| {
                let grant = ctx.policy.mcp.get(name).cloned().unwrap_or_default();
                let server =
                    McpServer::new(name, s, grant, ctx).asking(asking.clone(), model.clone());
                (name.clone(), Arc::new(server))
            })
            .collect();
        McpServers {
            servers,
            asking,
            model,
        }
    }

    /// Answer the sampling requests of the servers allowed to sample with
    /// `model` of `client` (until then they are refused).
    pub fn sample_with(&self, client: Arc<dyn crate::llm::LlmClient>, model: &str) {
        self.model.set(client, model);
    }

    /// Put the servers' questions (elicitation) to `queue`, the operator's
    /// channel of the front end (until then they are declined).
    pub fn ask_through(&self, queue: Arc<crate::approvals::PermissionQueue>) {
        self.asking.set(queue);
    }

    /// The servers, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<McpServer>> {
        self.servers.values()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Start every server (concurrently) and register its tools as
    /// `SERVER__tool` where `offered(server, tool)` says so. A server
    /// that fails is a warning; the others go on.
    pub async fn register_tools(
        &self,
        registry: &mut ToolRegistry,
        offered: impl Fn(&str, &str) -> bool,
    ) -> Vec<String> {
        let listed = futures::future::join_all(
            self.servers
                .values()
                .map(|s| async move { (s, s.tools().await) }),
        )
        .await;
        let mut warnings = Vec::new();
        for (server, tools) in listed {
            let tools = match tools {
                Ok(tools) => tools,
                Err(e) => {
                    warnings.push(format!("{e}: its tools are not offered"));
                    continue;
                }
            };
            if tools.len() > MAX_TOOLS {
                warnings.push(format!(
                    "MCP server '{}' lists {} tools: only the first {MAX_TOOLS} are offered",
                    server.name(),
                    tools.len()
                ));
            }
            for tool in tools.into_iter().take(MAX_TOOLS) {
                let name = tool_name(server.name(), &tool.name);
                if tool.input_schema.to_string().len() > MAX_SCHEMA_BYTES {
                    warnings.push(format!(
                        "MCP server '{}': tool '{name}' is not offered: its input schema is larger than {} KiB",
                        server.name(),
                        MAX_SCHEMA_BYTES / 1024
                    ));
                    continue;
                }
                if !offered(server.name(), &name) {
                    continue;
                }
                if registry.get(&name).is_some() {
                    warnings.push(format!(
                        "MCP server '{}': tool '{name}' is not offered: a tool of that name is already loaded",
                        server.name()
                    ));
                    continue;
                }
                let spec = ToolSpec {
                    name: name.clone(),
                    description: tool.description.chars().take(MAX_DESCRIPTION).collect(),
                    parameters: tool.input_schema.clone(),
                    traits: Default::default(),
                };
                registry.register(spec, Arc::new(McpTool::new(server.clone(), &tool.name)));
            }
            // Its resources, when it has some, through one tool of its own.
            let name = tool_name(server.name(), super::resources::TOOL);
            if offered(server.name(), &name) && super::resources::offered(server).await {
                if registry.get(&name).is_some() {
                    warnings.push(format!(
                        "MCP server '{}': its resources are not offered: a tool named '{name}' is already loaded",
                        server.name()
                    ));
                } else {
                    let spec = super::resources::spec(server, &name);
                    registry.register(
                        spec,
                        Arc::new(super::resources::ResourceTool::new(server.clone())),
                    );
                }
            }
        }
        warnings
    }
}
