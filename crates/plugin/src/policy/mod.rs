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
//!
//! Laid out as: the schema (`schema.rs`: what the operator writes), what a
//! plugin ends up with (`grants.rs`), and the decision (`decide.rs`), one
//! small file per capability, each deciding what is granted of what was
//! asked and saying what was refused with how to grant it.

mod decide;
mod grants;
mod limits_decision;
mod names;
mod network;
mod paths;
mod schema;
mod sources;
#[cfg(test)]
mod tests;
mod web;

pub use crate::kept::DEFAULT_PROTECTED;
pub use crate::process::SandboxMode;
pub use grants::{EffectiveLimits, GrantDecision, GrantSource, Grants, is_secret_env};
pub use schema::{McpGrant, PluginGrant, PluginOrigin, Policy, PolicyMode, limits};
