//! `sandcrab approvals list`: the approval rules in force in a workspace —
//! the operator's, then the project's — each with the file and line it
//! was written at, and the mode for calls no rule speaks to.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the rules in force here, strictest decision first within each
    /// file's order, with where each was written.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short, long, value_name = "DIR")]
    workspace: Option<std::path::PathBuf>,
    /// Configuration file (default: the user's).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Print JSON instead.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    let ApprovalsCommand::List(args) = cmd;
    let workspace = super::setup::resolve_workspace(args.workspace.as_deref())?;
    let loaded = Config::load(&workspace, args.config.as_deref())?;
    let approvals = &loaded.config.approvals;
    let mode = approvals.mode.unwrap_or_default();
    let rules: Vec<_> = approvals.parsed.iter().collect();
    if args.json {
        let list: Vec<_> = rules
            .iter()
            .map(|r| json!({"at": r.at, "decision": r.decision, "matches": r.describe()}))
            .collect();
        let mode = mode.as_str();
        outln!(
            "{}",
            super::terminal::json_pretty(&json!({"mode": mode, "rules": list}))
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "mode: {} (for calls no rule speaks to; `--approvals` overrides it per run)",
        mode.as_str()
    );
    if rules.is_empty() {
        outln!("no approval rules (add [[approvals.rules]] to your configuration)");
    }
    for rule in rules {
        outln!(
            "{:<5}  {}  ({})",
            rule.decision.as_str(),
            super::terminal::sanitize(&rule.describe()),
            super::terminal::sanitize(&rule.at)
        );
    }
    Ok(ExitCode::SUCCESS)
}
