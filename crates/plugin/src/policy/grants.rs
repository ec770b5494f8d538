//! What a plugin ends up with after the two-yes rule, and where each
//! grant came from.

use serde::{Deserialize, Serialize};

use crate::http::{CredentialGrant, HttpRule};
use crate::manifest::{Access, PathAccess};

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
