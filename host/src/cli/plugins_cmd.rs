//! `sandcrab plugins list | inspect NAME | check DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Subcommand;

use super::setup::HostArgs;
use crate::plugin::policy::Grants;
use crate::plugin::{Access, LoadedPlugin, Manifest, PluginHost, PluginHostConfig, PluginSource};

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Every plugin found: name, kind, version, tools, effective capabilities.
    List {
        #[command(flatten)]
        host: HostArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One plugin in detail: tool schemas, requested vs granted capabilities.
    Inspect {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Validate a plugin directory without running the plugin.
    Check {
        /// The plugin directory (holds plugin.toml).
        dir: PathBuf,
    },
}

pub async fn run(cmd: PluginsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginsCommand::List { host, json } => list(host, json).await,
        PluginsCommand::Inspect { name, host } => inspect(host, &name).await,
        PluginsCommand::Check { dir } => check(dir),
    }
}

async fn list(args: HostArgs, json: bool) -> anyhow::Result<ExitCode> {
    let setup = args.setup().await?;
    setup.print_warnings();
    let host = &setup.host;
    if json {
        let plugins: Vec<serde_json::Value> =
            host.plugins().iter().map(|p| plugin_json(p)).collect();
        let out = serde_json::json!({ "plugins": plugins, "diagnostics": host.diagnostics() });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<20} {:<11} {:<9} {:<10} {:<40} CAPABILITIES",
        "NAME", "KIND", "VERSION", "ORIGIN", "TOOLS"
    );
    for p in host.plugins() {
        let tools: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        println!(
            "{:<20} {:<11} {:<9} {:<10} {:<40} {}",
            p.name(),
            p.kind().to_string(),
            p.manifest.version,
            origin(p),
            if tools.is_empty() {
                "-".to_string()
            } else {
                tools.join(",")
            },
            capabilities(&p.decision.grants)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn inspect(args: HostArgs, name: &str) -> anyhow::Result<ExitCode> {
    let setup = args.setup().await?;
    let Some(p) = setup.host.get(name) else {
        setup.print_warnings();
        bail!("no plugin named '{name}' was loaded (see `sandcrab plugins list`)");
    };
    let grants = &p.decision.grants;
    println!(
        "{} {} ({}, {}, ABI {})",
        p.name(),
        p.manifest.version,
        p.kind(),
        origin(p),
        p.version
    );
    if !p.manifest.description.is_empty() {
        println!("  {}", p.manifest.description);
    }
    println!("  source: {}", p.source.display());
    println!(
        "\nrequested: {}",
        serde_json::to_string(&p.manifest.capabilities)?
    );
    println!("granted:   {}", capabilities(grants));
    for denied in &p.decision.denied {
        println!("  not granted: {denied}");
    }
    println!(
        "limits:    memory {} MiB, {} ms per call, {} concurrent instances",
        grants.limits.memory_mb, grants.limits.timeout_ms, grants.limits.max_instances
    );
    let policy = &setup.host.sandbox_context().policy;
    let sandbox = match p.sandbox().confinement() {
        Ok(c) => format!(
            "{} (filesystem rules: {}, network: {})",
            c.mode(),
            if c.filesystem_confined() {
                "landlock"
            } else {
                "none"
            },
            if c.network_isolated() {
                "isolated"
            } else {
                "allowed"
            }
        ),
        Err(why) => format!("{} — programs refused: {why}", policy.sandbox_mode()),
    };
    println!("programs:  run under sandbox mode {sandbox}");
    for tool in &p.tools {
        println!("\ntool {}: {}", tool.name, tool.description);
        println!("{}", serde_json::to_string_pretty(&tool.parameters)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn check(dir: PathBuf) -> anyhow::Result<ExitCode> {
    let scratch = tempfile::tempdir()?;
    let mut config = PluginHostConfig::new(scratch.path());
    config.cache_dir = None;
    let host = PluginHost::new(config)?;
    match host.check(&PluginSource::Dir(dir.clone())) {
        Ok((manifest, version)) => {
            print_check_ok(&dir, &manifest, &version.to_string());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_check_ok(dir: &std::path::Path, manifest: &Manifest, version: &str) {
    println!(
        "ok: {} — {} {} ({} plugin, sandcrab:plugin@{version})",
        dir.display(),
        manifest.name,
        manifest.version,
        manifest.kind
    );
    println!(
        "requests: {}",
        serde_json::to_string(&manifest.capabilities).unwrap_or_default()
    );
}

fn origin(p: &LoadedPlugin) -> &'static str {
    match p.origin {
        crate::plugin::Origin::Builtin => "builtin",
        crate::plugin::Origin::ThirdParty => "external",
    }
}

/// One line: `workspace:rw programs:sh env:PATH,HOME net:no`.
fn capabilities(g: &Grants) -> String {
    let ws = match g.workspace {
        Access::None => "none",
        Access::Read => "ro",
        Access::ReadWrite => "rw",
    };
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(",")
        }
    };
    let mut out = format!(
        "workspace:{ws} programs:{} env:{}",
        list(&g.programs),
        list(&g.env)
    );
    for p in &g.paths {
        out.push_str(&format!(" path:{}:{}", p.path.display(), p.access));
    }
    out.push_str(if g.network { " net:yes" } else { " net:no" });
    out
}

fn plugin_json(p: &LoadedPlugin) -> serde_json::Value {
    serde_json::json!({
        "name": p.name(),
        "kind": p.kind(),
        "version": p.manifest.version,
        "origin": p.origin,
        "abi": p.version.to_string(),
        "source": p.source,
        "tools": p.tools,
        "requested": p.manifest.capabilities,
        "granted": p.decision.grants,
        "denied": p.decision.denied,
    })
}
