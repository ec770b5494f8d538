//! `sandcrab:plugin/process`: run a program through the plugin's sandbox.
//! Every ABI version forwards to [`run`] (through [`process_host`], which
//! `wit::bind` invokes per version); they differ only in where a
//! command without `cwd` runs (0.1.0: the workspace root; 0.2.0: the call's
//! working directory).

use crate::process::ProcessOutput;
use crate::sandbox::{GuestCommand, ProcessDenied};
use crate::state::HostState;

/// Run `command` for the guest, within the time its call has left: the
/// program gets its own timeout (and so a TERM, a grace and partial
/// output) no later than the call's deadline.
pub(crate) async fn run(
    state: &mut HostState,
    mut command: GuestCommand,
) -> Result<ProcessOutput, ProcessDenied> {
    let program = command.program.clone();
    let left = state.clock.remaining();
    if left.is_zero() {
        let refused = Err(ProcessDenied::SpawnFailed(
            "the call's time limit has passed".into(),
        ));
        record(state, None, program, &refused);
        return refused;
    }
    command.timeout_ms = Some(program_timeout(command.timeout_ms, left));
    // Noted as it starts: a call cut off while it runs still lists it.
    let entry = note_start(state, &program);
    let result = state
        .sandbox
        .run(command, state.live_output.clone(), state.network)
        .await;
    record(state, entry, program, &result);
    finish(state, result)
}

/// The program's output with the host's notes on why it failed.
fn finish(
    state: &HostState,
    result: Result<ProcessOutput, ProcessDenied>,
) -> Result<ProcessOutput, ProcessDenied> {
    result.map(|mut out| {
        if out.exit_code != Some(0) {
            // Without the network it needed: say how to ask for it.
            let offline = state.sandbox.network_on_request && !state.network;
            if offline && says_any(&out, NETWORK_SIGNS) {
                out.stderr.extend_from_slice(NO_NETWORK_NOTE.as_bytes());
            }
            // Stopped by git metadata kept read-only: say why, and who can.
            if wrote_git_metadata(&out) {
                out.stderr.extend_from_slice(GIT_METADATA_NOTE.as_bytes());
            }
        }
        out
    })
}

/// What libc, curl, git, pip, npm and cargo print when they could not
/// reach the network.
const NETWORK_SIGNS: &[&str] = &[
    "network is unreachable",
    "temporary failure in name resolution",
    "could not resolve",
    "name or service not known",
    "getaddrinfo",
    "enetunreach",
    "eai_again",
    "failed to connect",
];

/// Whether a program's output says any of `signs` (lower case).
fn says_any(out: &ProcessOutput, signs: &[&str]) -> bool {
    [&out.stderr, &out.stdout].iter().any(|bytes| {
        let text = String::from_utf8_lossy(bytes).to_ascii_lowercase();
        signs.iter().any(|sign| text.contains(sign))
    })
}

/// Whether a failed program was stopped writing git's configuration or
/// hooks (bound read-only, or a mount point git's lock file cannot
/// replace): what `git config` and `git submodule add` print then.
fn wrote_git_metadata(out: &ProcessOutput) -> bool {
    let text = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
    (text.contains("device or resource busy") || text.contains("read-only file system"))
        && (text.contains(".git/") || text.contains("config") || text.contains("hooks"))
}

/// Added to the error output of a program stopped by read-only git
/// metadata.
const GIT_METADATA_NOTE: &str = "\n[sandcrab: git's configuration and hooks (`.git/config`, `.git/hooks`, what `git config` and `git submodule add` write) are read-only to programs, because git runs what they name at the user's next command; ask the user to run this git command themselves]\n";

/// Added to the error output of a program that failed without the
/// network, when its call could have asked for it.
const NO_NETWORK_NOTE: &str = "\n[sandcrab: this command ran without the network; if it needs it, call the tool again with `network: true` (the operator's rules or approval then decide)]\n";

/// Note in the call's receipt that `program` started (confined as the
/// call's programs are, not ended yet): its place in the log.
fn note_start(state: &HostState, program: &str) -> Option<usize> {
    use crate::types::{ProgramConfinement, ProgramRun};
    let mut activity = state.programs.as_ref()?.lock().ok()?;
    if activity.programs.len() >= MAX_RECORDED {
        return None;
    }
    activity.programs.push(ProgramRun {
        program: program.to_string(),
        confinement: Some(ProgramConfinement::of(
            state.sandbox.confinement_spec_for(state.network),
        )),
        exit_code: None,
        signal: None,
        timed_out: false,
        duration_ms: 0,
        refused: None,
    });
    Some(activity.programs.len() - 1)
}

/// Note the program in the call's receipt (in place of its start entry,
/// when it has one): how it was confined and how it ended, or why it was
/// refused.
fn record(
    state: &HostState,
    entry: Option<usize>,
    program: String,
    result: &Result<ProcessOutput, ProcessDenied>,
) {
    use crate::types::{ProgramConfinement, ProgramRun};
    let Some(log) = &state.programs else { return };
    let run = match result {
        Ok(out) => ProgramRun {
            program,
            confinement: Some(ProgramConfinement::of(
                state.sandbox.confinement_spec_for(state.network),
            )),
            exit_code: out.exit_code,
            signal: out.signal,
            timed_out: out.timed_out,
            duration_ms: out.duration.as_millis() as u64,
            refused: None,
        },
        Err(denied) => ProgramRun {
            program,
            confinement: None,
            exit_code: None,
            signal: None,
            timed_out: false,
            duration_ms: 0,
            refused: Some(denied.to_string()),
        },
    };
    if let Ok(mut activity) = log.lock() {
        if let Ok(out) = result {
            for note in &out.swept {
                activity.refuse_file(note.clone());
            }
        }
        let recorded = activity.programs.len();
        match entry.and_then(|i| activity.programs.get_mut(i)) {
            Some(started) => *started = run,
            None if recorded < MAX_RECORDED => activity.programs.push(run),
            None => {}
        }
    }
}

/// Most programs one call's receipt records (a guest looping over
/// programs must not grow it without bound).
const MAX_RECORDED: usize = 256;

/// A program's timeout: what the guest asked for (or the default), but no
/// more than `left` of the call minus the time a stopped program is given
/// to exit, so it is stopped with its partial output before the call ends.
fn program_timeout(asked_ms: Option<u64>, left: std::time::Duration) -> u64 {
    let asked = asked_ms.map_or(crate::process::DEFAULT_TIMEOUT.as_millis() as u64, |ms| ms);
    let room = left
        .saturating_sub(crate::process::KILL_GRACE)
        .max(left / 2);
    asked.min(room.as_millis() as u64).max(1)
}

/// Implement one version's `process` host trait over [`run`];
/// `$default_cwd` says where a command without `cwd` runs.
macro_rules! process_host {
    ($version:ident, |$state:ident| $default_cwd:expr) => {
        impl crate::wit::$version::tool::sandcrab::plugin::process::Host
            for crate::state::HostState
        {
            async fn run(
                &mut self,
                command: crate::wit::$version::tool::sandcrab::plugin::process::Command,
            ) -> Result<
                crate::wit::$version::tool::sandcrab::plugin::process::Output,
                crate::wit::$version::tool::sandcrab::plugin::process::ProcessError,
            > {
                use crate::wit::$version::tool::sandcrab::plugin::process::{Output, ProcessError};
                let $state = &*self;
                let default_cwd: Option<String> = $default_cwd;
                let guest = crate::sandbox::GuestCommand {
                    program: command.program,
                    args: command.args,
                    cwd: command.cwd,
                    default_cwd,
                    env: command.env,
                    stdin: command.stdin,
                    timeout_ms: command.timeout_ms,
                };
                match crate::imports::process::run(self, guest).await {
                    Ok(out) => Ok(Output {
                        stdout: out.stdout,
                        stderr: out.stderr,
                        exit_code: out.exit_code,
                        signal: out.signal,
                        duration_ms: out.duration.as_micros().div_ceil(1000) as u64,
                        timed_out: out.timed_out,
                        truncated: out.truncated,
                    }),
                    Err(denied) => Err(match denied {
                        crate::sandbox::ProcessDenied::NotAllowed(m) => ProcessError::NotAllowed(m),
                        crate::sandbox::ProcessDenied::InvalidCwd(m) => ProcessError::InvalidCwd(m),
                        crate::sandbox::ProcessDenied::SandboxUnavailable(m) => {
                            ProcessError::SandboxUnavailable(m)
                        }
                        crate::sandbox::ProcessDenied::SpawnFailed(m) => {
                            ProcessError::SpawnFailed(m)
                        }
                    }),
                }
            }
        }
    };
}

pub(crate) use process_host;

#[cfg(test)]
mod tests {
    use super::program_timeout;
    use std::time::Duration;

    #[test]
    fn a_program_gets_no_more_than_the_call_has_left() {
        assert_eq!(program_timeout(Some(5_000), Duration::from_secs(60)), 5_000);
        assert_eq!(program_timeout(None, Duration::from_secs(60)), 10_000);
        // Room for the kill grace before the call's deadline.
        assert_eq!(
            program_timeout(Some(600_000), Duration::from_secs(30)),
            28_000
        );
        // Little time left: half of it.
        assert_eq!(
            program_timeout(Some(600_000), Duration::from_secs(3)),
            1_500
        );
    }
}
