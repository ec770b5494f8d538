//! `sandcrab approvals list|revoke`: the approval rules in force in a
//! workspace — the operator's, then the project's — each with its number,
//! where it applies and the file and line it was written at; and taking
//! the operator's rules back out of their file by number.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;

use super::terminal::one_line;
use crate::approvals::{Rule, RuleSource, Rules};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the rules in force here (or, with --all, every rule of your
    /// configuration file, whatever workspace it is for), with where each
    /// applies and where it was written.
    List(ListArgs),
    /// Remove rules from your configuration file, by the numbers `list`
    /// shows (#N).
    Revoke(RevokeArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short, long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Configuration file (default: the user's).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Every rule of your configuration file, for any workspace.
    #[arg(long)]
    all: bool,
    /// Print JSON instead.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The rules' numbers, as `sandcrab approvals list` shows them.
    #[arg(required = true, value_name = "N")]
    numbers: Vec<usize>,
    /// Configuration file (default: the user's).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub fn run(cmd: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ApprovalsCommand::List(args) => list(args),
        ApprovalsCommand::Revoke(args) => revoke(args),
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let workspace = super::setup::resolve_workspace(args.workspace.as_deref())?;
    let loaded = Config::load(&workspace, args.config.as_deref())?;
    // What was left out (a project file that could not be used) is said,
    // or its rules would silently be missing from the list.
    for warning in &loaded.warnings {
        errln!("warning: {}", super::terminal::sanitize(warning));
    }
    let approvals = &loaded.config.approvals;
    // Unset, the mode depends on the command (chat asks, run cannot).
    let asking = approvals.mode_or(super::agent_cmd::ASKING_DEFAULT);
    let unattended = approvals.mode_or(super::agent_cmd::UNATTENDED_DEFAULT);
    let rules: Vec<Rule> = if args.all {
        operator_rules(args.config.clone())?
            .iter()
            .cloned()
            .collect()
    } else {
        approvals.parsed.iter().cloned().collect()
    };
    // Numbers name rules of the operator's file, which revoke edits; a
    // rules file it names, or a project's, is edited by hand.
    let operator = operator_file(args.config.clone()).ok();
    let number = |r: &Rule| (Some(&r.file) == operator.as_ref()).then_some(r.number);
    if args.json {
        let list: Vec<_> = rules
            .iter()
            .map(|r| {
                json!({
                    "number": number(r),
                    "at": r.at,
                    "decision": r.decision,
                    "matches": r.describe(),
                    "workspace": r.workspace,
                })
            })
            .collect();
        let doc = json!({
            "mode": approvals.mode.map(|m| m.as_str()),
            "effective": {"chat": asking.as_str(), "serve": asking.as_str(), "run": unattended.as_str()},
            "rules": list,
        });
        outln!("{}", super::terminal::json_pretty(&doc));
        return Ok(ExitCode::SUCCESS);
    }
    if asking == unattended {
        outln!(
            "mode: {} (for calls no rule speaks to; `--approvals` overrides it per run)",
            asking.as_str()
        );
    } else {
        outln!(
            "mode: {} in chat and serve, {} in run (not set: each command's default; set [approvals] mode, or `--approvals` per run)",
            asking.as_str(),
            unattended.as_str()
        );
    }
    if rules.is_empty() {
        outln!("no approval rules (add [[approvals.rules]] to your configuration)");
    }
    for rule in &rules {
        let number = match (number(rule), rule.origin) {
            (Some(n), _) => format!("#{n}"),
            (None, RuleSource::Project) => "project".into(),
            (None, RuleSource::Trusted) => "file".into(),
        };
        outln!(
            "{number:<8} {:<5}  {}  {}  ({})",
            rule.decision.as_str(),
            one_line(&rule.describe(), usize::MAX),
            one_line(&rule.applies_in(), usize::MAX),
            one_line(&rule.at, usize::MAX)
        );
    }
    if !rules.is_empty() {
        outln!("(`sandcrab approvals revoke N` removes rule #N from your configuration)");
    }
    Ok(ExitCode::SUCCESS)
}

fn revoke(args: RevokeArgs) -> anyhow::Result<ExitCode> {
    let file = operator_file(args.config)?;
    let removed = crate::config::remembered::revoke_rules(&file, &args.numbers)?;
    for rule in removed {
        outln!(
            "revoked #{}: {} {} {} (was at {})",
            rule.number,
            rule.decision.as_str(),
            one_line(&rule.describe(), usize::MAX),
            one_line(&rule.applies_in(), usize::MAX),
            one_line(&rule.at, usize::MAX)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The operator's configuration file: `--config`, else the user's.
fn operator_file(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    explicit
        .or_else(Config::user_file)
        .ok_or_else(|| anyhow::anyhow!("no configuration file: set HOME or pass --config"))
}

/// Every rule of the operator's file.
fn operator_rules(explicit: Option<PathBuf>) -> anyhow::Result<Rules> {
    let file = operator_file(explicit)?;
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => anyhow::bail!("{}: {e}", file.display()),
    };
    Ok(Rules::parse(&text, &file, RuleSource::Trusted)?)
}
