//! The `sandcrab` command line.

// First: its print macros serve every module below.
#[macro_use]
mod terminal;

mod above_prompt;
mod acp_cmd;
mod agent_cmd;
mod approval_prompt;
mod approvals_cmd;
mod audit_cmd;
mod bridge_client_cmd;
mod chat_cmd;
mod chat_commands;
mod chat_state;
mod hooks_cmd;
mod kept_setup;
mod line_input;
mod mcp_cmd;
mod mentions;
mod paste;
mod plugins;
mod render;
mod replay_cmd;
mod run_cmd;
mod sandbox_cmd;
mod serve_cmd;
mod session_pick;
mod sessions_cmd;
mod setup;
mod spend_prompt;
mod store_cmd;
mod tool_cmd;
mod trust_cmd;
mod tty_mode;
mod view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use setup::HostArgs;

/// sandcrab: a coding-agent host whose tools run as sandboxed WebAssembly
/// components.
#[derive(Debug, Parser)]
#[command(name = "sandcrab", version, about, long_about = None)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one input to completion: the final answer on stdout, narration
    /// and tool activity on stderr (or every event as JSON lines and a last
    /// RESULT line with --json).
    #[command(
        after_help = "Exit status: 0 the agent finished; 1 an error stopped it; 2 the command line was wrong; 3 --max-turns or --max-tool-rounds stopped it; 4 a spend cap stopped it (--max-tokens-total, --max-cost, --max-duration, [budget]); 128+N a signal N (130: Ctrl-C)."
    )]
    Run {
        #[command(flatten)]
        agent: agent_cmd::AgentArgs,
        /// Most seconds to wait for background jobs still running when the
        /// agent is done (then they are cancelled).
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        wait_jobs: u64,
        /// Also write the final answer to FILE.
        #[arg(long, value_name = "FILE")]
        output_last_message: Option<std::path::PathBuf>,
        /// What to ask the agent (`-`, or none with stdin not a terminal:
        /// read it from stdin).
        prompt: Option<String>,
    },
    /// An interactive session (Ctrl-C interrupts the current turn, /exit quits).
    Chat {
        #[command(flatten)]
        agent: agent_cmd::AgentArgs,
        /// Reload a third-party plugin when its directory changes, and load
        /// plugins added to the plugin folders (`--watch-plugins false`
        /// turns it off).
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        watch_plugins: bool,
    },
    /// Plugins: list, inspect, check, pin, grant, new (a buildable plugin
    /// project in Rust, Python or JavaScript); install, update, remove and
    /// verify (from OCI registries, signed); statement, package, publish.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// Call a tool directly.
    #[command(subcommand)]
    Tool(tool_cmd::ToolCommand),
    /// Hooks: list them with their consent state, import Claude Code's.
    #[command(subcommand)]
    Hooks(hooks_cmd::HooksCommand),
    /// Trust a workspace's own configuration (sandcrab.toml, .sandcrab/):
    /// until then it may set project settings only, and its plugins are
    /// not loaded.
    Trust(trust_cmd::TrustArgs),
    /// What this host's kernel lets sandcrab enforce (status, check), and
    /// what the host keeps from every tool and program (kept).
    #[command(subcommand)]
    Sandbox(sandbox_cmd::SandboxCommand),
    /// Serve the Agent Client Protocol on stdio, for editors (Zed,
    /// JetBrains, Neovim, Emacs): see docs/editors.md.
    Acp {
        #[command(flatten)]
        agent: agent_cmd::AgentArgs,
    },
    /// Serve the agent over HTTP on 127.0.0.1 (the lifecycle harness and
    /// its event stream; see `sandcrab agent` for a client).
    Serve(serve_cmd::ServeArgs),
    /// Drive a running `sandcrab serve`: init, start, stop, send,
    /// interrupt, status, clear, history, events; permissions, approve,
    /// deny.
    Agent(bridge_client_cmd::AgentClientArgs),
    /// The Model Context Protocol: serve sandcrab's tools to MCP clients
    /// (serve), and the configured MCP servers' tools (list).
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// Saved sessions: list, show, verify, export, import, reindex,
    /// delete (continue one with `chat --resume ID` or `--continue`).
    #[command(subcommand)]
    Sessions(sessions_cmd::SessionsCommand),
    /// Re-run a saved session offline against its recording (no network,
    /// no program, no file write), checking every request the host builds
    /// against the recorded one; or `--fork-at N` to continue from there.
    Replay(replay_cmd::ReplayArgs),
    /// The session store: bring its schema up to date, copy a history
    /// into another store (a SQLite file into a shared PostgreSQL).
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// One line per tool call of a saved session: the tool, who ran it,
    /// which rule allowed it, what its programs ran under.
    Audit(audit_cmd::AuditArgs),
    /// The approval rules in force in a workspace, and where each was
    /// written.
    #[command(subcommand)]
    Approvals(approvals_cmd::ApprovalsCommand),
}

/// Run the command line; the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    // Programs sandcrab starts run as the same user: keep them out of this
    // process's /proc entries (environment, memory) and core dumps.
    crate::process::harden_host();
    kept_setup::install_defaults();
    crate::mcp::tls::install_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            errln!("sandcrab: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run {
                agent,
                wait_jobs,
                output_last_message,
                prompt,
            } => {
                let request = run_cmd::RunRequest {
                    prompt,
                    wait_jobs,
                    output_last_message,
                };
                until_stopped(run_cmd::run(agent, request)).await
            }
            Command::Chat {
                agent,
                watch_plugins,
            } => chat_cmd::chat(agent, watch_plugins).await,
            Command::Plugins(cmd) => plugins::run(cmd).await,
            Command::Tool(cmd) => until_stopped(tool_cmd::run(cmd)).await,
            Command::Trust(args) => trust_cmd::run(args),
            Command::Hooks(cmd) => hooks_cmd::run(cmd),
            Command::Sandbox(cmd) => sandbox_cmd::run(cmd).await,
            Command::Sessions(cmd) => sessions_cmd::run(cmd).await,
            Command::Audit(args) => audit_cmd::run(args),
            Command::Replay(args) => replay_cmd::run(args).await,
            Command::Store(cmd) => store_cmd::run(cmd),
            Command::Approvals(cmd) => approvals_cmd::run(cmd),
            Command::Mcp(cmd) => mcp_cmd::run(cmd).await,
            Command::Serve(args) => serve_cmd::run(args).await,
            Command::Acp { agent } => acp_cmd::run(agent).await,
            Command::Agent(args) => bridge_client_cmd::run(args).await,
        }
    });
    // A plugin call that timed out while blocked in a file operation (a
    // FIFO nobody writes) leaves a blocking-pool thread behind: do not wait
    // for it to exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    // What telemetry holds goes out, waited for briefly: a collector that
    // is gone costs at most this.
    let dropped = crate::telemetry::shutdown(std::time::Duration::from_millis(1500));
    if dropped > 0 {
        errln!(
            "warning: telemetry: {dropped} span(s) dropped (the collector was slow or unreachable)"
        );
    }
    // Programs cut off as sandcrab stops (a cancelled background job) are
    // swept like any other before it exits.
    crate::process::wait_for_sweeps(std::time::Duration::from_secs(30));
    match result {
        Ok(code) => code,
        Err(err) => {
            errln!("sandcrab: {}", terminal::sanitize(&format!("{err:#}")));
            // A command line that cannot work exits 2, as clap's own
            // refusals do.
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// A command line that cannot work as given (a missing or empty prompt, a
/// workspace or file that is not there): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Run `work` until it ends or a signal stops sandcrab (SIGINT, SIGTERM,
/// SIGHUP): then every program still running is killed and what it made
/// swept (see [`crate::process::stop_and_sweep_all`]), and sandcrab exits
/// as the signal would have ended it.
async fn until_stopped(
    work: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return work.await;
    };
    let stopped = async {
        tokio::select! {
            _ = int.recv() => libc::SIGINT,
            _ = term.recv() => libc::SIGTERM,
            _ = hup.recv() => libc::SIGHUP,
        }
    };
    tokio::select! {
        ended = work => ended,
        signal = stopped => {
            crate::process::stop_and_sweep_all();
            std::process::exit(128 + signal);
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        // rmcp warns of every error answer it sends, as a debug dump: the
        // client already has the answer.
        0 => "warn,rmcp=error",
        1 => "info,sandcrab=info",
        2 => "debug,cranelift_codegen=info,wasmtime=info",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
