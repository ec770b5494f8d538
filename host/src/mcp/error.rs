//! What can go wrong with an MCP server sandcrab uses.

/// An MCP server problem, naming the server and what to change.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// Its `[mcp.servers.NAME]` entry is not usable.
    #[error("MCP server '{server}': {message} (in [mcp.servers.{server}])")]
    Config { server: String, message: String },
    /// It could not be started or connected to.
    #[error("MCP server '{server}' did not start: {message}")]
    Start { server: String, message: String },
    /// It failed while talking to it.
    #[error("MCP server '{server}': {message}")]
    Call { server: String, message: String },
}
