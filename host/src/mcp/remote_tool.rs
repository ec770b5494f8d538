//! [`McpTool`]: a tool of an MCP server in sandcrab's registry, dispatched
//! like any other (schema validation, truncation, background jobs).

use std::sync::Arc;

use async_trait::async_trait;

use super::servers::McpServer;
use crate::plugin::ToolOutput;
use crate::tools::{ToolContext, ToolExecutor};

/// One tool of one server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// The server's own name for the tool.
    tool: String,
}

impl McpTool {
    pub fn new(server: Arc<McpServer>, tool: &str) -> Self {
        McpTool {
            server,
            tool: tool.to_string(),
        }
    }
}

#[async_trait]
impl ToolExecutor for McpTool {
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, crate::tools::ToolError> {
        let caller = super::elicit::Caller {
            session_id: ctx.session_id.clone(),
            root_session_id: ctx.root_session_id.clone(),
            call_id: ctx.call_id.clone(),
            activity: ctx.programs.clone(),
            spend: ctx.spend.clone(),
            trace: ctx.trace,
        };
        self.server
            .call(&self.tool, args, caller)
            .await
            .map(ToolOutput::from)
            .map_err(crate::tools::ToolError::failed)
    }

    fn standing(&self, _tool: &str) -> crate::tools::Standing {
        self.server.standing()
    }
}
