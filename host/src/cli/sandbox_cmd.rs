//! `sandcrab sandbox status`: what this host can enforce, and what each
//! mode therefore guarantees here.

use std::process::ExitCode;

use clap::Subcommand;

use crate::process::{LANDLOCK_ABI_SCOPES, LANDLOCK_ABI_TRUNCATE, SandboxMode, support};

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Show the kernel features sandcrab uses and what each mode guarantees.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: SandboxCommand) -> anyhow::Result<ExitCode> {
    let SandboxCommand::Status { json } = cmd;
    let s = support();
    let modes = [SandboxMode::WorkspaceWrite, SandboxMode::Locked];
    if json {
        let value = serde_json::json!({
            "support": s,
            "modes": modes.iter().map(|m| serde_json::json!({
                "mode": m.to_string(),
                "enforced": s.missing(*m, false).is_empty(),
                "missing": s.missing(*m, false),
            })).collect::<Vec<_>>(),
        });
        outln!("{}", super::terminal::json_pretty(&value));
        return Ok(ExitCode::SUCCESS);
    }
    let yes = |b: bool| if b { "yes" } else { "NO" };
    outln!("What this host can enforce:");
    let landlock = match s.landlock_abi {
        0 => "NO".to_string(),
        abi => {
            let mut notes = vec!["filesystem rules"];
            notes.push(if abi >= LANDLOCK_ABI_TRUNCATE {
                "truncation"
            } else {
                "truncation via seccomp"
            });
            if abi >= LANDLOCK_ABI_SCOPES {
                notes.push("signal and abstract-socket scoping");
            }
            format!("yes, ABI {abi} ({})", notes.join(", "))
        }
    };
    for (name, value) in [
        ("Landlock", landlock),
        ("user namespaces", yes(s.user_ns).into()),
        ("network namespaces", yes(s.net_ns).into()),
        ("PID namespaces", yes(s.pid_ns).into()),
        ("mount namespaces", yes(s.mount_ns).into()),
        ("private /proc", yes(s.private_proc).into()),
        ("seccomp filters", yes(s.seccomp).into()),
    ] {
        outln!("  {name:<20} {value}");
    }
    outln!("\nWhat each mode guarantees here:");
    for mode in modes {
        let missing = s.missing(mode, false);
        let name = mode.to_string();
        if missing.is_empty() {
            outln!("  {name:<16} enforced: {}", promise(mode));
        } else {
            outln!(
                "  {name:<16} NOT enforceable: programs are refused (missing: {})",
                missing.join(", ")
            );
        }
    }
    outln!(
        "  {:<16} nothing is confined (programs run as you, with your files and network)",
        SandboxMode::Off.to_string()
    );
    if !s.private_proc {
        outln!(
            "\nnote: no private /proc here; programs still cannot read sandcrab's /proc entries (sandcrab is non-dumpable and Landlock scopes ptrace), but they see other processes' command lines."
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn promise(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::WorkspaceWrite => {
            "programs write only what their plugin may write and a private temp dir; programs of third-party plugins read only their grants and system paths; network only with the plugin's grant; protected paths read-only; every descendant dies with the call"
        }
        SandboxMode::Locked => {
            "programs read only the workspace, their temp dir and system paths; no network; no Unix sockets; protected paths read-only; every descendant dies with the call"
        }
        SandboxMode::Off => "",
    }
}
