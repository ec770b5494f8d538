//! `sandcrab:plugin/process`: run a program through the plugin's sandbox.

use crate::plugin::sandbox::{GuestCommand, ProcessDenied};
use crate::plugin::state::HostState;
use crate::plugin::wit::since_v0_1_0::tool::sandcrab::plugin::process::{
    Command, Host, Output, ProcessError,
};

impl Host for HostState {
    async fn run(&mut self, command: Command) -> Result<Output, ProcessError> {
        let guest = GuestCommand {
            program: command.program,
            args: command.args,
            cwd: command.cwd,
            env: command.env,
            stdin: command.stdin,
            timeout_ms: command.timeout_ms,
        };
        // Waiting on a program is not guest time (up to the call's budget).
        self.clock.pause();
        let result = self.sandbox.run(guest, self.live_output.clone()).await;
        self.clock.resume();
        match result {
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
