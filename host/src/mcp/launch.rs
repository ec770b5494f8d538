//! Starting one MCP server: a confined program on stdio, or a streamable
//! HTTP endpoint. A program gets exactly its `[policy.mcp.NAME]` grant
//! (default: read the workspace, no network), a private HOME and TMPDIR,
//! the environment variables its configuration names and nothing else.

use std::path::{Path, PathBuf};

use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{AuthClient, AuthorizationManager};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};

use super::McpError;
use super::elicit::Elicitor;
use super::sign_in::SignIn;
use crate::config::McpServerSettings;
use crate::plugin::policy::McpGrant;
use crate::plugin::{Access, SandboxContext};
use crate::process::{
    ChildEnv, Confinement, ConfinementSpec, DEFAULT_PATH, ServiceProcess, ServiceRequest,
    find_on_path, spawn_service,
};

/// Set in the environment of every MCP server program sandcrab starts.
pub const SERVED_BY_SANDCRAB: &str = "SANDCRAB_MCP_SERVER";

/// A live connection and what keeps it alive.
pub struct Connection {
    pub client: RunningService<RoleClient, Elicitor>,
    /// The program (None for HTTP servers); dropping it kills the group.
    pub process: Option<ServiceProcess>,
    /// Its private HOME and TMPDIR, removed with it.
    pub _scratch: Option<tempfile::TempDir>,
}

impl Connection {
    /// Whether the server can still answer.
    pub fn alive(&mut self) -> bool {
        !self.client.is_closed() && !self.process.as_mut().is_some_and(|p| p.exited())
    }
}

/// Connect to server `name` as `settings` say.
pub async fn connect(
    name: &str,
    settings: &McpServerSettings,
    grant: &McpGrant,
    ctx: &SandboxContext,
    elicitor: Elicitor,
) -> Result<Connection, McpError> {
    match (&settings.command, &settings.url) {
        (Some(_), Some(_)) | (None, None) => Err(McpError::Config {
            server: name.to_string(),
            message:
                "set exactly one of `command` (a program on stdio) and `url` (streamable HTTP)"
                    .into(),
        }),
        (None, Some(url)) => {
            super::tls::install_provider();
            let client = match signed_in(name, url).await {
                Some(manager) => {
                    // Its tokens go to this server only, refreshed as they
                    // expire.
                    let http = AuthClient::new(reqwest_mcp::Client::default(), manager);
                    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                    let transport = StreamableHttpClientTransport::with_client(http, config);
                    elicitor.serve(transport).await
                }
                None => {
                    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                    elicitor.serve(transport).await
                }
            };
            let client = client.map_err(|e| {
                let said = e.to_string();
                let hint = if said.contains("401") || said.to_ascii_lowercase().contains("auth") {
                    format!(" (it may need sign-in: run `sandcrab mcp login {name}`)")
                } else {
                    String::new()
                };
                McpError::Start {
                    server: name.to_string(),
                    message: format!("{url}: {said}{hint}"),
                }
            })?;
            Ok(Connection {
                client,
                process: None,
                _scratch: None,
            })
        }
        (Some(command), None) => spawn(name, command, settings, grant, ctx, elicitor).await,
    }
}

async fn spawn(
    name: &str,
    command: &str,
    settings: &McpServerSettings,
    grant: &McpGrant,
    ctx: &SandboxContext,
    elicitor: Elicitor,
) -> Result<Connection, McpError> {
    let start_error = |message: String| McpError::Start {
        server: name.to_string(),
        message,
    };
    let program = resolve_program(command, &ctx.host_path).ok_or_else(|| {
        start_error(format!(
            "program '{command}' not found (give an absolute path, or a name on PATH)"
        ))
    })?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("mcp-{name}-"))
        .tempdir_in(&ctx.temp_dir)
        .map_err(|e| start_error(format!("cannot make its scratch directory: {e}")))?;
    let spec = confinement_spec(grant, ctx, scratch.path());
    let confinement = Confinement::prepare(&spec).map_err(|e| start_error(e.to_string()))?;
    let home = scratch.path().display().to_string();
    let mut env = ChildEnv::base(scratch.path(), Some(DEFAULT_PATH), Some(&home));
    // A sandcrab started as this server serves no MCP servers onward in
    // turn (a configuration naming `sandcrab mcp serve` never loops).
    env.set(SERVED_BY_SANDCRAB, "1");
    for var in &settings.env {
        match ctx.host_env.get(var) {
            Some(value) => env.set(var, value),
            None => tracing::warn!("MCP server '{name}': environment variable {var} is not set"),
        }
    }
    let cwd = if grant.workspace == Access::None {
        scratch.path().to_path_buf()
    } else {
        ctx.workspace.clone()
    };
    let request = ServiceRequest {
        program,
        args: settings.args.clone(),
        cwd,
        env,
        label: format!("mcp server {name}"),
    };
    let (process, stdin, stdout) =
        spawn_service(&request, &confinement).map_err(|e| start_error(e.to_string()))?;
    let client = elicitor.serve((stdout, stdin)).await.map_err(|e| {
        start_error(format!(
            "it did not complete the MCP handshake ({e}); run it with -v to see its stderr"
        ))
    })?;
    Ok(Connection {
        client,
        process: Some(process),
        _scratch: Some(scratch),
    })
}

/// The authorization of server `name` at `url` when the operator signed
/// in to it (None: not signed in, or its sign-in no longer loads — then
/// the server is reached without one and says what it needs).
async fn signed_in(name: &str, url: &str) -> Option<AuthorizationManager> {
    let store = super::sign_in::store_of(name, url)?;
    match store.state() {
        SignIn::Here(_) => {}
        SignIn::ForAnotherUrl(other) => {
            tracing::warn!(
                "MCP server '{name}': the sign-in kept is for {other}, not {url}: run `sandcrab mcp login {name}`"
            );
            return None;
        }
        SignIn::None => return None,
    }
    let mut manager = AuthorizationManager::new(url).await.ok()?;
    match super::sign_in::metadata(&manager, url, None).await {
        Ok(metadata) => manager.set_metadata(metadata),
        Err(e) => {
            tracing::warn!("MCP server '{name}': its authorization server cannot be found ({e})");
            return None;
        }
    }
    manager.set_credential_store(store);
    match manager.initialize_from_store().await {
        Ok(true) => Some(manager),
        Ok(false) => None,
        Err(e) => {
            tracing::warn!(
                "MCP server '{name}': its sign-in cannot be used ({e}): run `sandcrab mcp login {name}`"
            );
            None
        }
    }
}

/// `command` as an absolute path: itself when it names a path, else found
/// on `path`.
fn resolve_program(command: &str, path: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let p = Path::new(command);
        return (p.is_absolute() && p.is_file()).then(|| p.to_path_buf());
    }
    find_on_path(command, path)
}

/// What a server program may touch: its grant, its scratch directory and
/// the system's runtime paths, through the one translation every
/// principal's programs go through ([`crate::plugin::confinement`]).
pub fn confinement_spec(grant: &McpGrant, ctx: &SandboxContext, scratch: &Path) -> ConfinementSpec {
    use crate::plugin::confinement::{Footprint, ProgramOwner, spec};
    spec(
        ProgramOwner::McpServer,
        Footprint {
            workspace: grant.workspace,
            paths: &grant.paths,
            network: ctx.policy.mcp_network(grant),
        },
        ctx,
        scratch,
    )
}
