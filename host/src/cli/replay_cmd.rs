//! `sandcrab replay ID [--until N] [--fork-at N [--model M] [--provider P]]`:
//! re-run a saved session offline against its recording, or start a new
//! session from its state after a model call.

use std::process::ExitCode;

use clap::Args;

use super::sessions_cmd::Place;
use super::terminal::sanitize;
use crate::replay::fork::{ForkOptions, fork};
use crate::replay::{ReplayOptions, Stop, replay};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The saved session (`sandcrab sessions list`).
    id: String,
    /// Stop after this many model calls.
    #[arg(long, value_name = "N", conflicts_with = "fork_at", value_parser = clap::value_parser!(u64).range(1..))]
    until: Option<u64>,
    /// Start a new session from the state after model call N (a normal
    /// session: continue it with `sandcrab chat --resume NEW`).
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    fork_at: Option<u64>,
    /// The fork's model.
    #[arg(long, requires = "fork_at")]
    model: Option<String>,
    /// The fork's provider.
    #[arg(long, requires = "fork_at")]
    provider: Option<crate::llm::ProviderKind>,
    #[command(flatten)]
    place: Place,
}

/// Longest value shown of a difference.
const SHOWN: usize = 400;

pub async fn run(mut args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let (_, store) = args.place.open()?;
    args.id = store.resolve_id(&args.id)?;
    if let Some(at) = args.fork_at {
        let options = ForkOptions {
            model: args.model,
            provider: args.provider.map(|p| p.id().to_string()),
            workspace: args
                .place
                .given_workspace()?
                .map(|w| w.display().to_string()),
        };
        let forked = fork(store.as_ref(), &args.id, at, &options).await?;
        outln!(
            "forked session {} after model call {at} as {} ({}); continue it with `sandcrab chat --workspace {} --resume {}`",
            args.id,
            forked.id,
            super::terminal::count(forked.turns as u64, "turn"),
            sanitize(&forked.workspace),
            forked.id
        );
        return Ok(ExitCode::SUCCESS);
    }
    let started = std::time::Instant::now();
    let report = replay(
        store.as_ref(),
        &args.id,
        ReplayOptions { until: args.until },
    )
    .await?;
    let count = super::terminal::count;
    let counts = format!(
        "{}, {}, {}{}",
        count(report.inputs as u64, "input"),
        count(report.model_calls as u64, "model call"),
        count(report.tool_answers as u64, "tool answer"),
        match report.starts {
            0 | 1 => String::new(),
            2 => ", resumed once".to_string(),
            n => format!(", resumed {} times", n - 1),
        }
    );
    for reason in &report.spend_stops {
        outln!(
            "a spend cap stopped an input where it stopped the session: {}",
            sanitize(reason)
        );
    }
    match report.stop {
        None => {
            outln!(
                "replayed session {}: {counts} in {} ms — every request the host built is the recorded one{}",
                args.id,
                started.elapsed().as_millis(),
                if report.recording_capped {
                    " (the recording stopped at its size cap; what followed was not recorded)"
                } else {
                    ""
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Stop::Until(n)) => {
            outln!(
                "replayed session {} up to model call {n}: {counts} — every request matched",
                args.id
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Stop::Diverged(d)) => {
            outln!(
                "replay of session {} diverged at model call {}: {}\n  recorded: {}\n  now:      {}",
                args.id,
                d.model_call,
                sanitize(&d.field),
                shown(&d.recorded),
                shown(&d.now)
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// A value on one line, cut.
fn shown(value: &str) -> String {
    super::terminal::one_line(value, SHOWN)
}
