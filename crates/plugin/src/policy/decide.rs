//! The two-yes rule: a plugin gets a capability only when its manifest
//! asks for it **and** the policy grants it. Each capability is decided
//! by its own file, in the same shape: from what it sees of the plugin
//! ([`Asking`]) to what is granted and what was refused ([`Decided`]).

use super::grants::{GrantDecision, Grants};
use super::schema::{PluginGrant, PluginOrigin, Policy};
use crate::manifest::{Access, Capabilities, Manifest};

/// What one capability's decision sees of a plugin.
pub(super) struct Asking<'a> {
    pub policy: &'a Policy,
    pub manifest: &'a Manifest,
    pub origin: PluginOrigin,
    /// What it gets without being named in the policy.
    pub base: Capabilities,
    /// What the operator grants it by name.
    pub explicit: Option<&'a PluginGrant>,
}

impl Asking<'_> {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// What its manifest asks for.
    pub fn request(&self) -> &Capabilities {
        &self.manifest.capabilities
    }

    /// Whether the operator names `item` in the list `list` of its grant.
    pub fn named(&self, list: impl Fn(&PluginGrant) -> &Vec<String>, item: &str) -> bool {
        self.explicit
            .is_some_and(|g| list(g).iter().any(|i| i == item))
    }

    /// How to grant what was refused, for a refusal message.
    pub fn hint(&self, setting: &str) -> String {
        format!(
            " (grant it with [policy.plugins.{}] {setting} in {})",
            self.name(),
            crate::user_files::config_file_shown()
        )
    }
}

/// One capability's decision: what is granted, and what was asked for and
/// refused (one line each, saying how to grant it).
pub(super) struct Decided<T> {
    pub granted: T,
    pub denied: Vec<String>,
}

impl<T> Decided<T> {
    /// Granted as asked.
    pub fn all(granted: T) -> Self {
        Decided {
            granted,
            denied: Vec::new(),
        }
    }

    /// Its grant; its refusals join `denied`.
    fn into(self, denied: &mut Vec<String>) -> T {
        denied.extend(self.denied);
        self.granted
    }
}

impl Policy {
    /// Apply the two-yes rule to `manifest`.
    pub fn decide(&self, manifest: &Manifest, origin: PluginOrigin) -> GrantDecision {
        let asking = Asking {
            policy: self,
            manifest,
            origin,
            base: self.base_grant(&manifest.capabilities, origin),
            explicit: self.plugins.get(&manifest.name),
        };
        let mut denied = Vec::new();
        let workspace = super::paths::workspace(&asking).into(&mut denied);
        let paths = super::paths::paths(&asking).into(&mut denied);
        let programs = super::names::programs(&asking).into(&mut denied);
        let env = super::names::env(&asking).into(&mut denied);
        let network = super::network::decide(&asking).into(&mut denied);
        let (http, credentials) = super::web::decide(&asking).into(&mut denied);
        let limits = super::limits_decision::decide(&asking).into(&mut denied);
        let grants = Grants {
            workspace,
            paths,
            programs,
            env,
            network: network.always,
            network_on_request: network.on_request,
            http,
            credentials,
            limits,
        };
        let sources = super::sources::sources_of(&asking, &grants);
        GrantDecision {
            grants,
            denied,
            sources,
        }
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
