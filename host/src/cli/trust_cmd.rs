//! `sandcrab trust [DIR]`: the operator's explicit decision to let a
//! project's own configuration (`sandcrab.toml`, `.sandcrab/`) act with
//! their authority. Recorded in the user's configuration with a
//! fingerprint; any later change to those files needs trust again.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::config::{Config, PROJECT_FILE, trust};

/// Options of `sandcrab trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace to trust (default: the current directory).
    dir: Option<PathBuf>,
    /// Remove the trust instead.
    #[arg(long)]
    revoke: bool,
    /// The configuration file to record it in (default:
    /// ~/.config/sandcrab/config.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub fn run(args: TrustArgs) -> anyhow::Result<ExitCode> {
    let workspace = super::setup::resolve_workspace(args.dir.as_deref())?;
    let file = match args.config {
        Some(file) => file,
        None => Config::user_file().ok_or(trust::TrustError::NoUserConfig)?,
    };
    if args.revoke {
        let found = trust::revoke(&file, &workspace)?;
        outln!(
            "{} {}",
            if found {
                "no longer trusted:"
            } else {
                "was not trusted:"
            },
            workspace.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    describe(&workspace);
    let sha = trust::trust(&file, &workspace)?;
    outln!(
        "trusted: {} (fingerprint {}, recorded in {})",
        workspace.display(),
        &sha[..16],
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Say what trusting gives the project: its settings and its plugins.
fn describe(workspace: &std::path::Path) {
    let project = workspace.join(PROJECT_FILE);
    match std::fs::read_to_string(&project) {
        Ok(text) => match text.parse::<toml::Table>() {
            Ok(table) if table.is_empty() => outln!("{} sets: nothing", project.display()),
            Ok(table) => outln!(
                "{} sets: {}",
                project.display(),
                table.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            // Trusted, it is still a file that cannot be used: say so now.
            Err(err) => outln!(
                "{} does not parse ({}): it will be ignored until it is fixed",
                project.display(),
                err.message().trim_end()
            ),
        },
        Err(_) => outln!(
            "{}: no such file (nothing of the project's own to trust but its plugins)",
            project.display()
        ),
    }
    let plugins = crate::plugin::discovery::workspace_plugin_dir(workspace);
    if let Ok(entries) = std::fs::read_dir(&plugins) {
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        outln!(
            "{} holds plugins that will be loaded: {}",
            plugins.display(),
            names.join(", ")
        );
    }
}
