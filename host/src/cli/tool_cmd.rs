//! `sandcrab tool call NAME --args JSON`: one tool call from the command
//! line — the plugin author's test loop.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use super::setup::HostArgs;
use crate::tools::{ToolCallRequest, ToolContext, dispatch};

#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Call one tool and print its output (exit 1 if it reports an error).
    Call {
        /// Tool name.
        name: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Print what the model would see (truncated) instead of the full output.
        #[arg(long)]
        truncated: bool,
        #[command(flatten)]
        host: HostArgs,
    },
}

pub async fn run(cmd: ToolCommand) -> anyhow::Result<ExitCode> {
    let ToolCommand::Call {
        name,
        args,
        truncated,
        host,
    } = cmd;
    let arguments: serde_json::Value =
        serde_json::from_str(&args).with_context(|| format!("--args is not valid JSON: {args}"))?;
    let setup = host.setup().await?;
    setup.print_warnings();
    // The tool the model would get under this name: its owner after the
    // collision rules, not whichever plugin loaded last.
    let mut registry = crate::tools::ToolRegistry::new();
    for (tool, plugin) in setup.host.tool_owners() {
        registry.register_plugin_tool(plugin, tool);
    }
    // And the configured MCP servers' tools, as `SERVER__tool`.
    let mcp = crate::mcp::McpServers::new(&setup.config.mcp.servers, setup.host.sandbox_context());
    if name.contains("__") {
        for warning in mcp.register_tools(&mut registry, |_, _| true).await {
            errln!("warning: {}", super::terminal::sanitize(&warning));
        }
    }
    let call = ToolCallRequest {
        id: "cli".into(),
        name: name.clone(),
        arguments,
    };
    let ctx = ToolContext {
        session_id: "cli".into(),
        call_id: "cli".into(),
        live_output: None,
        working_dir: None,
        detach: None,
        programs: None,
        background: false,
        // The operator calls it: a call that asks for the network gets it.
        network: registry.get(&name).is_some_and(|t| t.spec.traits.network)
            && call.arguments["network"] == serde_json::json!(true),
    };
    let outcome = dispatch(&registry, &call, &ctx).await;
    let failed = outcome.is_error();
    let text = if truncated {
        setup
            .config
            .truncation_policy()
            .apply(&name, outcome.output_limit, &outcome.content)
    } else {
        outcome.content
    };
    if failed {
        errln!("error: {text}");
        return Ok(ExitCode::FAILURE);
    }
    out!("{text}");
    if !text.ends_with('\n') {
        outln!();
    }
    Ok(ExitCode::SUCCESS)
}
