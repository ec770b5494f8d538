//! `sandcrab serve`: the lifecycle harness behind the HTTP bridge.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;

use super::agent_cmd::AgentArgs;
use crate::agent::AgentKit;
use crate::harness::{AgentFactory, Harness, Workspaces};
use crate::server::{ConnectionLimits, ServerConfig, router, serve, token};

/// Options of `sandcrab serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Provider, model, plugins, sandbox, config (as for `chat`); without
    /// --workspace, a client initializes one first.
    #[command(flatten)]
    agent: AgentArgs,
    /// Port on 127.0.0.1 (0: any free port, printed at start).
    #[arg(long, default_value_t = 9990)]
    port: u16,
    /// Listen on ADDR:PORT instead (beyond loopback needs --allow-remote).
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::IpAddr>,
    /// Allow listening beyond loopback (the token is still required).
    #[arg(long)]
    allow_remote: bool,
    /// A web origin allowed to call the bridge (repeatable), e.g.
    /// `http://localhost:5173`; requests from any other origin are refused.
    #[arg(long = "cors", value_name = "ORIGIN")]
    cors: Vec<String>,
    /// Where the bearer token is kept: a new one at every start, in a file
    /// only you can read, in a directory only you can write.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A directory a client may open with `POST /workspace/initialize`,
    /// with every directory inside it (repeatable). Without it a client
    /// may open only the --workspace given, or none.
    #[arg(long = "allow-workspace", value_name = "DIR")]
    allow_workspace: Vec<PathBuf>,
    /// Milliseconds a client has to send a request's headers.
    #[arg(long, value_name = "MS", default_value_t = 10_000, hide = true)]
    header_timeout_ms: u64,
    /// Milliseconds a connection may stay silent before it is closed.
    #[arg(long, value_name = "MS", default_value_t = 60_000, hide = true)]
    idle_timeout_ms: u64,
    /// Seconds a call waits for the operator's approval (GET
    /// /agent/permissions, POST /agent/permissions/ID) before it is denied.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    approval_timeout: u64,
}

/// Builds the agent for a workspace with the command line's options.
struct CliFactory {
    args: AgentArgs,
}

#[async_trait::async_trait]
impl AgentFactory for CliFactory {
    async fn build(
        &self,
        workspace: &Path,
    ) -> anyhow::Result<(AgentKit, Box<dyn std::any::Any + Send + Sync>)> {
        let mut args = self.args.clone();
        args.host.workspace = Some(workspace.to_path_buf());
        let (setup, kit) = args.kit_with(false, true).await?;
        setup.print_warnings();
        Ok((kit, Box::new(setup.host)))
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ip = args.listen.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
    if !ip.is_loopback() && !args.allow_remote {
        bail!(
            "--listen {ip} is beyond loopback: add --allow-remote if you mean it (anyone who can reach it and has the token can run commands as you)"
        );
    }
    let token_file = match &args.token_file {
        Some(f) => f.clone(),
        None => token::default_file("serve.token")
            .context("no runtime or config directory for the token: pass --token-file")?,
    };
    let token = token::issue(&token_file)?;
    // No --workspace: none is open until a client initializes one of those
    // the operator allowed.
    let workspace = match &args.agent.host.workspace {
        Some(dir) => Some(super::setup::resolve_workspace(Some(dir))?),
        None => None,
    };
    let mut allowed = workspace
        .as_deref()
        .map(Workspaces::only)
        .unwrap_or_default();
    for dir in &args.allow_workspace {
        allowed = allowed.and_under(&super::setup::resolve_workspace(Some(dir))?);
    }
    // Events are kept in the session store too, per workspace, so a client
    // that reconnects after a restart of the bridge gets what it missed.
    let config_dir = match &workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    let config =
        crate::config::Config::load(&config_dir, args.agent.host.config.as_deref())?.config;
    let log = match super::sessions_cmd::open_store(&config) {
        Ok(store) => crate::harness::EventLog::stored(store),
        Err(err) => {
            errln!("warning: bridge events are kept in memory only: {err:#}");
            crate::harness::EventLog::default()
        }
    };
    // The bridge can ask: by default, shell commands no rule allows wait
    // for the operator.
    let mut agent = args.agent.clone();
    agent.default_approvals = super::agent_cmd::ASKING_DEFAULT;
    let harness = Arc::new(
        Harness::with_log(
            Arc::new(CliFactory { args: agent }),
            workspace.clone(),
            allowed,
            log,
        )
        .with_permission_timeout(std::time::Duration::from_secs(args.approval_timeout)),
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let app = router(
        harness.clone(),
        ServerConfig {
            token,
            cors: args.cors.clone(),
            allow_remote: args.allow_remote,
            heartbeat: std::time::Duration::from_secs(15),
            shutdown: shutdown.clone(),
        },
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, args.port))
        .await
        .with_context(|| format!("cannot listen on {ip}:{}", args.port))?;
    let bound = listener.local_addr()?;
    if !ip.is_loopback() {
        errln!("warning: listening beyond loopback on {bound}: keep the token secret");
    }
    errln!(
        "sandcrab serve: listening on http://{bound} (workspace: {}); token in {}",
        workspace
            .as_deref()
            .map_or("none yet: POST /workspace/initialize".to_string(), |w| w
                .display()
                .to_string()),
        token_file.display()
    );
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        stop.cancel();
    });
    let done = shutdown.clone();
    let limits = ConnectionLimits {
        header_read: std::time::Duration::from_millis(args.header_timeout_ms.max(1)),
        idle: std::time::Duration::from_millis(args.idle_timeout_ms.max(1)),
    };
    serve(listener, app, limits, async move { done.cancelled().await }).await?;
    // Turns interrupted, programs and jobs stopped, the store flushed.
    harness.stop().await;
    errln!("sandcrab serve: stopped");
    Ok(ExitCode::SUCCESS)
}
