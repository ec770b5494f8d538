//! HTTP: the origins a plugin's manifest asks for that the operator
//! grants, and the credentials the host adds for them. Only explicit
//! grants give HTTP (a first-party plugin's request is its own grant
//! outside locked mode); locked mode gives it only to pinned plugins;
//! `[policy] network = false` to none.

use std::collections::BTreeMap;

use super::decide::{Asking, Decided};
use super::schema::PluginOrigin;
use crate::http::{CredentialGrant, HttpGrant, HttpRule};

/// The origins `request` asks for that the operator grants, and the
/// credentials for them. Only explicit grants give HTTP (a first-party
/// plugin's request is its own grant outside locked mode); locked mode
/// gives it only to pinned plugins; `[policy] network = false` to none.
pub(super) fn decide(asking: &Asking) -> Decided<(Vec<HttpRule>, Vec<CredentialGrant>)> {
    let (policy, name, request, explicit, origin) = (
        asking.policy,
        asking.name(),
        asking.request(),
        asking.explicit,
        asking.origin,
    );
    let mut denied = Vec::new();
    let refused = |denied: Vec<String>| Decided {
        granted: (Vec::new(), Vec::new()),
        denied,
    };
    if request.http.is_empty() {
        return refused(denied);
    }
    let asked = || {
        request
            .http
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if policy.network == Some(false) {
        denied.push(format!("http: {} ([policy] network = false)", asked()));
        return refused(denied);
    }
    let pinned = explicit.is_some_and(|g| g.sha256.is_some());
    if policy.locked() && !pinned {
        denied.push(format!(
            "http: {} (locked mode grants HTTP only to pinned plugins: run `sandcrab plugins pin {name}`, then grant the origins)",
            asked()
        ));
        return refused(denied);
    }
    let mut granted: Vec<HttpGrant> = explicit.map(|g| g.http.clone()).unwrap_or_default();
    if origin == PluginOrigin::Builtin && !policy.locked() {
        granted.extend(request.http.iter().map(|o| HttpGrant {
            origin: o.clone(),
            methods: Vec::new(),
            private: false,
        }));
    }
    let rules = crate::http::grant::intersect(&request.http, &granted);
    for want in &request.http {
        if !rules
            .iter()
            .any(|r| want.covers(&r.origin) || r.origin.covers(want))
        {
            denied.push(format!(
                "http: {want}{}",
                asking.hint(&format!("http = [\"{want}\"]"))
            ));
        }
    }
    let empty = BTreeMap::new();
    let (credentials, unused) = crate::http::grant::usable_credentials(
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
    Decided {
        granted: (rules, credentials),
        denied,
    }
}
