//! Where each grant came from: the operator's table for the plugin (file
//! and key) when it grants it, else the built-in default that gave it.

use super::decide::Asking;
use super::grants::{GrantSource, Grants};
use super::schema::PluginOrigin;
use crate::manifest::{Access, Limits};

pub(super) fn sources_of(asking: &Asking, grants: &Grants) -> Vec<GrantSource> {
    let (name, explicit, origin) = (asking.name(), asking.explicit, asking.origin);
    let file = asking
        .policy
        .sources
        .get(&format!("plugins.{name}"))
        .cloned()
        .unwrap_or_else(|| "configuration".into());
    let by_operator = |key: &str| format!("{file}:policy.plugins.{name}.{key}");
    let default = match origin {
        PluginOrigin::Builtin => {
            "built-in default: a first-party plugin gets what its manifest asks"
        }
        PluginOrigin::ThirdParty => "built-in default: a third-party plugin may read the workspace",
    };
    let mut out = Vec::new();
    let mut line = |capability: &str, value: String, operator: bool| {
        out.push(GrantSource {
            capability: capability.into(),
            value,
            source: if operator {
                by_operator(capability)
            } else {
                default.into()
            },
        })
    };
    if grants.workspace > Access::None {
        let operator = explicit.is_some_and(|g| g.workspace >= grants.workspace);
        line("workspace", grants.workspace.to_string(), operator);
    }
    for p in &grants.paths {
        let operator = explicit.is_some_and(|g| {
            g.paths.iter().any(|gp| {
                gp.path
                    .canonicalize()
                    .is_ok_and(|granted| p.path.starts_with(granted))
            })
        });
        line(
            "paths",
            format!("{} ({})", p.path.display(), p.access),
            operator,
        );
    }
    for program in &grants.programs {
        let operator = explicit.is_some_and(|g| g.programs.contains(program));
        line("programs", program.clone(), operator);
    }
    for var in &grants.env {
        let operator = explicit.is_some_and(|g| g.env.contains(var));
        line("env", var.clone(), operator);
    }
    if grants.network_on_request {
        line(
            "network",
            "on request (per call, by rule or approval)".into(),
            false,
        );
    }
    if grants.network {
        line("network", "yes".into(), explicit.is_some_and(|g| g.network));
    }
    for rule in &grants.http {
        let operator =
            explicit.is_some_and(|g| g.http.iter().any(|h| h.origin.covers(&rule.origin)));
        line("http", rule.describe(), operator);
    }
    for credential in &grants.credentials {
        line("credentials", credential.describe(), true);
    }
    let raised = explicit.is_some_and(|g| g.limits != Limits::default());
    let l = &grants.limits;
    line(
        "limits",
        format!(
            "{} MiB, {} ms, {} instances",
            l.memory_mb, l.timeout_ms, l.max_instances
        ),
        raised,
    );
    out
}
