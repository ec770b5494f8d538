//! `sandcrab trust [DIR]`: the operator's explicit decision to let a
//! project's own configuration (`sandcrab.toml`, `.sandcrab/`) act with
//! their authority. Recorded in the user's configuration with a
//! fingerprint; any later change to those files needs trust again. The
//! same act consents to every hook and skill in force there, each pinned
//! by content: the one consent command for what makes sandcrab execute or
//! believe something.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::terminal::sanitize;
use crate::config::{Config, PROJECT_FILE, trust};
use crate::consent::ConsentState;

/// Options of `sandcrab trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace to trust (default: the current directory).
    dir: Option<PathBuf>,
    /// Remove the trust instead.
    #[arg(long)]
    revoke: bool,
    /// Show what is new or changed since you last consented (hooks,
    /// skills, instruction files, with diffs) and consent to nothing.
    #[arg(long, conflicts_with = "revoke")]
    show: bool,
    /// Consent only if the whole surface is still what `--show` printed
    /// (its digest): nothing that changed after you looked is consented.
    #[arg(long, value_name = "DIGEST", conflicts_with_all = ["revoke", "show"])]
    expect: Option<String>,
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
    if args.show {
        let loaded = Config::load(&workspace, Some(&file))?;
        if !loaded.config.project_trusted && loaded.project.is_some() {
            outln!("the project is not trusted: `sandcrab trust` would trust it as it is now");
        }
        consent_to_surface(&workspace, &file, false)?;
        let digest = surface_digest(&workspace, &loaded.config)?;
        outln!(
            "to consent to exactly this: sandcrab trust --expect {digest} {}",
            workspace.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(expected) = &args.expect {
        let loaded = Config::load(&workspace, Some(&file))?;
        let now = surface_digest(&workspace, &loaded.config)?;
        if &now != expected {
            anyhow::bail!(
                "what sandcrab would consent to changed since you looked (digest {expected}, now {now}); nothing was consented: run `sandcrab trust --show` again"
            );
        }
    }
    let sha = trust::trust(&file, &workspace)?;
    outln!(
        "trusted: {} (fingerprint {}, recorded in {})",
        workspace.display(),
        &sha[..16],
        file.display()
    );
    consent_to_surface(&workspace, &file, true)?;
    Ok(ExitCode::SUCCESS)
}

/// Consent to every hook, skill and (in a trusted project) instruction
/// file in force for `workspace` as it is now, showing what is new and
/// what changed since the last consent.
fn consent_to_surface(
    workspace: &std::path::Path,
    file: &std::path::Path,
    record: bool,
) -> anyhow::Result<()> {
    let verb = if record { "consented" } else { "not consented" };
    let loaded = Config::load(workspace, Some(file))?;
    let config = &loaded.config;
    let (hooks, _) = crate::hooks::found(
        &config.hooks,
        config.project_hooks.as_ref(),
        &config.consented,
        workspace,
    );
    let places = crate::skills::SkillPlaces::of(workspace, config.project_trusted);
    let (skills, _) = crate::skills::found(&places, &config.consented);
    let docs: Vec<crate::consent::Pinned> = if config.project_trusted {
        crate::consent::DocsConsent::pins(workspace)
    } else {
        Vec::new()
    };
    let mut pinned = Vec::new();
    let pending = hooks
        .iter()
        .filter(|h| h.barred.is_none())
        .map(|h| (&h.pinned, h.consent))
        .chain(skills.iter().map(|s| (&s.pinned, s.consent)))
        .chain(docs.iter().map(|d| (d, d.state(&config.consented))));
    for (item, state) in pending {
        match state {
            ConsentState::Given => continue,
            ConsentState::Missing => outln!("{verb} (new): {}", sanitize(&item.what)),
            ConsentState::Changed => {
                outln!("{verb} (CHANGED): {}", sanitize(&item.what));
                if let Some(record) = config.consented.get(&item.what) {
                    for line in item.diff(record).lines() {
                        outln!("    {}", sanitize(line));
                    }
                }
            }
        }
        for f in &item.files {
            outln!(
                "    runs or reads {} (sha256 {})",
                f.path.display(),
                &f.sha256[..12]
            );
        }
        if !item.unreadable.is_empty() {
            anyhow::bail!(
                "{}: cannot read {}; nothing was consented",
                item.what,
                item.unreadable.join(", ")
            );
        }
        pinned.push(item);
    }
    if !record {
        return Ok(());
    }
    crate::config::consent::give(file, &pinned)?;
    if pinned.is_empty() && (!hooks.is_empty() || !skills.is_empty() || !docs.is_empty()) {
        outln!("hooks, skills and instruction files: all as consented before");
    }
    Ok(())
}

/// A digest of everything `sandcrab trust` would consent to in
/// `workspace`: the project's fingerprint and every hook, skill and
/// instruction file as pinned now, whether the project is trusted yet or
/// not.
fn surface_digest(workspace: &std::path::Path, config: &Config) -> anyhow::Result<String> {
    use sha2::Digest;
    let fingerprint = trust::fingerprint(workspace)
        .map_err(|message| anyhow::anyhow!("cannot fingerprint the project: {message}"))?;
    let project = config.project_hooks.clone().map(|mut p| {
        p.trusted = true;
        p
    });
    let (hooks, _) = crate::hooks::found(
        &config.hooks,
        project.as_ref(),
        &config.consented,
        workspace,
    );
    let places = crate::skills::SkillPlaces::of(workspace, true);
    let (skills, _) = crate::skills::found(&places, &config.consented);
    let docs = crate::consent::DocsConsent::pins(workspace);
    let mut lines: Vec<String> = hooks
        .iter()
        .map(|h| &h.pinned)
        .chain(skills.iter().map(|s| &s.pinned))
        .chain(&docs)
        .map(|p| format!("{}\0{}", p.what, p.sha256))
        .collect();
    lines.sort();
    lines.insert(0, fingerprint);
    let digest = sha2::Sha256::digest(lines.join("\n").as_bytes());
    Ok(crate::consent::hex(&digest)[..16].to_string())
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
