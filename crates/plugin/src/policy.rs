//! The operator's policy and the two-yes rule: a plugin gets a capability
//! only when its manifest requests it **and** the policy grants it.
//!
//! ```toml
//! [policy]
//! mode = "default"              # default | locked
//! sandbox = "workspace-write"   # process confinement: workspace-write | locked | off
//! network = false               # no plugin and no program gets the network
//! protected_paths = ["**/.git", ".sandcrab", "sandcrab.toml"]
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

use super::http::{CredentialGrant, CredentialRule, HttpGrant, HttpRule, OriginPattern};
use super::manifest::{Access, Capabilities, Limits, Manifest, NetworkUse, PathAccess};
pub use crate::process::SandboxMode;

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
    /// Origins the plugin may reach over HTTP (those its manifest also asks
    /// for): `"https://api.github.com"`, or a table
    /// `{ origin, methods = ["GET"], private = true }`.
    #[serde(default)]
    pub http: Vec<HttpGrant>,
    /// Headers the host adds to the plugin's requests, by origin; the
    /// plugin never sees their values.
    #[serde(default)]
    pub credentials: BTreeMap<OriginPattern, CredentialRule>,
    /// Limits that replace the manifest's (the operator may raise them).
    #[serde(default)]
    pub limits: Limits,
    /// Tools of this plugin that may replace a tool of the same name
    /// loaded earlier (a first-party tool or another plugin's).
    #[serde(default)]
    pub override_tools: Vec<String>,
    /// The SHA-256 (hex) the plugin's component must have; a different
    /// component is refused. `sandcrab plugins pin NAME` writes it.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The component these grants were given for (`sandcrab plugins grant
    /// NAME` writes it): a later component still gets only these grants,
    /// and what it asks for beyond them is reported as a change.
    #[serde(default)]
    pub granted_sha256: Option<String>,
}

/// The `[policy]` section of the configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub mode: PolicyMode,
    /// Process confinement; unset means `workspace-write`. Locked mode
    /// always confines as `locked` (a different setting is ignored with a
    /// warning).
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// `false` takes the network from every plugin and program, whatever
    /// they are granted. Unset or `true`: as granted (a plugin's programs
    /// have the network exactly when the plugin does). Locked mode allows
    /// no network at all.
    #[serde(default)]
    pub network: Option<bool>,
    /// Workspace paths that every confined program and the file tools may
    /// read but never write, even in a writable workspace: files that make
    /// other programs run code later (`**` matches any folders; `**/.git`
    /// is git's metadata at any depth, see [`crate::kept::Protected`]).
    /// Unset: [`DEFAULT_PROTECTED`]; `[]` lifts the protection.
    #[serde(default)]
    pub protected_paths: Option<Vec<String>>,
    /// `true` lets programs make Unix-domain sockets in `workspace-write`
    /// (test suites that serve on one). Unset or `false`: refused, since a
    /// socket reaches whatever listens on it outside every sandbox (a
    /// terminal multiplexer, docker, the session bus). Never in `locked`.
    #[serde(default)]
    pub unix_sockets: Option<bool>,
    /// More paths no tool and no program may read or write, besides the
    /// host's own secrets and the user's credential stores (`~` for the
    /// home directory).
    #[serde(default)]
    pub kept_paths: Vec<std::path::PathBuf>,
    /// Certificates (PEM files) plugins' HTTPS requests trust besides the
    /// public Web PKI roots: an internal CA.
    #[serde(default)]
    pub http_ca_files: Vec<std::path::PathBuf>,
    /// Grants by plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginGrant>,
    /// Grants of the MCP servers sandcrab starts, by server name
    /// (`[policy.mcp.NAME]`).
    #[serde(default)]
    pub mcp: BTreeMap<String, McpGrant>,
    /// Which file each `[policy.plugins.NAME]` / `[policy.mcp.NAME]` table
    /// came from, keyed `plugins.NAME` / `mcp.NAME` (set by the loader of
    /// the configuration; receipts name it).
    #[serde(skip)]
    pub sources: BTreeMap<String, String>,
}

/// What an MCP server sandcrab starts may touch. Unset: read the
/// workspace, nothing else beyond the system's runtime paths, no network.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpGrant {
    #[serde(default = "read_access")]
    pub workspace: Access,
    /// Further paths (the server's own installation, a data directory).
    #[serde(default)]
    pub paths: Vec<PathAccess>,
    #[serde(default)]
    pub network: bool,
}

fn read_access() -> Access {
    Access::Read
}

impl Default for McpGrant {
    fn default() -> Self {
        McpGrant {
            workspace: Access::Read,
            paths: Vec::new(),
            network: false,
        }
    }
}

/// Where a plugin came from; first-party plugins are trusted with what
/// they request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginOrigin {
    /// Shipped inside the sandcrab binary.
    Builtin,
    /// Loaded from a plugin directory.
    ThirdParty,
}

impl PluginOrigin {
    /// How listings name it: `builtin` or `external`.
    pub fn label(self) -> &'static str {
        match self {
            PluginOrigin::Builtin => "builtin",
            PluginOrigin::ThirdParty => "external",
        }
    }
}

/// Host defaults and ceilings for plugin limits.
pub mod limits {
    /// Default linear-memory cap.
    pub const DEFAULT_MEMORY_MB: u64 = 256;
    /// Default guest time per call.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
    /// Default concurrent instances per plugin.
    pub const DEFAULT_MAX_INSTANCES: u32 = 8;
    /// Largest memory any plugin can get (the engine's pool slot size).
    pub const MAX_MEMORY_MB: u64 = 2048;
    /// Longest time any plugin call can get (its programs included): the
    /// longest program timeout plus room to stop it.
    pub const MAX_TIMEOUT_MS: u64 = 610_000;
    /// Most instances any plugin can get.
    pub const MAX_INSTANCES: u32 = 32;
    /// Default and largest request body of one HTTP request, in KiB.
    pub const DEFAULT_HTTP_REQUEST_KB: u64 = 1024;
    pub const MAX_HTTP_REQUEST_KB: u64 = 256 * 1024;
    /// Default and largest response of one HTTP request, in KiB.
    pub const DEFAULT_HTTP_RESPONSE_KB: u64 = 8 * 1024;
    pub const MAX_HTTP_RESPONSE_KB: u64 = 256 * 1024;
    /// Default time of one HTTP request (the call's limit bounds it too).
    pub const DEFAULT_HTTP_TIMEOUT_MS: u64 = 30_000;
    /// Default and most HTTP requests one call may have open.
    pub const DEFAULT_HTTP_CONCURRENT: u32 = 4;
    pub const MAX_HTTP_CONCURRENT: u32 = 64;
}

/// Limits after defaults, manifest request and operator override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EffectiveLimits {
    pub memory_mb: u64,
    pub timeout_ms: u64,
    pub max_instances: u32,
    /// Warm instances may be called again (the plugin asked, the operator
    /// did not refuse).
    pub reuse: bool,
    pub http_request_kb: u64,
    pub http_response_kb: u64,
    pub http_timeout_ms: u64,
    pub http_concurrent: u32,
}

/// What a plugin actually gets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grants {
    pub workspace: Access,
    pub paths: Vec<PathAccess>,
    pub programs: Vec<String>,
    pub env: Vec<String>,
    pub network: bool,
    /// Its programs may have the network for a call a rule or the
    /// operator gave it to (see [`NetworkUse::OnRequest`]).
    pub network_on_request: bool,
    /// Origins the plugin may reach over HTTP.
    pub http: Vec<HttpRule>,
    /// Headers the host adds to its requests (names, never values).
    pub credentials: Vec<CredentialGrant>,
    pub limits: EffectiveLimits,
}

/// The outcome of checking a manifest against the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrantDecision {
    /// Request ∩ grant.
    pub grants: Grants,
    /// Requested but not granted, one line each (e.g. `programs: git`).
    pub denied: Vec<String>,
    /// Where each granted capability came from.
    pub sources: Vec<GrantSource>,
}

/// One granted capability and the rule that granted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantSource {
    /// `workspace`, `paths`, `programs`, `env`, `network`, `limits`.
    pub capability: String,
    /// What was granted (a name, never a value of a variable).
    pub value: String,
    /// `FILE:policy.plugins.NAME.KEY`, or the built-in default that gave
    /// it.
    pub source: String,
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

pub use crate::kept::DEFAULT_PROTECTED;

impl Policy {
    /// The process confinement in force: locked mode pins `locked`.
    pub fn sandbox_mode(&self) -> SandboxMode {
        match self.mode {
            PolicyMode::Locked => SandboxMode::Locked,
            PolicyMode::Default => self.sandbox.unwrap_or(SandboxMode::WorkspaceWrite),
        }
    }

    /// Whether the one sandbox mode in force is `locked`, however it was
    /// spelled (`[policy] mode`, `[policy] sandbox`, `--sandbox`): every
    /// decision that depends on locked mode asks this, and only this.
    pub fn locked(&self) -> bool {
        self.sandbox_mode() == SandboxMode::Locked
    }

    /// A warning when plugin `name`'s component is not the one its grants
    /// were given for and it asks for more than they allow.
    pub fn consent_changed(
        &self,
        name: &str,
        component_sha256: &str,
        denied: &[String],
    ) -> Option<String> {
        let granted_for = self.plugins.get(name)?.granted_sha256.as_deref()?;
        if granted_for.eq_ignore_ascii_case(component_sha256) || denied.is_empty() {
            return None;
        }
        Some(format!(
            "plugin '{name}' changed since you granted it (component sha256 {} → {}) and asks for more than you granted: {}; it runs with only what you granted. Review it, then run `sandcrab plugins grant {name}` to grant what it asks now",
            short(granted_for),
            short(component_sha256),
            denied.join("; ")
        ))
    }

    /// Whether an MCP server program with `grant` gets the network: its
    /// grant, unless locked mode or `[policy] network = false` takes it.
    pub fn mcp_network(&self, grant: &McpGrant) -> bool {
        grant.network && !self.locked() && self.network != Some(false)
    }

    /// Settings the policy overrides, one warning each.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.mode == PolicyMode::Locked
            && let Some(mode) = self.sandbox.filter(|m| *m != SandboxMode::Locked)
        {
            out.push(format!(
                "[policy] mode = \"locked\" pins the sandbox to locked; sandbox = \"{mode}\" is ignored"
            ));
        }
        out
    }

    /// The protected paths of every workspace (see [`crate::kept::Protected`]).
    pub fn protected(&self) -> crate::kept::Protected {
        match &self.protected_paths {
            Some(paths) => crate::kept::Protected::parse(paths.iter().map(String::as_str)),
            None => crate::kept::Protected::default(),
        }
    }

    /// The protected paths as the operator wrote them (or the default).
    pub fn protected_patterns(&self) -> Vec<String> {
        match &self.protected_paths {
            Some(paths) => paths.clone(),
            None => DEFAULT_PROTECTED.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// Apply the two-yes rule to `manifest`.
    pub fn decide(&self, manifest: &Manifest, origin: PluginOrigin) -> GrantDecision {
        let name = manifest.name.as_str();
        let explicit = self.plugins.get(name);
        let base = self.base_grant(&manifest.capabilities, origin);
        let request = &manifest.capabilities;
        let mut denied = Vec::new();

        let granted_ws = base
            .workspace
            .max(explicit.map(|g| g.workspace).unwrap_or_default());
        let workspace = request.workspace.min(granted_ws);
        if workspace < request.workspace {
            denied.push(format!(
                "workspace: {} requested, {} granted{}",
                request.workspace,
                workspace,
                hint(name, &format!("workspace = \"{}\"", request.workspace))
            ));
        }

        let mut paths = Vec::new();
        for want in &request.paths {
            // Compare real paths: `..` and symbolic links in a request
            // must not lead out of a granted directory.
            let Ok(real) = want.path.canonicalize() else {
                denied.push(format!(
                    "paths: {} does not exist or cannot be resolved",
                    want.path.display()
                ));
                continue;
            };
            let granted = granted_path_access(&real, &base.paths, explicit);
            let access = want.access.min(granted);
            if access < want.access {
                denied.push(format!(
                    "paths: {} {} requested, {} granted{}",
                    want.path.display(),
                    want.access,
                    access,
                    hint(
                        name,
                        &format!(
                            "paths = [{{ path = \"{}\", access = \"{}\" }}]",
                            real.display(),
                            want.access
                        )
                    )
                ));
            }
            if access > Access::None {
                paths.push(PathAccess { path: real, access });
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
                denied.push(format!(
                    "programs: {program}{}",
                    hint(name, &format!("programs = [\"{program}\"]"))
                ));
            }
        }

        let mut env = Vec::new();
        for var in &request.env {
            let by_name = granted_by_name(&|g| &g.env, var);
            let by_default = base.env.contains(var) && !is_secret_env(var);
            if by_name || by_default {
                env.push(var.clone());
            } else if self.locked() && origin == PluginOrigin::Builtin && !is_secret_env(var) {
                // Locked mode passes no unnamed variable, by design: a
                // first-party tool's programs get the sandbox's own base
                // environment (PATH, a private HOME and TMPDIR) instead.
                // Nothing for the operator to act on, so no warning.
            } else if is_secret_env(var) {
                denied.push(format!(
                    "env: {var} is a secret, passed only when granted by name{}",
                    hint(name, &format!("env = [\"{var}\"]"))
                ));
            } else {
                denied.push(format!(
                    "env: {var}{}",
                    hint(name, &format!("env = [\"{var}\"]"))
                ));
            }
        }

        // The network: always, when the manifest asks for it always and
        // the policy grants it; on request, for a call a rule or the
        // operator gives it to — unless the operator granted it by name
        // (then always). Never in locked mode or with `[policy] network =
        // false`.
        let reachable = !self.locked() && self.network != Some(false);
        let by_name = explicit.is_some_and(|g| g.network);
        let (network, network_on_request) = match request.network {
            NetworkUse::No => (false, false),
            NetworkUse::Always => ((base.network.wanted() || by_name) && reachable, false),
            NetworkUse::OnRequest => (by_name && reachable, !by_name && reachable),
        };
        // A first-party tool without the network in locked mode is the
        // mode working as documented, not something to warn about.
        let by_design = self.locked() && origin == PluginOrigin::Builtin;
        if request.network.wanted() && !network && !network_on_request && !by_design {
            denied.push(if self.locked() {
                "network (locked mode allows no network)".to_string()
            } else if self.network == Some(false) {
                "network ([policy] network = false)".to_string()
            } else {
                format!("network{}", hint(name, "network = true"))
            });
        }

        let (http, credentials) = self.decide_http(name, request, explicit, origin, &mut denied);

        let limits = effective_limits(
            &manifest.limits,
            explicit.map(|g| &g.limits),
            origin,
            name,
            &mut denied,
        );
        let grants = Grants {
            workspace,
            paths,
            programs,
            env,
            network,
            network_on_request,
            http,
            credentials,
            limits,
        };
        let sources = self.sources_of(name, &grants, explicit, origin);
        GrantDecision {
            grants,
            denied,
            sources,
        }
    }

    /// The origins `request` asks for that the operator grants, and the
    /// credentials for them. Only explicit grants give HTTP (a first-party
    /// plugin's request is its own grant outside locked mode); locked mode
    /// gives it only to pinned plugins; `[policy] network = false` to none.
    fn decide_http(
        &self,
        name: &str,
        request: &Capabilities,
        explicit: Option<&PluginGrant>,
        origin: PluginOrigin,
        denied: &mut Vec<String>,
    ) -> (Vec<HttpRule>, Vec<CredentialGrant>) {
        if request.http.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let asked = || {
            request
                .http
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        if self.network == Some(false) {
            denied.push(format!("http: {} ([policy] network = false)", asked()));
            return (Vec::new(), Vec::new());
        }
        let pinned = explicit.is_some_and(|g| g.sha256.is_some());
        if self.locked() && !pinned {
            denied.push(format!(
                "http: {} (locked mode grants HTTP only to pinned plugins: run `sandcrab plugins pin {name}`, then grant the origins)",
                asked()
            ));
            return (Vec::new(), Vec::new());
        }
        let mut granted: Vec<HttpGrant> = explicit.map(|g| g.http.clone()).unwrap_or_default();
        if origin == PluginOrigin::Builtin && !self.locked() {
            granted.extend(request.http.iter().map(|o| HttpGrant {
                origin: o.clone(),
                methods: Vec::new(),
                private: false,
            }));
        }
        let rules = super::http::grant::intersect(&request.http, &granted);
        for want in &request.http {
            if !rules
                .iter()
                .any(|r| want.covers(&r.origin) || r.origin.covers(want))
            {
                denied.push(format!(
                    "http: {want}{}",
                    hint(name, &format!("http = [\"{want}\"]"))
                ));
            }
        }
        let empty = BTreeMap::new();
        let (credentials, unused) = super::http::grant::usable_credentials(
            explicit.map(|g| &g.credentials).unwrap_or(&empty),
            &rules,
        );
        for credential in &credentials {
            for var in &credential.rule.vars {
                if explicit.is_some_and(|g| g.env.contains(var)) {
                    denied.push(format!(
                        "credentials: {var} is also granted to the plugin as env, so the plugin can read the credential the host adds for {}; take it out of env",
                        credential.origin
                    ));
                }
            }
        }
        for origin in unused {
            denied.push(format!(
                "credentials: {origin} is not an origin the plugin may reach, so its credential is never sent"
            ));
        }
        (rules, credentials)
    }

    /// Where each of `grants` came from: the operator's table for the
    /// plugin (file and key) when it grants it, else the built-in default.
    fn sources_of(
        &self,
        name: &str,
        grants: &Grants,
        explicit: Option<&PluginGrant>,
        origin: PluginOrigin,
    ) -> Vec<GrantSource> {
        let file = self
            .sources
            .get(&format!("plugins.{name}"))
            .cloned()
            .unwrap_or_else(|| "configuration".into());
        let by_operator = |key: &str| format!("{file}:policy.plugins.{name}.{key}");
        let default = match origin {
            PluginOrigin::Builtin => {
                "built-in default: a first-party plugin gets what its manifest asks"
            }
            PluginOrigin::ThirdParty => {
                "built-in default: a third-party plugin may read the workspace"
            }
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

    /// What a plugin gets without being named in the policy.
    fn base_grant(&self, request: &Capabilities, origin: PluginOrigin) -> Capabilities {
        match (origin, self.locked()) {
            (PluginOrigin::Builtin, false) => request.clone(),
            // Locked mode passes no environment variable unless named.
            (PluginOrigin::Builtin, true) => Capabilities {
                env: Vec::new(),
                ..request.clone()
            },
            (PluginOrigin::ThirdParty, false) => Capabilities {
                workspace: Access::Read,
                ..Capabilities::default()
            },
            (PluginOrigin::ThirdParty, true) => Capabilities::default(),
        }
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// How to grant what was refused, for a refusal message.
fn hint(plugin: &str, setting: &str) -> String {
    format!(
        " (grant it with [policy.plugins.{plugin}] {setting} in {})",
        crate::user_files::config_file_shown()
    )
}

/// The best access any grant gives to the real path `path` (a grant of a
/// directory covers everything below it; grants are compared by their real
/// paths too).
fn granted_path_access(path: &Path, base: &[PathAccess], explicit: Option<&PluginGrant>) -> Access {
    base.iter()
        .chain(explicit.map(|g| g.paths.as_slice()).unwrap_or_default())
        .filter(|g| {
            g.path
                .canonicalize()
                .is_ok_and(|granted| path.starts_with(granted))
        })
        .map(|g| g.access)
        .max()
        .unwrap_or_default()
}

/// Limits: the operator's override, else the request. A third-party
/// plugin's request above the host default needs the operator's grant;
/// nothing above the engine's ceiling is possible.
fn effective_limits(
    requested: &Limits,
    operator: Option<&Limits>,
    origin: PluginOrigin,
    plugin: &str,
    denied: &mut Vec<String>,
) -> EffectiveLimits {
    let op = operator.copied().unwrap_or_default();
    let mut pick = |key: &str, asked: Option<u64>, granted: Option<u64>, default: u64, max: u64| {
        if let Some(granted) = granted {
            return granted.min(max);
        }
        let asked = asked.unwrap_or(default).min(max);
        if origin == PluginOrigin::ThirdParty && asked > default {
            denied.push(format!(
                "limits: {key} {asked} requested, {default} granted{}",
                hint(plugin, &format!("limits = {{ {key} = {asked} }}"))
            ));
            return default;
        }
        asked
    };
    EffectiveLimits {
        memory_mb: pick(
            "memory_mb",
            requested.memory_mb,
            op.memory_mb,
            limits::DEFAULT_MEMORY_MB,
            limits::MAX_MEMORY_MB,
        ),
        timeout_ms: pick(
            "timeout_ms",
            requested.timeout_ms,
            op.timeout_ms,
            limits::DEFAULT_TIMEOUT_MS,
            limits::MAX_TIMEOUT_MS,
        ),
        max_instances: pick(
            "max_instances",
            requested.max_instances.map(u64::from),
            op.max_instances.map(u64::from),
            u64::from(limits::DEFAULT_MAX_INSTANCES),
            u64::from(limits::MAX_INSTANCES),
        ) as u32,
        http_request_kb: pick(
            "http_request_kb",
            requested.http_request_kb,
            op.http_request_kb,
            limits::DEFAULT_HTTP_REQUEST_KB,
            limits::MAX_HTTP_REQUEST_KB,
        ),
        http_response_kb: pick(
            "http_response_kb",
            requested.http_response_kb,
            op.http_response_kb,
            limits::DEFAULT_HTTP_RESPONSE_KB,
            limits::MAX_HTTP_RESPONSE_KB,
        ),
        http_timeout_ms: pick(
            "http_timeout_ms",
            requested.http_timeout_ms,
            op.http_timeout_ms,
            limits::DEFAULT_HTTP_TIMEOUT_MS,
            limits::MAX_TIMEOUT_MS,
        ),
        http_concurrent: pick(
            "http_concurrent",
            requested.http_concurrent.map(u64::from),
            op.http_concurrent.map(u64::from),
            u64::from(limits::DEFAULT_HTTP_CONCURRENT),
            u64::from(limits::MAX_HTTP_CONCURRENT),
        ) as u32,
        reuse: requested.reuse == Some(true) && op.reuse != Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::PluginKind;
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

    /// A real directory tree for path grants: `<tmp>/data/sub`.
    fn data_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().canonicalize().unwrap().join("data");
        std::fs::create_dir_all(data.join("sub")).unwrap();
        (dir, data)
    }

    fn greedy(data: &Path) -> Capabilities {
        Capabilities {
            workspace: Access::ReadWrite,
            paths: vec![PathAccess {
                path: data.join("sub"),
                access: Access::ReadWrite,
            }],
            programs: vec!["sh".into(), "git".into()],
            env: vec!["LANG".into(), "GITHUB_TOKEN".into()],
            network: NetworkUse::Always,
            http: vec!["https://api.github.com".parse().unwrap()],
        }
    }

    fn http_grant(origins: &[&str], pinned: bool) -> PluginGrant {
        let text = format!(
            "http = [{}]\n{}[credentials.\"https://api.github.com\"]\nheader = \"Authorization\"\nvalue = \"Bearer ${{GITHUB_TOKEN}}\"\n",
            origins
                .iter()
                .map(|o| format!("\"{o}\""))
                .collect::<Vec<_>>()
                .join(", "),
            if pinned { "sha256 = \"ab\"\n" } else { "" }
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn http_needs_both_the_manifest_and_the_grant() {
        let (_dir, data) = data_dir();
        let m = manifest(greedy(&data));
        let none = Policy::default().decide(&m, PluginOrigin::ThirdParty);
        assert!(none.grants.http.is_empty());
        assert!(
            none.denied.iter().any(|d| d.contains("http: https://api.github.com (grant it with [policy.plugins.probe] http = [\"https://api.github.com\"]")),
            "{:?}",
            none.denied
        );
        let mut policy = Policy::default();
        policy.plugins.insert(
            "probe".into(),
            http_grant(&["https://api.github.com", "https://api.other.com"], false),
        );
        let d = policy.decide(&m, PluginOrigin::ThirdParty);
        assert!(!d.denied.iter().any(|x| x.contains("also granted")));
        let shown: Vec<String> = d.grants.http.iter().map(|r| r.describe()).collect();
        assert_eq!(shown, ["https://api.github.com"], "only what was asked for");
        assert_eq!(
            d.grants.credentials[0].describe(),
            "authorization for https://api.github.com from $GITHUB_TOKEN"
        );
        assert!(d.sources.iter().any(|s| s.capability == "credentials"
            && s.source.ends_with("policy.plugins.probe.credentials")));
        // The credential's variable granted as env too: the plugin could read it.
        policy.plugins.get_mut("probe").unwrap().env = vec!["GITHUB_TOKEN".into()];
        let d = policy.decide(&m, PluginOrigin::ThirdParty);
        assert!(
            d.denied
                .iter()
                .any(|x| x.contains("GITHUB_TOKEN is also granted to the plugin as env")),
            "{:?}",
            d.denied
        );
    }

    #[test]
    fn locked_mode_gives_http_only_to_pinned_plugins_and_network_false_to_none() {
        let (_dir, data) = data_dir();
        let m = manifest(greedy(&data));
        let mut policy = Policy {
            mode: PolicyMode::Locked,
            ..Policy::default()
        };
        policy.plugins.insert(
            "probe".into(),
            http_grant(&["https://api.github.com"], false),
        );
        let d = policy.decide(&m, PluginOrigin::ThirdParty);
        assert!(d.grants.http.is_empty());
        assert!(
            d.denied
                .iter()
                .any(|x| x.contains("sandcrab plugins pin probe")),
            "{:?}",
            d.denied
        );
        policy.plugins.insert(
            "probe".into(),
            http_grant(&["https://api.github.com"], true),
        );
        assert_eq!(
            policy
                .decide(&m, PluginOrigin::ThirdParty)
                .grants
                .http
                .len(),
            1
        );
        policy.network = Some(false);
        policy.mode = PolicyMode::Default;
        let d = policy.decide(&m, PluginOrigin::ThirdParty);
        assert!(d.grants.http.is_empty());
        assert!(d.grants.credentials.is_empty());
    }

    #[test]
    fn builtin_gets_what_it_requests_except_secrets() {
        let (_t, data) = data_dir();
        let d = Policy::default().decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
        assert_eq!(d.grants.workspace, Access::ReadWrite);
        assert_eq!(d.grants.programs, vec!["sh", "git"]);
        assert_eq!(d.grants.env, vec!["LANG"]);
        assert!(d.grants.network);
        assert_eq!(d.grants.paths.len(), 1);
        assert_eq!(d.denied.len(), 1);
        assert!(
            d.denied[0].starts_with("env: GITHUB_TOKEN is a secret")
                && d.denied[0].contains("[policy.plugins.probe] env = [\"GITHUB_TOKEN\"]"),
            "{}",
            d.denied[0]
        );
    }

    #[test]
    fn third_party_without_grants_reads_workspace_only() {
        let (_t, data) = data_dir();
        let d = Policy::default().decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
        assert_eq!(d.grants.workspace, Access::Read);
        assert!(d.grants.programs.is_empty());
        assert!(d.grants.env.is_empty());
        assert!(d.grants.paths.is_empty());
        assert!(!d.grants.network);
        let has = |prefix: &str| d.denied.iter().any(|l| l.starts_with(prefix));
        assert!(has(&format!(
            "workspace: read-write requested, read granted (grant it with [policy.plugins.probe] workspace = \"read-write\" in {})",
            crate::user_files::config_file_shown()
        )));
        assert!(has(
            "programs: git (grant it with [policy.plugins.probe] programs = [\"git\"]"
        ));
        assert!(has(
            "network (grant it with [policy.plugins.probe] network = true"
        ));
    }

    #[test]
    fn effective_is_request_intersect_grant() {
        let (_t, data) = data_dir();
        let mut policy = Policy::default();
        policy.plugins.insert(
            "probe".into(),
            PluginGrant {
                workspace: Access::ReadWrite,
                paths: vec![PathAccess {
                    path: data.clone(),
                    access: Access::Read,
                }],
                programs: vec!["git".into(), "curl".into()],
                env: vec!["GITHUB_TOKEN".into(), "UNREQUESTED".into()],
                network: true,
                ..PluginGrant::default()
            },
        );
        // Request less than granted: get only the request.
        let mut caps = greedy(&data);
        caps.workspace = Access::Read;
        let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
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
                path: data.join("sub"),
                access: Access::Read
            }],
            "a grant of a parent directory covers the child, at the granted access"
        );
        assert!(d.grants.network);
    }

    #[test]
    fn locked_mode_grants_third_party_only_what_is_named() {
        let (_t, data) = data_dir();
        let mut policy = Policy {
            mode: PolicyMode::Locked,
            ..Policy::default()
        };
        let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
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
        let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
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
    fn locked_mode_keeps_builtin_defaults_but_not_network_or_unnamed_env() {
        let (_t, data) = data_dir();
        let policy = Policy {
            mode: PolicyMode::Locked,
            sandbox: Some(SandboxMode::Off),
            ..Policy::default()
        };
        let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
        assert_eq!(d.grants.workspace, Access::ReadWrite);
        assert_eq!(d.grants.programs, vec!["sh", "git"]);
        assert!(!d.grants.network);
        assert!(
            d.grants.env.is_empty(),
            "LANG was not named: {:?}",
            d.grants.env
        );
        assert_eq!(
            policy.sandbox_mode(),
            SandboxMode::Locked,
            "locked mode pins locked confinement"
        );
        assert!(policy.warnings()[0].contains("sandbox = \"off\" is ignored"));
    }

    #[test]
    fn path_requests_are_compared_by_real_path() {
        let (_t, data) = data_dir();
        let secret = data.parent().unwrap().join("home-ssh");
        std::fs::create_dir_all(&secret).unwrap();
        std::os::unix::fs::symlink(&secret, data.join("link")).unwrap();
        let policy = grant_paths(&data, Access::ReadWrite);
        for sneaky in [
            data.join("../home-ssh"),
            data.join("link"),
            data.join("sub/../../home-ssh"),
        ] {
            let mut caps = Capabilities::default();
            caps.paths.push(PathAccess {
                path: sneaky.clone(),
                access: Access::Read,
            });
            let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
            assert!(
                d.grants.paths.is_empty(),
                "{} was mounted",
                sneaky.display()
            );
            assert!(d.denied[0].starts_with("paths: "), "{:?}", d.denied);
        }
        let mut caps = Capabilities::default();
        caps.paths.push(PathAccess {
            path: data.join("sub/."),
            access: Access::Read,
        });
        let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
        assert_eq!(
            d.grants.paths[0].path,
            data.join("sub"),
            "granted, as its real path"
        );
    }

    fn grant_paths(path: &Path, access: Access) -> Policy {
        let mut policy = Policy::default();
        policy.plugins.insert(
            "probe".into(),
            PluginGrant {
                paths: vec![PathAccess {
                    path: path.to_path_buf(),
                    access,
                }],
                ..PluginGrant::default()
            },
        );
        policy
    }

    #[test]
    fn network_false_takes_the_network_from_everyone() {
        let (_t, data) = data_dir();
        let policy = Policy {
            network: Some(false),
            ..Policy::default()
        };
        let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
        assert!(!d.grants.network);
        assert!(
            d.denied
                .iter()
                .any(|l| l == "network ([policy] network = false)")
        );
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
    fn limits_above_the_defaults_need_the_operator() {
        let mut m = manifest(Capabilities::default());
        m.limits.memory_mb = Some(100_000);
        m.limits.max_instances = Some(2);
        let d = Policy::default().decide(&m, PluginOrigin::ThirdParty);
        assert_eq!(d.grants.limits.memory_mb, limits::DEFAULT_MEMORY_MB);
        assert_eq!(d.grants.limits.timeout_ms, limits::DEFAULT_TIMEOUT_MS);
        assert_eq!(
            d.grants.limits.max_instances, 2,
            "less than the default is fine"
        );
        assert!(
            d.denied.iter().any(|l| l.starts_with("limits: memory_mb 2048 requested, 256 granted (grant it with [policy.plugins.probe] limits = { memory_mb = 2048 }")),
            "{:?}",
            d.denied
        );
        let d = Policy::default().decide(&m, PluginOrigin::Builtin);
        assert_eq!(
            d.grants.limits.memory_mb,
            limits::MAX_MEMORY_MB,
            "first-party: as asked, capped"
        );

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
                .decide(&m, PluginOrigin::ThirdParty)
                .grants
                .limits
                .memory_mb,
            limits::MAX_MEMORY_MB,
            "even the operator cannot pass the engine's ceiling"
        );
    }
}
