//! The MCP servers of one agent: each connected on first use, its tools
//! offered as `SERVER__tool`, calls bounded by a timeout, and a server
//! that died restarted on the next call after a backoff. Dropping
//! [`McpServers`] stops every server program.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ContentBlock};

use std::sync::Arc;

use super::McpError;
use super::elicit::{Asking, Caller, Elicitor, InFlight};
use super::launch::{Connection, connect};
use crate::config::McpServerSettings;
use crate::plugin::SandboxContext;
use crate::plugin::policy::McpGrant;

/// Default bound on one tool call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default bound on starting a server and listing its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// Most tools offered from one server (a server is untrusted code: it
/// must not flood the model's context).
pub const MAX_TOOLS: usize = 256;
/// Longest tool description offered (longer ones are cut).
pub const MAX_DESCRIPTION: usize = 2048;
/// Largest input schema offered, serialized.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Longest wait before restarting a server that keeps failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One configured server.
pub struct McpServer {
    name: String,
    settings: McpServerSettings,
    grant: McpGrant,
    ctx: SandboxContext,
    state: tokio::sync::Mutex<State>,
    /// Who its questions go to, and the call it answers now.
    asking: Arc<Asking>,
    in_flight: Arc<InFlight>,
    /// The model its sampling requests are answered with (used only when
    /// the operator allows it sampling).
    model: Arc<super::sampling::ModelSlot>,
}

#[derive(Default)]
struct State {
    connection: Option<Connection>,
    /// Failed starts in a row.
    failures: u32,
    /// No new start before this.
    retry_at: Option<Instant>,
    /// How many times it was (re)started.
    starts: u32,
}

/// A tool of a server, as listed.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    /// The server's own name for it.
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

impl McpServer {
    /// Server `name` as `settings` describe it, with `grant`, confined
    /// within `ctx`; nothing starts until it is first used.
    pub fn new(
        name: &str,
        settings: &McpServerSettings,
        grant: McpGrant,
        ctx: &SandboxContext,
    ) -> Self {
        McpServer {
            name: name.to_string(),
            settings: settings.clone(),
            grant,
            ctx: ctx.clone(),
            state: Default::default(),
            asking: Default::default(),
            model: Default::default(),
            in_flight: Default::default(),
        }
    }

    /// Its questions (elicitation) go where `asking` says, and its
    /// sampling requests (where allowed) to the model `model` holds.
    pub fn asking(mut self, asking: Arc<Asking>, model: Arc<super::sampling::ModelSlot>) -> Self {
        self.asking = asking;
        self.model = model;
        self
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its settings.
    pub fn settings(&self) -> &McpServerSettings {
        &self.settings
    }

    /// Its grant.
    pub fn grant(&self) -> &McpGrant {
        &self.grant
    }

    /// Who this server is and what it may touch, for a receipt: its grant
    /// and where it came from, and how its program is confined.
    pub fn standing(&self) -> crate::tools::Standing {
        use crate::plugin::policy::GrantSource;
        let policy = &self.ctx.policy;
        let source = match policy.sources.get(&format!("mcp.{}", self.name)) {
            Some(file) => format!("{file}:policy.mcp.{}", self.name),
            None => "built-in default: an MCP server may read the workspace".into(),
        };
        let line = |capability: &str, value: String, key: &str| GrantSource {
            capability: capability.into(),
            value,
            source: if source.starts_with("built-in") {
                source.clone()
            } else {
                format!("{source}.{key}")
            },
        };
        let mut grants = Vec::new();
        if self.grant.workspace > crate::plugin::Access::None {
            grants.push(line(
                "workspace",
                self.grant.workspace.to_string(),
                "workspace",
            ));
        }
        for p in &self.grant.paths {
            grants.push(line(
                "paths",
                format!("{} ({})", p.path.display(), p.access),
                "paths",
            ));
        }
        for var in &self.settings.env {
            grants.push(GrantSource {
                capability: "env".into(),
                value: var.clone(),
                source: format!(
                    "{}:mcp.servers.{}.env",
                    policy
                        .sources
                        .get(&format!("mcp.{}", self.name))
                        .cloned()
                        .unwrap_or_else(|| "configuration".into()),
                    self.name
                ),
            });
        }
        let network = policy.mcp_network(&self.grant);
        if network {
            grants.push(line("network", "yes".into(), "network"));
        }
        let mut denials = Vec::new();
        if self.grant.network && !network {
            denials.push(if policy.locked() {
                "network (locked mode allows no network)".to_string()
            } else {
                "network ([policy] network = false)".to_string()
            });
        }
        let program = self.settings.command.clone().or(self.settings.url.clone());
        let standing_programs = self
            .settings
            .command
            .as_ref()
            .map(|command| crate::plugin::ProgramRun {
                program: command.clone(),
                confinement: Some(crate::plugin::ProgramConfinement::of(
                    &super::launch::confinement_spec(
                        &self.grant,
                        &self.ctx,
                        std::path::Path::new("(its private temp dir)"),
                    ),
                )),
                exit_code: None,
                signal: None,
                timed_out: false,
                duration_ms: 0,
                refused: None,
            })
            .into_iter()
            .collect();
        crate::tools::Standing {
            principal: crate::tools::receipt::Principal {
                kind: crate::tools::receipt::PrincipalKind::McpServer,
                name: self.name.clone(),
                version: None,
                component_sha256: None,
                origin: program,
                signer: None,
            },
            mode: crate::tools::receipt::RunsUnder::Sandbox(policy.sandbox_mode()),
            grants,
            denials,
            standing_programs,
        }
    }

    /// How many times it was started.
    pub async fn starts(&self) -> u32 {
        self.state.lock().await.starts
    }

    fn startup_timeout(&self) -> Duration {
        self.settings
            .startup_timeout_ms
            .map_or(STARTUP_TIMEOUT, Duration::from_millis)
    }

    pub(super) fn call_timeout(&self) -> Duration {
        self.settings
            .timeout_ms
            .map_or(CALL_TIMEOUT, Duration::from_millis)
    }

    /// A live peer: the current connection, or a new one (not before the
    /// backoff after a failed start has passed).
    pub(super) async fn peer(&self) -> Result<rmcp::Peer<rmcp::RoleClient>, McpError> {
        let mut state = self.state.lock().await;
        if let Some(conn) = state.connection.as_mut() {
            if conn.alive() {
                return Ok(conn.client.peer().clone());
            }
            state.connection = None;
        }
        if let Some(at) = state.retry_at
            && let Some(wait) = at.checked_duration_since(Instant::now())
        {
            return Err(McpError::Start {
                server: self.name.clone(),
                message: format!(
                    "it failed to start; next attempt in {} s",
                    wait.as_secs().max(1)
                ),
            });
        }
        let started = tokio::time::timeout(
            self.startup_timeout(),
            connect(
                &self.name,
                &self.settings,
                &self.grant,
                &self.ctx,
                Elicitor::new(&self.name, self.asking.clone(), self.in_flight.clone())
                    .sampling(self.settings.sampling.then(|| self.model.clone())),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            Err(McpError::Start {
                server: self.name.clone(),
                message: format!(
                    "no MCP handshake within {} ms (raise [mcp.servers.{}] startup_timeout_ms)",
                    self.startup_timeout().as_millis(),
                    self.name
                ),
            })
        });
        state.starts += 1;
        match started {
            Ok(conn) => {
                let peer = conn.client.peer().clone();
                state.connection = Some(conn);
                state.failures = 0;
                state.retry_at = None;
                Ok(peer)
            }
            Err(e) => {
                state.failures += 1;
                let backoff = Duration::from_secs(1 << state.failures.min(5)).min(MAX_BACKOFF);
                state.retry_at = Some(Instant::now() + backoff);
                Err(e)
            }
        }
    }

    /// Its tools now.
    pub async fn tools(&self) -> Result<Vec<RemoteTool>, McpError> {
        let peer = self.peer().await?;
        let listed = tokio::time::timeout(self.startup_timeout(), peer.list_all_tools())
            .await
            .map_err(|_| self.failed("tools/list timed out"))?;
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => return Err(self.refused("tools/list", e).await),
        };
        Ok(listed
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    /// Call `tool` for `caller` (the session and call its questions
    /// belong to); `Err` is the message for the model.
    pub async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        caller: Caller,
    ) -> Result<String, String> {
        let peer = self.peer().await.map_err(|e| e.to_string())?;
        let trace = caller.trace;
        // Its questions are this call's while it runs.
        let _in_flight = self.in_flight.enter(caller);
        let mut params = CallToolRequestParams::new(tool.to_string());
        // The call's span, as the MCP conventions carry it (SEP-414).
        if let Some(trace) = trace {
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.0.set_traceparent(trace.traceparent());
            params.meta = Some(meta);
        }
        params.arguments = match args {
            serde_json::Value::Object(map) => Some(map),
            serde_json::Value::Null => None,
            other => return Err(format!("arguments must be a JSON object, not {other}")),
        };
        let timeout = self.call_timeout();
        // Dropping the request on timeout tells the server it is cancelled.
        let result = match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => {
                return Err(format!(
                    "MCP server '{}': {tool} did not answer within {} ms (raise [mcp.servers.{}] timeout_ms)",
                    self.name,
                    timeout.as_millis(),
                    self.name
                ));
            }
            Ok(Err(e)) => return Err(self.refused(tool, e).await.to_string()),
            Ok(Ok(result)) => result,
        };
        let mut text = String::new();
        for block in &result.content {
            match block {
                ContentBlock::Text(t) => text.push_str(&t.text),
                other => text.push_str(&format!("[{} content]", content_kind(other))),
            }
        }
        if text.is_empty()
            && let Some(structured) = &result.structured_content
        {
            text = structured.to_string();
        }
        if result.is_error == Some(true) {
            Err(text)
        } else {
            Ok(text)
        }
    }

    /// Why request `what` failed with `error`, for the model and the
    /// operator. A refusal for want of scope is kept for the next sign-in
    /// (step-up); a broken connection is dropped, so the next request
    /// starts the server again rather than finding the dead connection
    /// before its end has been noticed.
    pub(super) async fn refused(&self, what: &str, error: rmcp::ServiceError) -> McpError {
        if let Some(needed) = super::sign_in::needed_scopes(&error) {
            let store = self
                .settings
                .url
                .as_deref()
                .and_then(|url| super::sign_in::store_of(&self.name, url));
            self.state.lock().await.connection = None;
            let said = super::sign_in::ask_for_more(&self.name, store.as_ref(), &needed);
            return self.failed(&format!("{what}: {said}"));
        }
        if !matches!(error, rmcp::ServiceError::McpError(_)) {
            self.state.lock().await.connection = None;
        }
        self.failed(&format!("{what} failed: {error}"))
    }

    fn failed(&self, message: &str) -> McpError {
        McpError::Call {
            server: self.name.clone(),
            message: message.to_string(),
        }
    }
}

fn content_kind(content: &ContentBlock) -> &'static str {
    match content {
        ContentBlock::Text(_) => "text",
        ContentBlock::Image(_) => "image",
        ContentBlock::Audio(_) => "audio",
        ContentBlock::Resource(_) => "resource",
        ContentBlock::ResourceLink(_) => "resource link",
        _ => "other",
    }
}

/// The name the model sees for `tool` of `server`: `server__tool`, with
/// characters providers refuse in tool names replaced by `_`, at most 64.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("{}__{}", clean(server), clean(tool));
    name.truncate(64);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_prefixed_and_safe_for_every_provider() {
        assert_eq!(tool_name("github", "create_issue"), "github__create_issue");
        assert_eq!(tool_name("fs.local", "read/file"), "fs_local__read_file");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }
}
