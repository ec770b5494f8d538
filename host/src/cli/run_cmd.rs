//! `sandcrab run`: one input to completion, for scripts and CI. The prompt
//! comes from the argument or stdin; stdout carries the final answer only
//! (narration and tool activity go to stderr) or, with `--json`, every
//! event and a last RESULT line; the exit code says how it ended.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::agent_cmd::{AgentArgs, warn_session};
use super::render::{Answers, Renderer};
use super::view::style::Look;
use crate::agent::{EndReason, Session, SessionError, TurnLimitKind};
use crate::llm::Usage;
use crate::llm::spend::{CapReached, SpendReport};

/// The most of stdin read as a prompt.
const MAX_STDIN_PROMPT: u64 = 10 * 1024 * 1024;

/// What `run` was asked to do besides the agent's options.
#[derive(Debug)]
pub struct RunRequest {
    /// The prompt as given: `-` or none reads stdin.
    pub prompt: Option<String>,
    /// Most seconds to wait for background jobs at the end.
    pub wait_jobs: u64,
    /// Where to write the final answer too.
    pub output_last_message: Option<PathBuf>,
}

/// How a run ended; each has its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model finished: exit 0.
    Success,
    /// An error stopped it (the provider, the store): exit 1.
    Error,
    /// `--max-turns` / `[agent] max_turns` stopped it: exit 3.
    MaxTurns,
    /// `--max-tool-rounds` / `[agent] max_tool_rounds` stopped it: exit 3.
    MaxToolRounds,
    /// A spend cap (`--max-tokens-total`, `--max-cost`, `--max-duration`,
    /// `[budget]`) stopped it before a model call: exit 4.
    SpendCap,
}

impl RunStatus {
    /// The process's exit code (2 is the usage error of a bad command
    /// line; 130 and 143 a signal).
    pub fn exit_code(self) -> u8 {
        match self {
            RunStatus::Success => 0,
            RunStatus::Error => 1,
            RunStatus::MaxTurns | RunStatus::MaxToolRounds => 3,
            RunStatus::SpendCap => 4,
        }
    }

    fn of_stop(stop: &Stop) -> Self {
        match stop {
            Stop::Limit(TurnLimitKind::MaxTurns) => RunStatus::MaxTurns,
            Stop::Limit(TurnLimitKind::MaxToolRoundsPerInput) => RunStatus::MaxToolRounds,
            Stop::Cap(_) => RunStatus::SpendCap,
        }
    }
}

/// What stopped the agent before it was done.
enum Stop {
    Limit(TurnLimitKind),
    Cap(CapReached),
}

impl Stop {
    /// What stopped the last input of `session`, if anything did.
    fn of(session: &Session) -> Option<Stop> {
        session
            .spend_stopped()
            .map(Stop::Cap)
            .or_else(|| session.stopped_by().map(Stop::Limit))
    }
}

/// The last line of `run --json`, laid out as events are.
#[derive(Debug, Serialize)]
struct ResultLine {
    kind: &'static str,
    timestamp: String,
    /// None when the run failed before a session existed.
    session_id: Option<String>,
    data: RunResult,
}

impl ResultLine {
    fn print(session_id: Option<String>, data: RunResult) {
        let line = ResultLine {
            kind: "RESULT",
            timestamp: crate::time::now_rfc3339(),
            session_id,
            data,
        };
        outln!("{}", super::terminal::json(&line));
    }
}

/// How the run ended, in one object.
#[derive(Debug, Serialize)]
struct RunResult {
    status: RunStatus,
    /// Model turns taken by this run.
    turns: u32,
    usage: Usage,
    /// The session's spend against its caps, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    spend: Option<SpendReport>,
    /// The cap that stopped the run, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    spend_cap: Option<CapReached>,
    duration_ms: u64,
    /// The final answer's text.
    result: Option<String>,
    error: Option<String>,
}

/// The prompt: the argument, or stdin when it is `-` or missing and stdin
/// is not a terminal.
fn read_prompt(given: Option<String>) -> anyhow::Result<String> {
    let from_stdin = match given.as_deref() {
        Some("-") => true,
        Some(_) => false,
        None if !std::io::stdin().is_terminal() => true,
        None => {
            return Err(usage(
                "no prompt: give it as an argument (`sandcrab run \"…\"`), or `-` to read it from stdin",
            ));
        }
    };
    let prompt = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_STDIN_PROMPT + 1)
            .read_to_string(&mut text)
            .map_err(|e| anyhow::anyhow!("reading the prompt from stdin: {e}"))?;
        if text.len() as u64 > MAX_STDIN_PROMPT {
            anyhow::bail!("the prompt on stdin is over {MAX_STDIN_PROMPT} bytes");
        }
        text
    } else {
        given.unwrap_or_default()
    };
    if prompt.trim().is_empty() {
        return Err(usage("the prompt is empty"));
    }
    Ok(prompt)
}

fn usage(why: &str) -> anyhow::Error {
    super::UsageError(why.to_string()).into()
}

/// Run one input to completion. With `--json`, a run that could not start
/// (no key, a wrong session) still ends with its RESULT line.
pub async fn run(args: AgentArgs, request: RunRequest) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let json = args.json;
    let outcome = run_started(args, request, started).await;
    if let (Err(err), true) = (&outcome, json) {
        ResultLine::print(
            None,
            RunResult {
                status: RunStatus::Error,
                turns: 0,
                usage: Usage::default(),
                spend: None,
                spend_cap: None,
                duration_ms: started.elapsed().as_millis() as u64,
                result: None,
                error: Some(format!("{err:#}")),
            },
        );
    }
    outcome
}

async fn run_started(
    args: AgentArgs,
    request: RunRequest,
    started: Instant,
) -> anyhow::Result<ExitCode> {
    let prompt = read_prompt(request.prompt)?;
    // Where the answer goes must be writable before the work is done.
    if let Some(path) = &request.output_last_message {
        let folder = folder_of(path);
        if !folder.is_dir() {
            return Err(usage(&format!(
                "--output-last-message {}: {} is not a folder that exists",
                path.display(),
                folder.display()
            )));
        }
    }
    let (setup, kit) = args.kit(false).await?;
    let session = args.session(&kit).await?;
    warn_session(&setup, &kit, &session);
    let answers = if args.json {
        Answers::Streamed
    } else {
        Answers::FinalOnStdout
    };
    let renderer = Renderer::spawn_with(
        session.events(),
        args.json,
        Look::detect(args.json),
        answers,
    );
    let (used_before, turns_before) = (session.used(), session.model_turns());
    let result = work(&session, &prompt, request.wait_jobs).await;
    let status = match &result {
        Err(_) => RunStatus::Error,
        Ok(Some(stop)) => RunStatus::of_stop(stop),
        Ok(None) => RunStatus::Success,
    };
    session
        .end(match status {
            RunStatus::Success => EndReason::Completed,
            RunStatus::Error => EndReason::Error,
            _ => EndReason::Aborted,
        })
        .await;
    renderer.finish().await;
    // This run's answer only: a resumed session's earlier answer is not it.
    let last = if session.model_turns() > turns_before {
        session.last_assistant_text()
    } else {
        None
    };
    if let (Some(path), Some(text)) = (&request.output_last_message, &last) {
        write_answer(path, text)?;
    }
    // A model error was shown already (an ERROR event); others were not.
    let error = result.as_ref().err();
    if let Some(err) = &error
        && !matches!(err, SessionError::Llm(_))
    {
        errln!("sandcrab: {}", super::terminal::sanitize(&err.to_string()));
    }
    if args.json {
        let outcome = RunResult {
            status,
            turns: session.model_turns() - turns_before,
            usage: session.used().since(&used_before),
            spend: session.spend_report(),
            spend_cap: match &result {
                Ok(Some(Stop::Cap(reached))) => Some(reached.clone()),
                _ => None,
            },
            duration_ms: started.elapsed().as_millis() as u64,
            result: last,
            error: error.map(|e| e.to_string()),
        };
        ResultLine::print(Some(session.id().to_string()), outcome);
    }
    Ok(ExitCode::from(status.exit_code()))
}

/// The folder the answer file `path` goes in (`.` for a bare name).
fn folder_of(path: &std::path::Path) -> &std::path::Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    }
}

/// Write the final answer to `path` as the host writes for a session:
/// never into what the host keeps, and never through a link (a link
/// planted at that name, by a repository or a program, is replaced by the
/// file, not followed).
fn write_answer(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let fail = |why: String| anyhow::anyhow!("--output-last-message {}: {why}", path.display());
    let name = path
        .file_name()
        .ok_or_else(|| fail("names no file".into()))?;
    let folder = crate::kept::real(folder_of(path));
    crate::kept::current()
        .host_write(&folder.join(name), None)
        .map_err(|refusal| fail(refusal.to_string()))?;
    crate::kept::safe_fs::write_beneath(
        &folder,
        std::path::Path::new(name),
        text.as_bytes(),
        Some(0o644),
    )
    .map_err(|e| fail(e.to_string()))
}

/// Submit `prompt`, then wait for background jobs still running (each
/// that finishes gives the agent a turn to react), at most `wait_jobs`
/// seconds; what stopped the agent, if anything did (the input's limit or
/// cap, or a later turn's a finished job woke).
async fn work(
    session: &std::sync::Arc<Session>,
    prompt: &str,
    wait_jobs: u64,
) -> Result<Option<Stop>, SessionError> {
    session.submit(prompt).await?;
    let stopped = Stop::of(session);
    if !session.settle(Duration::from_secs(wait_jobs)).await? {
        let cancelled = session.cancel_jobs();
        session.warn(&format!(
            "{} background job(s) still running after {wait_jobs} s were cancelled: {} (raise --wait-jobs to wait longer)",
            cancelled.len(),
            cancelled.join(", ")
        ));
    }
    Ok(stopped.or_else(|| Stop::of(session)))
}
