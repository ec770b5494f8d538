//! The Model Context Protocol, both ways: [`ToolServer`] serves sandcrab's
//! sandboxed tools to any MCP client; the client side (`client/`) uses MCP
//! servers as a confined tool source.
//!
//! This folder sits beside `tools/`: it knows tool registries and the
//! process sandbox, never the agent.

mod server;

pub use server::{PROGRESS_EVERY, ToolServer, mcp_tool};
