//! What the operator writes under `[policy]`: the mode, the sandbox, the
//! network switch, protected and kept paths, and the grants of each plugin
//! and MCP server by name — with the settings read straight off it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{DEFAULT_PROTECTED, SandboxMode};
use crate::http::{CredentialRule, HttpGrant, OriginPattern};
use crate::manifest::{Access, Limits, PathAccess};

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
    /// What every hook's program may touch (`[policy.hooks]`, the same
    /// shape as an MCP server's grant). Unset: read the workspace, no
    /// network, nothing else.
    #[serde(default)]
    pub hooks: HookGrant,
    /// Which file each `[policy.plugins.NAME]` / `[policy.mcp.NAME]` table
    /// came from, keyed `plugins.NAME` / `mcp.NAME` (set by the loader of
    /// the configuration; receipts name it).
    #[serde(skip)]
    pub sources: BTreeMap<String, String>,
}

/// What a hook's program may touch: the same shape as an MCP server's
/// grant, with the same default (read the workspace, no network).
pub type HookGrant = McpGrant;

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
    /// Whether hooks' programs get the network.
    pub fn hook_network(&self) -> bool {
        self.mcp_network(&self.hooks)
    }

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
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
