//! A server's resources, readable by the model: one tool per server that
//! offers them (`SERVER__resources`), listing them without a `uri` and
//! reading one with it — everything it answers bounded in bytes (a
//! server is untrusted: it must not flood the model's context).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

use super::servers::McpServer;
use crate::plugin::{ToolOutput, ToolSpec};
use crate::tools::{ToolContext, ToolExecutor};

/// The tool's own name after the server's (`github__resources`).
pub const TOOL: &str = "resources";

/// Most resources listed.
pub const MAX_LISTED: usize = 200;

/// Most bytes of one read given to the model.
pub const MAX_READ_BYTES: usize = 256 * 1024;

/// Longest line of a listing (a resource's name and description).
const MAX_LINE_CHARS: usize = 300;

/// Whether `server` said at its handshake that it has resources (it is
/// connected by now: its tools were listed).
pub async fn offered(server: &McpServer) -> bool {
    match server.peer().await {
        Ok(peer) => peer
            .peer_info()
            .is_some_and(|info| info.capabilities.resources.is_some()),
        Err(_) => false,
    }
}

/// The tool's spec for `server`, named `name`.
pub fn spec(server: &McpServer, name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: format!(
            "The resources of the MCP server '{}': without `uri`, the list of them (uri, name, description); with `uri`, that resource's content (text; a binary one is described).",
            server.name()
        ),
        parameters: json!({"type": "object", "properties": {
            "uri": {"type": "string", "description": "The resource to read (default: list them)"}
        }, "additionalProperties": false}),
        traits: Default::default(),
    }
}

/// The `resources` tool of one server.
pub struct ResourceTool {
    server: Arc<McpServer>,
}

impl ResourceTool {
    pub fn new(server: Arc<McpServer>) -> Self {
        ResourceTool { server }
    }

    async fn list(&self) -> Result<String, String> {
        let peer = self.server.peer().await.map_err(|e| e.to_string())?;
        let listed = tokio::time::timeout(self.server.call_timeout(), peer.list_all_resources())
            .await
            .map_err(|_| {
                format!(
                    "MCP server '{}': resources/list timed out",
                    self.server.name()
                )
            })?;
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => return Err(self.server.refused("resources/list", e).await.to_string()),
        };
        if listed.is_empty() {
            return Ok(format!(
                "MCP server '{}' lists no resources.",
                self.server.name()
            ));
        }
        let mut lines = Vec::new();
        for resource in listed.iter().take(MAX_LISTED) {
            let resource = serde_json::to_value(resource).unwrap_or_default();
            let field = |key: &str| resource[key].as_str().unwrap_or_default().to_string();
            let mut line = format!("{} — {}", field("uri"), field("name"));
            for extra in [field("description"), field("mimeType")] {
                if !extra.is_empty() {
                    line.push_str(&format!("; {extra}"));
                }
            }
            lines.push(clip_line(&line));
        }
        if listed.len() > MAX_LISTED {
            lines.push(format!(
                "… and {} more not listed",
                listed.len() - MAX_LISTED
            ));
        }
        Ok(lines.join("\n"))
    }

    async fn read(&self, uri: &str) -> Result<String, String> {
        let peer = self.server.peer().await.map_err(|e| e.to_string())?;
        let read = peer.read_resource(ReadResourceRequestParams::new(uri));
        let result = tokio::time::timeout(self.server.call_timeout(), read)
            .await
            .map_err(|_| {
                format!(
                    "MCP server '{}': reading {uri} timed out",
                    self.server.name()
                )
            })?;
        let result = match result {
            Ok(result) => result,
            Err(e) => {
                let what = format!("reading {uri}");
                return Err(self.server.refused(&what, e).await.to_string());
            }
        };
        let result = serde_json::to_value(&result).unwrap_or_default();
        Ok(render(&result["contents"]))
    }
}

/// The contents of a read, text as it is and blobs described, cut at
/// [`MAX_READ_BYTES`].
fn render(contents: &Value) -> String {
    let mut out = String::new();
    for part in contents.as_array().into_iter().flatten() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        let mime = part["mimeType"].as_str().unwrap_or("unknown type");
        match (part["text"].as_str(), part["blob"].as_str()) {
            (Some(text), _) => out.push_str(text),
            (None, Some(blob)) => out.push_str(&format!(
                "({} is binary: {mime}, about {} bytes; not shown)",
                part["uri"].as_str().unwrap_or("it"),
                blob.len() / 4 * 3
            )),
            (None, None) => {}
        }
        if out.len() > MAX_READ_BYTES {
            break;
        }
    }
    if out.len() > MAX_READ_BYTES {
        out.truncate(out.floor_char_boundary(MAX_READ_BYTES));
        out.push_str(&format!("\n… (cut at {} KiB)", MAX_READ_BYTES / 1024));
    }
    out
}

/// A server's text as one line of at most [`MAX_LINE_CHARS`] characters:
/// control characters and runs of white space become one space, and a
/// longer text is cut with `…`.
pub(super) fn clip_line(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[async_trait]
impl ToolExecutor for ResourceTool {
    async fn execute(
        &self,
        args: Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, crate::tools::ToolError> {
        let answer = match args["uri"].as_str().filter(|u| !u.is_empty()) {
            Some(uri) => self.read(uri).await,
            None => self.list().await,
        };
        answer
            .map(ToolOutput::from)
            .map_err(crate::tools::ToolError::failed)
    }

    fn standing(&self, _tool: &str) -> crate::tools::Standing {
        self.server.standing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_cut_at_its_bound_and_a_blob_is_described() {
        let big = "x".repeat(MAX_READ_BYTES + 10);
        let out = render(&json!([{"uri": "a", "text": big}]));
        assert!(
            out.len() < MAX_READ_BYTES + 100 && out.ends_with("KiB)"),
            "{}",
            out.len()
        );
        let out = render(&json!([{"uri": "b", "blob": "AAAA", "mimeType": "image/png"}]));
        assert_eq!(out, "(b is binary: image/png, about 3 bytes; not shown)");
    }
}
