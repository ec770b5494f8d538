//! The Model Context Protocol, both ways: [`ToolServer`] serves sandcrab's
//! sandboxed tools to any MCP client; [`McpServers`] uses MCP servers as a
//! tool source, each program confined by its `[policy.mcp.NAME]` grant.
//!
//! This folder sits beside `tools/`: it knows tool registries, plugin
//! grants and the process sandbox, never the agent.

mod ask;
mod elicit;
mod error;
mod launch;
pub mod prompts;
mod remote_tool;
mod resources;
mod sampling;
mod server;
mod servers;
pub mod sign_in;
mod sources;
pub mod tls;

pub use elicit::{Caller, ELICITATION};
pub use error::McpError;
pub use launch::{SERVED_BY_SANDCRAB, confinement_spec};
pub use prompts::{PromptCommand, PromptError};
pub use remote_tool::McpTool;
pub use server::{PROGRESS_EVERY, ToolServer, mcp_tool};
pub use servers::{CALL_TIMEOUT, McpServer, RemoteTool, STARTUP_TIMEOUT, tool_name};
pub use sources::McpServers;
