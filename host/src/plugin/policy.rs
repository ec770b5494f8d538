//! The operator's policy and the two-yes rule: a plugin gets a capability
//! only when its manifest requests it **and** the policy grants it.
//!
//! ```toml
//! [policy]
//! mode = "default"              # default | locked
//! sandbox = "workspace-write"   # process confinement: workspace-write | locked | off
//! network = true                # may confined programs reach the network (workspace-write)
//!
//! [policy.plugins.my-linter]    # grants for one plugin, by name
//! workspace = "read-write"
//! programs = ["eslint"]
//! env = ["NPM_TOKEN"]           # secrets pass only when named here
//! limits = { memory_mb = 512 }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::manifest::{Access, Capabilities, Limits, Manifest, PathAccess};

/// How strict the policy is.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// First-party plugins get what they request; third-party plugins get
    /// read-only workspace access plus what is granted by name.
    #[default]
    Default,
    /// Third-party plugins get only what is granted by name; no plugin and
    /// no program gets network; every program runs under `locked`
    /// confinement.
    Locked,
}

/// How programs started by plugins are confined.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere, write only the workspace and a private temp dir.
    WorkspaceWrite,
    /// Read only the workspace, the temp dir and system runtime paths; write
    /// only the workspace and temp dir; no network unless granted.
    Locked,
    /// No confinement (explicit operator choice; logged as a warning).
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

/// What the operator grants one plugin: the capability fields of a
/// manifest plus limit overrides.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginGrant {
    #[serde(default)]
    pub workspace: Access,
    #[serde(default)]
    pub paths: Vec<PathAccess>,
    #[serde(default)]
    pub programs: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub network: bool,
    /// Limits that replace the manifest's (the operator may raise them).
    #[serde(default)]
    pub limits: Limits,
}

/// The `[policy]` section of the configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub mode: PolicyMode,
    /// Process confinement; unset means `workspace-write`, or `locked` in
    /// locked mode.
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// Whether confined programs may use the network in `workspace-write`
    /// mode (unset: yes). Ignored in locked mode, where only a plugin's
    /// explicit network grant opens it.
    #[serde(default)]
    pub network: Option<bool>,
    /// Grants by plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginGrant>,
}

/// Where a plugin came from; first-party plugins are trusted with what
/// they request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Shipped inside the sandcrab binary.
    Builtin,
    /// Loaded from a plugin directory.
    ThirdParty,
}

/// Host defaults and ceilings for plugin limits.
pub mod limits {
    /// Default linear-memory cap.
    pub const DEFAULT_MEMORY_MB: u64 = 256;
    /// Default guest time per call.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
    /// Default concurrent instances per plugin.
    pub const DEFAULT_MAX_INSTANCES: u32 = 8;
    /// Largest memory a manifest alone can ask for.
    pub const MAX_MEMORY_MB: u64 = 2048;
    /// Longest guest time a manifest alone can ask for.
    pub const MAX_TIMEOUT_MS: u64 = 600_000;
    /// Most instances a manifest alone can ask for.
    pub const MAX_INSTANCES: u32 = 32;
}

/// Limits after defaults, manifest request and operator override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EffectiveLimits {
    pub memory_mb: u64,
    pub timeout_ms: u64,
    pub max_instances: u32,
}

/// What a plugin actually gets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grants {
    pub workspace: Access,
    pub paths: Vec<PathAccess>,
    pub programs: Vec<String>,
    pub env: Vec<String>,
    pub network: bool,
    pub limits: EffectiveLimits,
}

/// The outcome of checking a manifest against the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Request ∩ grant.
    pub grants: Grants,
    /// Requested but not granted, one line each (e.g. `programs: git`).
    pub denied: Vec<String>,
}

/// Environment variable names that hold secrets. They never reach a plugin
/// or a program unless the operator grants them by exact name.
pub fn is_secret_env(name: &str) -> bool {
    const SUFFIXES: [&str; 6] = [
        "API_KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "CREDENTIAL",
        "CREDENTIALS",
    ];
    let upper = name.to_ascii_uppercase();
    SUFFIXES
        .iter()
        .any(|s| upper == *s || upper.ends_with(&format!("_{s}")))
}

impl Policy {
    /// The process confinement in force.
    pub fn sandbox_mode(&self) -> SandboxMode {
        self.sandbox.unwrap_or(match self.mode {
            PolicyMode::Default => SandboxMode::WorkspaceWrite,
            PolicyMode::Locked => SandboxMode::Locked,
        })
    }

    /// Whether confined programs of a plugin with `grants` may use the network.
    pub fn process_network(&self, grants: &Grants) -> bool {
        match self.mode {
            PolicyMode::Locked => false,
            PolicyMode::Default => match self.sandbox_mode() {
                SandboxMode::Locked => grants.network,
                _ => self.network.unwrap_or(true) || grants.network,
            },
        }
    }

    /// Apply the two-yes rule to `manifest`.
    pub fn decide(&self, manifest: &Manifest, origin: Origin) -> Decision {
        let explicit = self.plugins.get(&manifest.name);
        let base = self.base_grant(&manifest.capabilities, origin);
        let request = &manifest.capabilities;
        let mut denied = Vec::new();

        let granted_ws = base
            .workspace
            .max(explicit.map(|g| g.workspace).unwrap_or_default());
        let workspace = request.workspace.min(granted_ws);
        if workspace < request.workspace {
            denied.push(format!(
                "workspace: {} requested, {} granted",
                request.workspace, workspace
            ));
        }

        let mut paths = Vec::new();
        for want in &request.paths {
            let granted = granted_path_access(&want.path, &base.paths, explicit);
            let access = want.access.min(granted);
            if access < want.access {
                denied.push(format!(
                    "paths: {} {} requested, {} granted",
                    want.path.display(),
                    want.access,
                    access
                ));
            }
            if access > Access::None {
                paths.push(PathAccess {
                    path: want.path.clone(),
                    access,
                });
            }
        }

        let granted_by_name = |list: &dyn Fn(&PluginGrant) -> &Vec<String>, item: &String| {
            explicit.is_some_and(|g| list(g).contains(item))
        };
        let mut programs = Vec::new();
        for program in &request.programs {
            if base.programs.contains(program) || granted_by_name(&|g| &g.programs, program) {
                programs.push(program.clone());
            } else {
                denied.push(format!("programs: {program}"));
            }
        }

        let mut env = Vec::new();
        for name in &request.env {
            let by_name = granted_by_name(&|g| &g.env, name);
            let by_default = base.env.contains(name) && !is_secret_env(name);
            if by_name || by_default {
                env.push(name.clone());
            } else if is_secret_env(name) {
                denied.push(format!(
                    "env: {name} (a secret; grant it by name to pass it)"
                ));
            } else {
                denied.push(format!("env: {name}"));
            }
        }

        let network_granted = base.network || explicit.is_some_and(|g| g.network);
        let network = request.network && network_granted && self.mode != PolicyMode::Locked;
        if request.network && !network {
            denied.push(if self.mode == PolicyMode::Locked {
                "network (locked mode allows no network)".to_string()
            } else {
                "network".to_string()
            });
        }

        let limits = effective_limits(&manifest.limits, explicit.map(|g| &g.limits));
        Decision {
            grants: Grants {
                workspace,
                paths,
                programs,
                env,
                network,
                limits,
            },
            denied,
        }
    }

    /// What a plugin gets without being named in the policy.
    fn base_grant(&self, request: &Capabilities, origin: Origin) -> Capabilities {
        match (origin, self.mode) {
            (Origin::Builtin, _) => request.clone(),
            (Origin::ThirdParty, PolicyMode::Default) => Capabilities {
                workspace: Access::Read,
                ..Capabilities::default()
            },
            (Origin::ThirdParty, PolicyMode::Locked) => Capabilities::default(),
        }
    }
}

/// The best access any grant gives to `path` (a grant of a directory covers
/// everything below it).
fn granted_path_access(path: &Path, base: &[PathAccess], explicit: Option<&PluginGrant>) -> Access {
    base.iter()
        .chain(explicit.map(|g| g.paths.as_slice()).unwrap_or_default())
        .filter(|g| path.starts_with(&g.path))
        .map(|g| g.access)
        .max()
        .unwrap_or_default()
}

fn effective_limits(requested: &Limits, operator: Option<&Limits>) -> EffectiveLimits {
    let op = operator.copied().unwrap_or_default();
    EffectiveLimits {
        memory_mb: op.memory_mb.unwrap_or(
            requested
                .memory_mb
                .unwrap_or(limits::DEFAULT_MEMORY_MB)
                .min(limits::MAX_MEMORY_MB),
        ),
        timeout_ms: op.timeout_ms.unwrap_or(
            requested
                .timeout_ms
                .unwrap_or(limits::DEFAULT_TIMEOUT_MS)
                .min(limits::MAX_TIMEOUT_MS),
        ),
        max_instances: op.max_instances.unwrap_or(
            requested
                .max_instances
                .unwrap_or(limits::DEFAULT_MAX_INSTANCES)
                .min(limits::MAX_INSTANCES),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::manifest::PluginKind;
    use std::path::PathBuf;

    fn manifest(caps: Capabilities) -> Manifest {
        Manifest {
            name: "probe".into(),
            version: "1".into(),
            kind: PluginKind::Tool,
            wasm: "probe.wasm".into(),
            description: String::new(),
            capabilities: caps,
            limits: Limits::default(),
        }
    }

    fn greedy() -> Capabilities {
        Capabilities {
            workspace: Access::ReadWrite,
            paths: vec![PathAccess {
                path: PathBuf::from("/opt/data/sub"),
                access: Access::ReadWrite,
            }],
            programs: vec!["sh".into(), "git".into()],
            env: vec!["LANG".into(), "GITHUB_TOKEN".into()],
            network: true,
        }
    }

    #[test]
    fn builtin_gets_what_it_requests_except_secrets() {
        let d = Policy::default().decide(&manifest(greedy()), Origin::Builtin);
        assert_eq!(d.grants.workspace, Access::ReadWrite);
        assert_eq!(d.grants.programs, vec!["sh", "git"]);
        assert_eq!(d.grants.env, vec!["LANG"]);
        assert!(d.grants.network);
        assert_eq!(d.grants.paths.len(), 1);
        assert_eq!(
            d.denied,
            vec!["env: GITHUB_TOKEN (a secret; grant it by name to pass it)"]
        );
    }

    #[test]
    fn third_party_without_grants_reads_workspace_only() {
        let d = Policy::default().decide(&manifest(greedy()), Origin::ThirdParty);
        assert_eq!(d.grants.workspace, Access::Read);
        assert!(d.grants.programs.is_empty());
        assert!(d.grants.env.is_empty());
        assert!(d.grants.paths.is_empty());
        assert!(!d.grants.network);
        assert!(
            d.denied
                .iter()
                .any(|l| l == "workspace: read-write requested, read granted")
        );
        assert!(d.denied.iter().any(|l| l == "programs: git"));
        assert!(d.denied.iter().any(|l| l == "network"));
    }

    #[test]
    fn effective_is_request_intersect_grant() {
        let mut policy = Policy::default();
        policy.plugins.insert(
            "probe".into(),
            PluginGrant {
                workspace: Access::ReadWrite,
                paths: vec![PathAccess {
                    path: PathBuf::from("/opt/data"),
                    access: Access::Read,
                }],
                programs: vec!["git".into(), "curl".into()],
                env: vec!["GITHUB_TOKEN".into(), "UNREQUESTED".into()],
                network: true,
                limits: Limits::default(),
            },
        );
        // Request less than granted: get only the request.
        let mut caps = greedy();
        caps.workspace = Access::Read;
        let d = policy.decide(&manifest(caps), Origin::ThirdParty);
        assert_eq!(d.grants.workspace, Access::Read);
        assert_eq!(
            d.grants.programs,
            vec!["git"],
            "sh not granted, curl not requested"
        );
        assert_eq!(
            d.grants.env,
            vec!["GITHUB_TOKEN"],
            "secret passes when named"
        );
        assert_eq!(
            d.grants.paths,
            vec![PathAccess {
                path: PathBuf::from("/opt/data/sub"),
                access: Access::Read
            }],
            "a grant of a parent directory covers the child, at the granted access"
        );
        assert!(d.grants.network);
    }

    #[test]
    fn locked_mode_grants_third_party_only_what_is_named() {
        let mut policy = Policy {
            mode: PolicyMode::Locked,
            ..Policy::default()
        };
        let d = policy.decide(&manifest(greedy()), Origin::ThirdParty);
        assert_eq!(d.grants.workspace, Access::None);
        assert!(d.grants.programs.is_empty() && d.grants.env.is_empty());

        policy.plugins.insert(
            "probe".into(),
            PluginGrant {
                workspace: Access::Read,
                programs: vec!["git".into()],
                env: vec!["LANG".into()],
                network: true,
                ..PluginGrant::default()
            },
        );
        let d = policy.decide(&manifest(greedy()), Origin::ThirdParty);
        assert_eq!(d.grants.workspace, Access::Read);
        assert_eq!(d.grants.programs, vec!["git"]);
        assert_eq!(d.grants.env, vec!["LANG"]);
        assert!(
            !d.grants.network,
            "locked mode allows no network even when granted"
        );
        assert_eq!(policy.sandbox_mode(), SandboxMode::Locked);
    }

    #[test]
    fn locked_mode_keeps_builtin_defaults_but_not_network() {
        let policy = Policy {
            mode: PolicyMode::Locked,
            ..Policy::default()
        };
        let d = policy.decide(&manifest(greedy()), Origin::Builtin);
        assert_eq!(d.grants.workspace, Access::ReadWrite);
        assert_eq!(d.grants.programs, vec!["sh", "git"]);
        assert!(!d.grants.network);
        assert!(!policy.process_network(&d.grants));
    }

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET",
            "DB_PASSWORD",
            "GCP_CREDENTIALS",
            "api_key",
        ] {
            assert!(is_secret_env(name), "{name}");
        }
        for name in ["PATH", "HOME", "TOKENIZER_PATH", "LANG"] {
            assert!(!is_secret_env(name), "{name}");
        }
    }

    #[test]
    fn limits_default_cap_and_override() {
        let mut m = manifest(Capabilities::default());
        m.limits.memory_mb = Some(100_000);
        let d = Policy::default().decide(&m, Origin::ThirdParty);
        assert_eq!(d.grants.limits.memory_mb, limits::MAX_MEMORY_MB);
        assert_eq!(d.grants.limits.timeout_ms, limits::DEFAULT_TIMEOUT_MS);

        let mut policy = Policy::default();
        policy.plugins.insert(
            "probe".into(),
            PluginGrant {
                limits: Limits {
                    memory_mb: Some(4096),
                    ..Limits::default()
                },
                ..PluginGrant::default()
            },
        );
        assert_eq!(
            policy
                .decide(&m, Origin::ThirdParty)
                .grants
                .limits
                .memory_mb,
            4096
        );
    }
}
