//! `sandcrab plugins list` and `sandcrab plugins inspect NAME`: what is
//! loaded, what it may do, and which of its tools the model is offered.

use std::process::ExitCode;

use anyhow::bail;

use crate::agent::{AgentOptions, Offer, Profile, ToolSelection};
use crate::cli::setup::{HostArgs, Setup};
use crate::plugin::policy::Grants;
use crate::plugin::{Access, LoadedPlugin, PluginHost};

/// Which tools the model would be offered, as `run` would decide it.
struct Offers {
    /// None when the profile cannot be loaded (then every tool counts as
    /// in the profile, and the reason is in `note`).
    profile: Option<Profile>,
    selection: ToolSelection,
    note: String,
}

impl Offers {
    async fn resolve(setup: &Setup) -> Offers {
        let selection = setup.config.agent.tool_selection();
        let env = |k: &str| std::env::var(k).ok();
        let resolved =
            crate::agent::resolve_provider(&setup.config, &AgentOptions::default(), &env);
        let (profile, note) = match resolved {
            Ok((_, id)) => match Profile::load(&setup.host, &id).await {
                Ok(p) => (Some(p), format!("with profile '{id}'")),
                Err(e) => (None, format!("profile '{id}' unavailable: {e}")),
            },
            Err(e) => (None, e.to_string()),
        };
        Offers {
            profile,
            selection,
            note,
        }
    }

    fn of(&self, host: &PluginHost, plugin: &LoadedPlugin, tool: &str) -> Offer {
        crate::agent::tool_set::offer(
            host,
            self.profile.as_ref(),
            &self.selection,
            plugin.name(),
            tool,
        )
    }
}

pub async fn list(args: HostArgs, json: bool) -> anyhow::Result<ExitCode> {
    let setup = args.setup().await?;
    setup.print_warnings();
    let host = &setup.host;
    let offers = Offers::resolve(&setup).await;
    for p in host.plugins() {
        if let Some(note) = p.sandbox().scratch_note() {
            errln!("warning: {}", crate::cli::terminal::sanitize(&note));
        }
    }
    if json {
        let plugins: Vec<serde_json::Value> = host
            .plugins()
            .iter()
            .map(|p| plugin_json(host, &offers, p))
            .collect();
        let out = serde_json::json!({ "plugins": plugins, "diagnostics": host.diagnostics() });
        outln!("{}", crate::cli::terminal::json_pretty(&out));
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<20} {:<11} {:<9} {:<10} {:<40} CAPABILITIES",
        "NAME",
        "KIND",
        "VERSION",
        "ORIGIN",
        "TOOLS"
    );
    for p in host.plugins() {
        let tools: Vec<String> = p
            .tools
            .iter()
            .map(|t| match offers.of(host, p, &t.name) {
                Offer::Offered => t.name.clone(),
                _ => format!("({})", t.name),
            })
            .collect();
        outln!(
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
    outln!(
        "\nTools in (parentheses) are not offered to the model ({}); `sandcrab plugins inspect NAME` says why.",
        offers.note
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn inspect(args: HostArgs, name: &str) -> anyhow::Result<ExitCode> {
    let setup = args.setup().await?;
    let Some(p) = setup.host.get(name) else {
        setup.print_warnings();
        bail!("no plugin named '{name}' was loaded (see `sandcrab plugins list`)");
    };
    let offers = Offers::resolve(&setup).await;
    let grants = &p.decision.grants;
    outln!(
        "{} {} ({}, {}, ABI {})",
        p.name(),
        p.manifest.version,
        p.kind(),
        origin(p),
        p.version
    );
    if !p.manifest.description.is_empty() {
        outln!("  {}", p.manifest.description);
    }
    outln!("  source: {}", p.source.display());
    if let Some(signer) = &p.signer {
        outln!("  signed by: {signer}");
    }
    if let Some(pin) = setup
        .config
        .policy
        .plugins
        .get(name)
        .and_then(|g| g.sha256.as_deref())
    {
        outln!("  pinned: sha256 {pin}");
    }
    outln!(
        "\nrequested: {}",
        serde_json::to_string(&p.manifest.capabilities)?
    );
    outln!("granted:   {}", capabilities(grants));
    for denied in &p.decision.denied {
        outln!("  not granted: {denied}");
    }
    if let Some(note) = p.sandbox().scratch_note() {
        outln!("  warning: {note}");
    }
    outln!(
        "limits:    memory {} MiB, {} ms per call, {} concurrent instances",
        grants.limits.memory_mb,
        grants.limits.timeout_ms,
        grants.limits.max_instances
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
    outln!("programs:  run under sandbox mode {sandbox}");
    if grants.http.is_empty() {
        outln!("http:      none");
    } else {
        for rule in &grants.http {
            outln!("http:      {}", rule.describe());
        }
        outln!(
            "           each request ≤ {} KiB out, ≤ {} KiB in, {} ms, {} open per call",
            grants.limits.http_request_kb,
            grants.limits.http_response_kb,
            grants.limits.http_timeout_ms,
            grants.limits.http_concurrent
        );
    }
    for credential in &p.sandbox().http.credentials {
        let state = match credential.value() {
            Ok(_) => "set".to_string(),
            Err(why) => format!("UNUSABLE: {why}"),
        };
        outln!("credential: {} ({state})", credential.grant.describe());
    }
    for tool in &p.tools {
        let offer = offers.of(&setup.host, p, &tool.name);
        let seen = match offer {
            Offer::Offered => format!("offered to the model {}", offers.note),
            other => format!("not offered: {}", other.describe()),
        };
        outln!("\ntool {} ({seen}): {}", tool.name, tool.description);
        outln!("{}", crate::cli::terminal::json_pretty(&tool.parameters));
    }
    Ok(ExitCode::SUCCESS)
}

fn origin(p: &LoadedPlugin) -> &'static str {
    p.origin.label()
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
    if !g.http.is_empty() {
        let origins: Vec<String> = g.http.iter().map(|r| r.origin.to_string()).collect();
        out.push_str(&format!(" http:{}", origins.join(",")));
    }
    if !g.credentials.is_empty() {
        let names: Vec<String> = g
            .credentials
            .iter()
            .map(|c| format!("{}@{}", c.rule.header, c.origin))
            .collect();
        out.push_str(&format!(" credentials:{}", names.join(",")));
    }
    out
}

fn plugin_json(host: &PluginHost, offers: &Offers, p: &LoadedPlugin) -> serde_json::Value {
    let offered: serde_json::Map<String, serde_json::Value> = p
        .tools
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                serde_json::to_value(offers.of(host, p, &t.name)).unwrap_or_default(),
            )
        })
        .collect();
    serde_json::json!({
        "name": p.name(),
        "kind": p.kind(),
        "version": p.manifest.version,
        "origin": p.origin,
        "abi": p.version.to_string(),
        "source": p.source,
        "signer": p.signer,
        "tools": p.tools,
        "offered": offered,
        "requested": p.manifest.capabilities,
        "granted": p.decision.grants,
        "denied": p.decision.denied,
    })
}
