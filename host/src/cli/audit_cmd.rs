//! `sandcrab audit ID`: one line per tool call of a stored session — the
//! tool, who ran it, which rules allowed it (file and key, or a built-in
//! default), and what its programs ran under.

use std::process::ExitCode;

use clap::Args;

use super::sessions_cmd::{Place, receipts};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The session (see `sandcrab sessions list`).
    id: String,
    /// Print the receipts as JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    place: Place,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let (_, store) = args.place.open()?;
    let all = receipts(store.as_ref(), &args.id)?;
    if args.json {
        outln!("{}", super::terminal::json_pretty(&all));
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        errln!("session {} has no tool calls with receipts", args.id);
    }
    for (n, receipt) in all.iter().enumerate() {
        outln!("{:>3}. {}", n + 1, receipt.summary());
        for denial in &receipt.standing.denials {
            outln!("     refused: {denial}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
