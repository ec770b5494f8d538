//! `sandcrab tool call NAME --args JSON`: one tool call from the command
//! line — the plugin author's test loop.

use std::process::ExitCode;

use clap::Subcommand;

use super::setup::HostArgs;
use crate::approvals::{ApprovalRecord, Subject};
use crate::pipeline::{Asked, CallFront, Judgement};
use crate::tools::{CallPlace, PreparedCall, ToolContext, ToolOutcome, dispatch};

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
    let arguments: serde_json::Value = serde_json::from_str(&args).map_err(|e| {
        super::UsageError(format!(
            "--args is not valid JSON ({e}): {}",
            super::terminal::one_line(&args, 200)
        ))
    })?;
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
    let place = CallPlace {
        workspace: &setup.workspace,
        working_dir: &setup.workspace,
    };
    let call = PreparedCall::new("cli", &name, &arguments, &registry, place);
    let front = OperatorFront {
        registry: &registry,
        workspace: &setup.workspace,
    };
    // A server's question (elicitation) is put to the operator here, on
    // this terminal (or read from stdin).
    let questions = crate::approvals::PermissionQueue::new(QUESTION_TIMEOUT);
    mcp.ask_through(questions.clone());
    let answering = tokio::spawn(answer_questions(questions, setup.workspace.clone()));
    let outcome = crate::pipeline::run_call(&front, &call).await.outcome;
    answering.abort();
    // A question still open when the call ended may have left the line
    // editor mid-read: the terminal goes back as it was.
    super::tty_mode::restore();
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

/// How long a server's question waits for the operator.
const QUESTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Answer the questions put to `queue` from the terminal, as they come
/// (the input is opened at the first one).
async fn answer_questions(
    queue: std::sync::Arc<crate::approvals::PermissionQueue>,
    workspace: std::path::PathBuf,
) {
    let mut waiting = queue.waiting();
    let mut input = None;
    while waiting.changed().await.is_ok() {
        if *waiting.borrow_and_update() == 0 {
            continue;
        }
        let input =
            input.get_or_insert_with(|| super::line_input::LineInput::open(&workspace, &[]));
        super::approval_prompt::answer_waiting(&queue, input, &workspace).await;
    }
}

/// The operator's own call: they asked for it by running the command, so
/// nobody else is asked, and a call that asks for the network gets it.
struct OperatorFront<'a> {
    registry: &'a crate::tools::ToolRegistry,
    workspace: &'a std::path::Path,
}

#[async_trait::async_trait]
impl CallFront for OperatorFront<'_> {
    fn workspace(&self) -> &std::path::Path {
        self.workspace
    }

    fn judge(&self, _subject: &Subject) -> Judgement {
        Judgement::operator()
    }

    async fn ask(&self, _: &PreparedCall, _: &Subject, _: &ApprovalRecord) -> Option<Asked> {
        None
    }

    async fn run(&self, call: &PreparedCall, network: bool) -> ToolOutcome {
        let ctx = ToolContext {
            session_id: "cli".into(),
            call_id: call.id.clone(),
            network,
            ..ToolContext::default()
        };
        dispatch(self.registry, &call.request(), &ctx).await
    }
}
