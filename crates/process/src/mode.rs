//! The confinement modes programs can run under.

use serde::{Deserialize, Serialize};

/// How programs are confined.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Write only what the starting plugin may write and a private temp
    /// dir; read what it may read (first-party plugins: everything).
    WorkspaceWrite,
    /// Read only the granted directories, the temp dir and system runtime
    /// paths; write only what the plugin may write; no network, no Unix
    /// sockets.
    Locked,
    /// No confinement (explicit operator choice; always warned about).
    Off,
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Locked => "locked",
            SandboxMode::Off => "off",
        })
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "locked" => Ok(SandboxMode::Locked),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode '{other}' (expected workspace-write, locked or off)"
            )),
        }
    }
}
