//! `sandcrab mcp serve`: the tools of the loaded plugins and of the
//! configured MCP servers (after the operator's include/exclude) served
//! over MCP, on stdio or on streamable
//! HTTP guarded like the bridge.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::setup::HostArgs;
use crate::agent::{LivePlugins, PluginReport, tool_set};
use crate::mcp::{McpServers, ToolServer};
use crate::plugin::watch::PluginWatcher;
use crate::server::{guard, token};
use crate::tools::ToolCatalog;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the tools of the loaded plugins to an MCP client (stdio by
    /// default; streamable HTTP on 127.0.0.1 with --http PORT).
    Serve(ServeArgs),
    /// The configured MCP servers (`[mcp.servers.NAME]`): what each may
    /// touch, and its tools (each server is started to list them).
    List {
        #[command(flatten)]
        host: HostArgs,
        /// Do not start the servers (grants only).
        #[arg(long)]
        no_connect: bool,
    },
    /// Sign in to a remote server (`url = …`) that needs it: OAuth through
    /// your browser ($BROWSER, or the URL printed), the tokens kept
    /// owner-only in sandcrab's data folder and sent to that server only.
    Login {
        /// The server's name in [mcp.servers.NAME].
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Forget the sign-in kept for a server.
    Logout {
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    host: HostArgs,
    /// Serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio
    /// (0: any free port, printed at start). Every request needs the MCP
    /// bearer token (see --token-file; not the bridge's).
    #[arg(long, value_name = "PORT")]
    http: Option<u16>,
    /// A web origin allowed to call over HTTP (repeatable).
    #[arg(long = "cors", value_name = "ORIGIN")]
    cors: Vec<String>,
    /// Where the bearer token is kept (a new one at every start; default
    /// `$XDG_RUNTIME_DIR/sandcrab/mcp.token`).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Reload a plugin when its directory changes and tell clients the
    /// tool list changed (`--watch-plugins false` turns it off).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    watch_plugins: bool,
    /// When to ask the MCP client (elicitation) before a call no rule
    /// speaks to: never, on-risk or always (default: the configuration's
    /// `[approvals] mode`, else never). A client that cannot answer gets a
    /// refusal naming what would allow the call.
    #[arg(long, value_name = "MODE")]
    approvals: Option<crate::approvals::Mode>,
    /// Allow calls matching RULE without asking (repeatable): `tool:NAME`,
    /// `shell:WORDS`, `command:WORDS`, `path:GLOB`, each with `net:` before
    /// it to give the network too.
    #[arg(long = "approve", value_name = "RULE")]
    approve: Vec<String>,
}

/// Largest MCP request body (a tool call's arguments) over HTTP.
const MAX_MCP_BODY: usize = 16 << 20;

/// How often plugin folders are checked for changes.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

pub async fn run(cmd: McpCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::Serve(args) => serve(args).await,
        McpCommand::List { host, no_connect } => list(host, no_connect).await,
        McpCommand::Login { name, host } => login(&name, host).await,
        McpCommand::Logout { name, host } => logout(&name, host).await,
    }
}

/// Remote server `name`: its URL, how to sign in and where its sign-in
/// is kept; or a usage error naming what to fix.
fn remote(
    setup: &super::setup::Setup,
    name: &str,
) -> anyhow::Result<(
    String,
    crate::config::OAuthSettings,
    crate::mcp::sign_in::SignInStore,
)> {
    let Some(settings) = setup.config.mcp.servers.get(name) else {
        let known: Vec<&str> = setup
            .config
            .mcp
            .servers
            .keys()
            .map(String::as_str)
            .collect();
        return Err(super::UsageError(format!(
            "no MCP server '{name}' is configured (configured: {}); add [mcp.servers.{name}] to {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
            crate::user_files::config_file_shown()
        ))
        .into());
    };
    let Some(url) = &settings.url else {
        return Err(super::UsageError(format!(
            "MCP server '{name}' is a program on stdio: only a server with `url = …` is signed in to"
        ))
        .into());
    };
    let data =
        crate::user_files::data_dir().context("no data folder: set HOME or XDG_DATA_HOME")?;
    let store = crate::mcp::sign_in::SignInStore::new(&data, name, url)?;
    Ok((url.clone(), settings.oauth.clone(), store))
}

async fn login(name: &str, host: HostArgs) -> anyhow::Result<ExitCode> {
    let setup = host.setup().await?;
    let (url, oauth, store) = remote(&setup, name)?;
    let kept = store.path().to_path_buf();
    let wanted = store.wanted();
    if !wanted.is_empty() {
        errln!(
            "Also asking for what a refused call needed (step-up): {}",
            super::terminal::sanitize(&wanted.join(" "))
        );
    }
    crate::mcp::sign_in::sign_in(&url, &oauth, store, |address| {
        errln!(
            "Sign in to MCP server '{name}' in your browser (opened through $BROWSER when set):\n  {}",
            super::terminal::sanitize(address)
        );
        errln!(
            "Waiting up to {} s for the browser to come back…",
            crate::mcp::sign_in::CALLBACK_TIMEOUT.as_secs()
        );
    })
    .await?;
    outln!(
        "signed in to MCP server '{name}' ({url}); kept in {}",
        kept.display()
    );
    Ok(ExitCode::SUCCESS)
}

async fn logout(name: &str, host: HostArgs) -> anyhow::Result<ExitCode> {
    let setup = host.setup().await?;
    let (_, _, store) = remote(&setup, name)?;
    if store.remove()? {
        outln!("signed out of MCP server '{name}': its tokens are removed");
    } else {
        outln!("MCP server '{name}' was not signed in");
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(host: HostArgs, no_connect: bool) -> anyhow::Result<ExitCode> {
    let setup = host.setup().await?;
    setup.print_warnings();
    let ctx = setup.host.sandbox_context();
    let servers = McpServers::new(&setup.config.mcp.servers, ctx);
    if servers.is_empty() {
        outln!(
            "no MCP servers configured (add [mcp.servers.NAME] to {})",
            crate::user_files::config_file_shown()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let sanitize = super::terminal::sanitize;
    for server in servers.iter() {
        let s = server.settings();
        let endpoint = match (&s.command, &s.url) {
            (Some(command), _) => format!("{command} {}", s.args.join(" ")),
            (None, Some(url)) => url.clone(),
            (None, None) => "(neither command nor url)".into(),
        };
        outln!("{}: {}", sanitize(server.name()), sanitize(endpoint.trim()));
        if let Some(url) = &s.url {
            use crate::mcp::sign_in::SignIn;
            let kept = crate::mcp::sign_in::store_of(server.name(), url).map(|s| s.state());
            let state = match kept {
                Some(SignIn::Here(_)) => "signed in".to_string(),
                Some(SignIn::ForAnotherUrl(_)) => format!(
                    "signed in to another URL: run `sandcrab mcp login {}`",
                    server.name()
                ),
                _ => "not signed in (`sandcrab mcp login NAME` if it needs it)".to_string(),
            };
            outln!("  sign-in:  {}", sanitize(&state));
        }
        if s.command.is_some() {
            let spec = crate::mcp::confinement_spec(
                server.grant(),
                ctx,
                std::path::Path::new("<scratch>"),
            );
            let paths = |list: &[PathBuf]| {
                list.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            outln!("  sandbox:  {}", spec.mode);
            outln!("  reads:    {}", sanitize(&paths(&spec.read)));
            outln!("  writes:   {}", sanitize(&paths(&spec.write)));
            outln!("  network:  {}", if spec.network { "yes" } else { "no" });
            outln!(
                "  env:      {}",
                if s.env.is_empty() {
                    "none".to_string()
                } else {
                    s.env.join(", ")
                }
            );
        }
        if no_connect {
            continue;
        }
        match server.tools().await {
            Ok(tools) => {
                for tool in tools {
                    outln!(
                        "  tool {}  {}",
                        crate::mcp::tool_name(server.name(), &tool.name),
                        sanitize(tool.description.lines().next().unwrap_or_default())
                    );
                }
            }
            Err(e) => outln!("  error: {}", sanitize(&e.to_string())),
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let setup = args.host.setup().await?;
    setup.print_warnings();
    let selection = setup.config.agent.tool_selection();
    // The configured MCP servers' tools are served onward, as
    // `SERVER__tool`, through the same approvals, hooks and receipts.
    // Not when this is itself another sandcrab's MCP server: no loops.
    let nested = std::env::var_os(crate::mcp::SERVED_BY_SANDCRAB).is_some();
    let configured = match nested {
        true => Default::default(),
        false => setup.config.mcp.servers.clone(),
    };
    if nested && !setup.config.mcp.servers.is_empty() {
        errln!(
            "warning: this sandcrab is another sandcrab's MCP server: its configured MCP servers are not served onward"
        );
    }
    let servers = McpServers::new(&configured, setup.host.sandbox_context());
    let mut onward = crate::tools::ToolRegistry::new();
    let mut warnings = servers
        .register_tools(&mut onward, |server, tool| {
            selection.admits(tool, Some(server))
        })
        .await;
    let known = |name: &str| onward.get(name).is_some() || servers.iter().any(|s| s.name() == name);
    let set = tool_set::served_tools(&setup.host, &selection, &known);
    warnings.extend(set.warnings);
    for warning in &warnings {
        errln!("warning: {}", super::terminal::sanitize(warning));
    }
    let mut registry = set.registry;
    registry.overlay(&onward);
    let catalog = ToolCatalog::new(registry);
    let truncation = setup.config.truncation_policy();
    // The operator's rules decide every call (deny rules hold here too);
    // `ask` asks the client, when it can answer.
    let mut rules = setup.config.approvals.parsed.clone();
    rules.extend(crate::approvals::rules_from_flags(&args.approve)?);
    let approvals = crate::approvals::Approvals {
        rules,
        mode: args
            .approvals
            .unwrap_or_else(|| setup.config.approvals.mode_or(Default::default())),
    };
    let workspace = setup.host.sandbox_context().workspace.clone();
    let (hooks, hook_warnings) = crate::hooks::Hooks::load(
        &setup.config.hooks,
        setup.config.project_hooks.as_ref(),
        &setup.config.consented,
        setup.host.sandbox_context(),
    );
    for warning in &hook_warnings {
        errln!("warning: {}", super::terminal::sanitize(warning));
    }
    let server = ToolServer::new(catalog.clone(), truncation)
        .with_approvals(approvals, workspace)
        .with_hooks(hooks);
    let live = LivePlugins::serving(setup.host, catalog, selection);
    live.keep_tools(onward);
    let report = |r: PluginReport| errln!("plugins: {}", super::terminal::sanitize(&r.to_string()));
    let _watching = args
        .watch_plugins
        .then(|| live.watch(PluginWatcher::new(setup.roots), WATCH_INTERVAL, report));
    match args.http {
        None => serve_stdio(server).await,
        Some(port) => serve_http(server, port, &args).await,
    }
}

async fn serve_stdio(server: ToolServer) -> anyhow::Result<ExitCode> {
    let running = server
        .for_new_client()
        .serve(rmcp::transport::stdio())
        .await
        .context("MCP client did not initialize")?;
    running.waiting().await?;
    Ok(ExitCode::SUCCESS)
}

async fn serve_http(server: ToolServer, port: u16, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let token_file = match &args.token_file {
        Some(f) => f.clone(),
        None => token::default_file("mcp.token")
            .context("no runtime or config directory for the token: pass --token-file")?,
    };
    let token = token::issue(&token_file)?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = shutdown.child_token();
    let service = StreamableHttpService::new(
        move || Ok(server.for_new_client()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard = Arc::new(guard::Guard {
        token,
        cors: args.cors.clone(),
        allow_remote: false,
        max_body: MAX_MCP_BODY,
    });
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(guard, guard::check));
    let ip = std::net::Ipv4Addr::LOCALHOST;
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip.into(), port))
        .await
        .with_context(|| format!("cannot listen on {ip}:{port}"))?;
    let bound = listener.local_addr()?;
    if bound.port() == 0 {
        bail!("no port was bound");
    }
    errln!(
        "sandcrab mcp serve: listening on http://{bound}/mcp; token in {}",
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
    crate::server::serve(listener, app, Default::default(), async move {
        shutdown.cancelled().await
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}
