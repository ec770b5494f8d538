//! `sandcrab sandbox status`: what this host can enforce, and what each
//! mode therefore guarantees here; `sandcrab sandbox check`: proof, by
//! real confined programs trying what each mode forbids.

use std::process::ExitCode;

use clap::Subcommand;

use crate::process::probe::{self, ModeCheck, Weaken};
use crate::process::{LANDLOCK_ABI_SCOPES, LANDLOCK_ABI_TRUNCATE, SandboxMode, support};

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Show the kernel features sandcrab uses and what each mode guarantees.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start real confined programs in each mode and try what the mode
    /// forbids; exits non-zero if any guarantee a mode claims is open.
    Check {
        /// Only this mode (default: workspace-write and locked).
        #[arg(long)]
        mode: Vec<SandboxMode>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Test only: weaken the confinement on purpose (`network`), to
        /// see the check report it.
        #[arg(long, hide = true)]
        weaken: Vec<String>,
    },
    /// What the host keeps from every tool and program in this workspace:
    /// each secret and integrity root, where it is, and where it was
    /// named; and the protected paths.
    Kept {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: super::setup::HostArgs,
    },
    /// The probe program a check runs (confined); not for direct use.
    #[command(hide = true)]
    Probe { action: String, arg: String },
}

pub async fn run(cmd: SandboxCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SandboxCommand::Status { json } => status(json),
        SandboxCommand::Check { mode, json, weaken } => check(mode, json, &weaken).await,
        SandboxCommand::Kept { json, host } => kept(json, &host).await,
        SandboxCommand::Probe { action, arg } => {
            outln!("{}", probe::attempt_here(&action, &arg));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `sandbox kept`: the registry in force once this workspace's
/// configuration and plugins are known.
async fn kept(json: bool, host: &super::setup::HostArgs) -> anyhow::Result<ExitCode> {
    let setup = host.setup().await?;
    setup.print_warnings();
    let registry = crate::kept::current();
    let protected = setup.config.policy.protected_patterns();
    if json {
        outln!(
            "{}",
            super::terminal::json_pretty(&serde_json::json!({
                "entries": registry.entries(),
                "protected_paths": protected,
            }))
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "kept from every tool and program (secret: neither read nor written; integrity: read, never written):"
    );
    for entry in registry.entries() {
        let kind = match entry.kind {
            crate::kept::Kind::Secret => "secret",
            crate::kept::Kind::Integrity => "integrity",
        };
        let state = if entry.path.exists() {
            ""
        } else {
            " (not there now)"
        };
        outln!(
            "  {kind:<9} {:<30} {}{state}  [{}]",
            entry.item.describe(),
            super::terminal::sanitize(&entry.path.display().to_string()),
            super::terminal::sanitize(&entry.source)
        );
    }
    outln!(
        "protected in the workspace (read, never written): {}",
        protected.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

async fn check(modes: Vec<SandboxMode>, json: bool, weaken: &[String]) -> anyhow::Result<ExitCode> {
    let modes = if modes.is_empty() {
        vec![SandboxMode::WorkspaceWrite, SandboxMode::Locked]
    } else {
        modes
    };
    let mut weakened = Weaken::default();
    for w in weaken {
        match w.as_str() {
            "network" => weakened.network = true,
            other => anyhow::bail!("--weaken {other}: only `network` can be weakened"),
        }
    }
    let me = std::env::current_exe()?;
    let mut checks = Vec::new();
    for mode in modes {
        checks.push(probe::check(mode, &me, weakened).await);
    }
    if weakened == Weaken::default() {
        probe::keep(&checks, crate::time::now_rfc3339());
    }
    let http = crate::plugin::http::self_check::check().await;
    let holds = checks.iter().all(ModeCheck::holds) && http.iter().all(|h| h.held);
    if json {
        outln!(
            "{}",
            super::terminal::json_pretty(
                &serde_json::json!({"holds": holds, "checks": checks, "http": http})
            )
        );
    } else {
        for c in &checks {
            print_check(c);
        }
        outln!("plugin HTTP (the host's gate for wasi:http requests, against a loopback server):");
        for h in &http {
            let verdict = if h.held { "held" } else { "OPEN" };
            outln!("  {verdict:<8} {} — {}", h.attempt, h.detail);
        }
        if !holds {
            errln!(
                "\nsandbox check: a guarantee is OPEN on this host; locked mode will refuse to run programs here"
            );
        }
    }
    Ok(if holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_check(c: &ModeCheck) {
    outln!(
        "{} (a third-party plugin's program, no grants but its workspace):",
        c.mode
    );
    if let Some(why) = &c.unavailable {
        outln!("  cannot confine here, so programs are refused: {why}");
        return;
    }
    for o in &c.outcomes {
        let verdict = match (o.ran, o.open, o.promised) {
            (false, _, true) => "UNPROVEN (the probe did not run)",
            (false, _, false) => "unproven",
            (true, false, _) => "blocked",
            (true, true, true) => "OPEN",
            (true, true, false) => "open (not promised in this mode)",
        };
        outln!("  {:<8} {}", verdict, o.attempt.describe());
    }
}

fn status(json: bool) -> anyhow::Result<ExitCode> {
    let s = support();
    let modes = [SandboxMode::WorkspaceWrite, SandboxMode::Locked];
    if json {
        let value = serde_json::json!({
            "last_check": probe::last(),
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
    match probe::last() {
        Some(kept) => {
            let open: Vec<String> = kept
                .checks
                .iter()
                .flat_map(|c| {
                    c.outcomes
                        .iter()
                        .filter(|o| o.promised && (o.open || !o.ran))
                        .map(move |o| format!("{}: {}", c.mode, o.attempt.describe()))
                })
                .collect();
            if open.is_empty() {
                outln!(
                    "\nLast `sandcrab sandbox check` ({}, this boot): every guarantee held.",
                    kept.checked_at
                );
            } else {
                outln!(
                    "\nLast `sandcrab sandbox check` ({}, this boot): OPEN: {}",
                    kept.checked_at,
                    open.join("; ")
                );
            }
        }
        None => outln!(
            "\nNo `sandcrab sandbox check` since this boot: run it to prove these guarantees by trying them."
        ),
    }
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
            "programs write only what their plugin may write and a private temp dir; programs of third-party plugins read only their grants and system paths; network only with the plugin's grant or, for a call that asks, a rule's or your approval; no Unix sockets unless allowed; protected paths read-only, and git metadata a program makes swept when it ends; what the host keeps (`sandcrab sandbox kept`) hidden or read-only; every descendant dies with the call"
        }
        SandboxMode::Locked => {
            "programs read only the workspace, their temp dir and system paths; no network; no Unix sockets; protected paths read-only, and git metadata a program makes swept when it ends; what the host keeps (`sandcrab sandbox kept`) hidden or read-only; every descendant dies with the call"
        }
        SandboxMode::Off => "",
    }
}
