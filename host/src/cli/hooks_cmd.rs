//! `sandcrab hooks list|import`: the hooks in force in a workspace with
//! their consent state (and what changed since consent), and Claude Code
//! hooks brought over from a `settings.json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::Config;
use crate::consent::ConsentState;

/// `sandcrab hooks …`
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Every hook of a workspace (the operator's and the project's), with
    /// whether it runs, and what changed since you consented to it.
    List {
        /// The workspace (default: the current directory).
        dir: Option<PathBuf>,
        /// The operator's configuration file (default:
        /// ~/.config/sandcrab/config.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Add the hooks of a Claude Code settings.json to your configuration,
    /// tool names mapped to sandcrab's (Bash → shell, Write → write_file,
    /// …). They run once you consent with `sandcrab trust`.
    Import {
        /// The Claude Code settings file (.claude/settings.json).
        file: PathBuf,
        /// The configuration file to add them to (default:
        /// ~/.config/sandcrab/config.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

pub fn run(cmd: HooksCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        HooksCommand::List { dir, config } => list(dir.as_deref(), config.as_deref()),
        HooksCommand::Import { file, config } => import(&file, config.as_deref()),
    }
}

fn list(dir: Option<&Path>, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let workspace = super::setup::resolve_workspace(dir)?;
    let loaded = Config::load(&workspace, config)?;
    let (hooks, _) = crate::hooks::found(
        &loaded.config.hooks,
        loaded.config.project_hooks.as_ref(),
        &loaded.config.consented,
        &workspace,
    );
    if hooks.is_empty() {
        outln!("no hooks are configured for {}", workspace.display());
        return Ok(ExitCode::SUCCESS);
    }
    for hook in &hooks {
        let state = match (&hook.barred, hook.consent) {
            (Some(_), _) => "does not run",
            (None, ConsentState::Given) => "runs",
            (None, state) => state.word(),
        };
        let matcher = if hook.matcher_text.is_empty() {
            "*".to_string()
        } else {
            hook.matcher_text.escape_debug().to_string()
        };
        outln!(
            "{} [{}] ({}) {}: {}",
            hook.event,
            matcher,
            hook.origin.word(),
            state,
            super::terminal::sanitize(&hook.command.escape_debug().to_string())
        );
        if let Some(why) = &hook.barred {
            outln!(
                "    {}",
                super::terminal::sanitize(&why.escape_debug().to_string())
            );
        }
        for file in &hook.pinned.files {
            outln!(
                "    runs {} (sha256 {})",
                file.path.display(),
                &file.sha256[..12]
            );
        }
        if hook.consent == ConsentState::Changed
            && let Some(record) = loaded.config.consented.get(&hook.pinned.what)
        {
            for line in hook.pinned.diff(record).lines() {
                outln!("    {}", super::terminal::sanitize(line));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn import(file: &Path, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let imported = crate::hooks::import::from_claude_settings(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let target = match config {
        Some(f) => f.to_path_buf(),
        None => Config::user_file().ok_or_else(|| {
            anyhow::anyhow!("no user configuration directory (set HOME, or pass --config)")
        })?,
    };
    for note in &imported.notes {
        outln!("note: {note}");
    }
    let count: usize = imported
        .hooks
        .values()
        .flat_map(|groups| groups.iter().map(|g| g.hooks.len()))
        .sum();
    if count == 0 {
        outln!("{}: no command hooks to import", file.display());
        return Ok(ExitCode::SUCCESS);
    }
    crate::config::consent::add_hooks(&target, &imported.hooks)?;
    outln!(
        "imported {count} hook(s) into {}; they run once you review them (`sandcrab hooks list`) and consent (`sandcrab trust`)",
        target.display()
    );
    Ok(ExitCode::SUCCESS)
}
