//! `sandcrab:plugin/process`: run a program through the plugin's sandbox.
//! Every ABI version forwards to [`run`]; they differ only in where a
//! command without `cwd` runs (0.1.0: the workspace root; 0.2.0: the call's
//! working directory).

use crate::plugin::sandbox::{GuestCommand, ProcessDenied};
use crate::plugin::state::HostState;
use crate::process::ProcessOutput;

/// Run `command` for the guest; waiting on the program is not guest time
/// (up to the call's budget).
async fn run(state: &mut HostState, command: GuestCommand) -> Result<ProcessOutput, ProcessDenied> {
    state.clock.pause();
    let result = state.sandbox.run(command, state.live_output.clone()).await;
    state.clock.resume();
    result
}

/// Implement one version's `process` host trait over [`run`];
/// `$default_cwd` says where a command without `cwd` runs.
macro_rules! process_host {
    ($version:ident, |$state:ident| $default_cwd:expr) => {
        impl crate::plugin::wit::$version::tool::sandcrab::plugin::process::Host for HostState {
            async fn run(
                &mut self,
                command: crate::plugin::wit::$version::tool::sandcrab::plugin::process::Command,
            ) -> Result<
                crate::plugin::wit::$version::tool::sandcrab::plugin::process::Output,
                crate::plugin::wit::$version::tool::sandcrab::plugin::process::ProcessError,
            > {
                use crate::plugin::wit::$version::tool::sandcrab::plugin::process::{
                    Output, ProcessError,
                };
                let $state = &*self;
                let default_cwd: Option<String> = $default_cwd;
                let guest = GuestCommand {
                    program: command.program,
                    args: command.args,
                    cwd: command.cwd,
                    default_cwd,
                    env: command.env,
                    stdin: command.stdin,
                    timeout_ms: command.timeout_ms,
                };
                match run(self, guest).await {
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
                        ProcessDenied::NotAllowed(m) => ProcessError::NotAllowed(m),
                        ProcessDenied::InvalidCwd(m) => ProcessError::InvalidCwd(m),
                        ProcessDenied::SandboxUnavailable(m) => ProcessError::SandboxUnavailable(m),
                        ProcessDenied::SpawnFailed(m) => ProcessError::SpawnFailed(m),
                    }),
                }
            }
        }
    };
}

process_host!(since_v0_1_0, |_state| None);
process_host!(since_v0_2_0, |state| state.working_dir.clone());
