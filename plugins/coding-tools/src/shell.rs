//! `shell(command, timeout_ms?, description?)`: `sh -c` in the workspace,
//! through the host's process import (confined by the host sandbox).

use sandcrab_sdk::prelude::*;
use sandcrab_sdk::process::Command;

const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const MAX_TIMEOUT_MS: u64 = 600_000;

pub struct Shell;

#[derive(Deserialize)]
pub struct Args {
    command: String,
    timeout_ms: Option<u64>,
    #[allow(dead_code)]
    description: Option<String>,
    /// Handled by the host (the call becomes a background job).
    #[serde(default)]
    #[allow(dead_code)]
    run_in_background: bool,
    /// Handled by the host (the command's programs get the network when
    /// the operator's rules or approval give it to this call).
    #[serde(default)]
    #[allow(dead_code)]
    network: bool,
}

impl Tool for Shell {
    const NAME: &'static str = "shell";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 30_000,
            lines: Some(256),
            keep: Keep::HeadAndTail,
        })
    }
    const BACKGROUND: bool = true;
    /// A command may write anywhere in the workspace: calls of one answer
    /// that write run after it, in the model's order.
    fn writes() -> Writes {
        Writes::Workspace
    }
    const DESCRIPTION: &'static str = "Run a shell command with `sh -c` in the workspace directory. Returns stdout, stderr, the exit code and the duration. Default timeout 10000 ms when the call is waited for, 600000 ms (the maximum) when it runs or moves to the background; on timeout the command's process group gets SIGTERM, then SIGKILL 2 s later, and the partial output is returned with an error note. For long-running commands (servers, watchers, long builds) set run_in_background: the call returns a job id at once and the result arrives later. The command runs in a sandbox: it can write only inside the workspace and $TMPDIR, and it has no network unless you set network: true (for package installs, fetches, downloads), which the user's rules or approval must allow.";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .required(
                "command",
                Schema::string("The command line, run with sh -c"),
            )
            .optional(
                "timeout_ms",
                Schema::integer("Timeout in milliseconds (default 10000, or 600000 when the call runs or moves to the background; max 600000)")
                    .minimum(1)
                    .maximum(MAX_TIMEOUT_MS as i64),
            )
            .optional(
                "description",
                Schema::string("A few words on what the command does, shown to the user"),
            )
            .optional(
                "run_in_background",
                Schema::boolean("Start as a background job and return its id at once"),
            )
            .optional(
                "network",
                Schema::boolean(
                    "The command needs the network (package installs, git fetch, downloads); the user's rules or approval decide. Without it the command runs with no network",
                ),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        Self::run_with_status(args, ctx).map(|o| o.text)
    }

    /// Runs in the agent's working directory; a command stopped at its
    /// timeout is reported as timed out (a background job ends timed_out).
    fn run_with_status(args: Args, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::invalid("the command is empty"));
        }
        // A call nobody waits for (a background job, or one that moves to
        // the background when it takes long) gets the longest timeout, not
        // the default, unless the model named one.
        let default = if ctx.background {
            MAX_TIMEOUT_MS
        } else {
            DEFAULT_TIMEOUT_MS
        };
        let timeout = args.timeout_ms.unwrap_or(default).clamp(1, MAX_TIMEOUT_MS);
        let out = Command::new("sh")
            .args(["-c", args.command.as_str()])
            .cwd(ctx.working_dir.clone())
            .timeout_ms(timeout)
            .run()?;
        Ok(ToolOutput {
            text: render(&out, timeout, ctx.sandbox),
            timed_out: out.timed_out,
        })
    }
}

fn render(out: &sandcrab_sdk::process::Output, timeout: u64, mode: SandboxMode) -> String {
    let stdout = out.stdout_text();
    let stderr = out.stderr_text();
    let mut text = String::with_capacity(stdout.len() + stderr.len() + 128);
    text.push_str(&stdout);
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&stderr);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let status = match (out.exit_code, out.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exit status unknown".to_string(),
    };
    text.push_str(&format!("[{status}, {} ms]", out.duration_ms));
    if out.timed_out {
        text.push_str(&format!(
            "\n[ERROR: Command timed out after {timeout}ms and was stopped (SIGTERM to its process group, SIGKILL 2 s later). The output above is partial. Use a larger timeout_ms (max {MAX_TIMEOUT_MS}) or run_in_background.]"
        ));
    } else if out.exit_code != Some(0) && looks_denied(&stderr) {
        text.push_str(&sandbox_note(mode));
    }
    text
}

/// The program's error looks like a refusal by the process sandbox.
fn looks_denied(stderr: &str) -> bool {
    [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "Network is unreachable",
    ]
    .iter()
    .any(|needle| stderr.contains(needle))
}

fn sandbox_note(mode: SandboxMode) -> String {
    let (name, allowed) = match mode {
        SandboxMode::Locked => (
            "locked",
            "it may read and write only the workspace and $TMPDIR, and has no network",
        ),
        SandboxMode::WorkspaceWrite => (
            "workspace-write",
            "it may read anywhere but write only in the workspace and $TMPDIR",
        ),
        SandboxMode::Off => ("off", "its access is limited by the operator's policy"),
    };
    format!("\n[note: the sandbox ({name} mode) may have refused this: {allowed}]")
}
