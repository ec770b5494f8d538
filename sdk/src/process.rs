//! Run programs on the host through the `process` import.
//!
//! The program must be on the plugin's allow-list (its manifest asks for it
//! and the operator grants it), and it runs in its own process group under
//! the host's process sandbox.
//!
//! ```ignore
//! let out = Command::new("sh").args(["-c", "ls"]).timeout_ms(5_000).run()?;
//! println!("{}", out.stdout_text());
//! ```

use crate::bindings::tool::sandcrab::plugin::process as host;
use crate::tool::ToolError;

pub use host::{Output, ProcessError};

/// A program to run, built up like `std::process::Command`.
#[derive(Debug, Clone)]
pub struct Command {
    inner: host::Command,
}

impl Command {
    /// Run `program` (a name on the host's PATH or an absolute path).
    pub fn new(program: &str) -> Self {
        Command {
            inner: host::Command {
                program: program.to_string(),
                args: Vec::new(),
                cwd: None,
                env: Vec::new(),
                stdin: None,
                timeout_ms: None,
            },
        }
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.inner.args.push(arg.into());
        self
    }

    /// Add several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.inner.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Working directory as the plugin sees it (inside a granted directory).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.inner.cwd = Some(dir.into());
        self
    }

    /// Set an environment variable (dropped unless the plugin was granted it).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.inner.env.push((name.into(), value.into()));
        self
    }

    /// Bytes for the child's standard input.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.inner.stdin = Some(bytes.into());
        self
    }

    /// Wall-clock limit in milliseconds (host default 10 s, max 600 s).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.inner.timeout_ms = Some(ms);
        self
    }

    /// Run it and wait for it to finish or time out.
    pub fn run(&self) -> Result<Output, ProcessError> {
        host::run(&self.inner)
    }
}

impl Output {
    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// True when the program exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

impl From<ProcessError> for ToolError {
    fn from(err: ProcessError) -> ToolError {
        match err {
            ProcessError::NotAllowed(m) => ToolError::Denied(format!("program not allowed: {m}")),
            ProcessError::InvalidCwd(m) => {
                ToolError::Denied(format!("invalid working directory: {m}"))
            }
            ProcessError::SandboxUnavailable(m) => {
                ToolError::Denied(format!("process sandbox unavailable: {m}"))
            }
            ProcessError::SpawnFailed(m) => {
                ToolError::Failed(format!("could not start program: {m}"))
            }
        }
    }
}
