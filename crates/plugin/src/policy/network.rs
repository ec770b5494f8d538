//! The network: always, when the manifest asks for it always and the
//! policy grants it; on request, for a call a rule or the operator gives it
//! to — unless the operator granted it by name (then always). Never in
//! locked mode or with `[policy] network = false`.

use super::decide::{Asking, Decided};
use super::schema::PluginOrigin;
use crate::manifest::NetworkUse;

/// How a plugin may have the network.
pub(super) struct NetworkGrant {
    /// Always.
    pub always: bool,
    /// For a call given it (see [`NetworkUse::OnRequest`]).
    pub on_request: bool,
}

pub(super) fn decide(asking: &Asking) -> Decided<NetworkGrant> {
    let policy = asking.policy;
    let reachable = !policy.locked() && policy.network != Some(false);
    let by_name = asking.explicit.is_some_and(|g| g.network);
    let asked = asking.request().network;
    let (always, on_request) = match asked {
        NetworkUse::No => (false, false),
        NetworkUse::Always => (
            (asking.base.network.wanted() || by_name) && reachable,
            false,
        ),
        NetworkUse::OnRequest => (by_name && reachable, !by_name && reachable),
    };
    let mut decided = Decided::all(NetworkGrant { always, on_request });
    // A first-party tool without the network in locked mode is the mode
    // working as documented, not something to warn about.
    let by_design = policy.locked() && asking.origin == PluginOrigin::Builtin;
    if asked.wanted() && !always && !on_request && !by_design {
        decided.denied.push(if policy.locked() {
            "network (locked mode allows no network)".to_string()
        } else if policy.network == Some(false) {
            "network ([policy] network = false)".to_string()
        } else {
            format!("network{}", asking.hint("network = true"))
        });
    }
    decided
}
