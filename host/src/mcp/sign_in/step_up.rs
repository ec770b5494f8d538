//! Step-up: a server that answers a call `403 insufficient_scope` names
//! the scopes that call needs. They are kept beside the sign-in, the call
//! fails saying so, and the operator's next `sandcrab mcp login` asks for
//! them together with what was granted before. Nothing signs in again by
//! itself: a browser opens only when the operator asks, so a server that
//! keeps answering 403 cannot loop anyone through sign-ins.

use rmcp::transport::streamable_http_client::InsufficientScopeError;

use super::store::SignInStore;

/// The scopes a failed call needs, when the server refused it for want
/// of scope (Some("") when it did not say which).
pub fn needed_scopes(error: &rmcp::ServiceError) -> Option<String> {
    let rmcp::ServiceError::TransportSend(sent) = error else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(sent);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<InsufficientScopeError>() {
            return Some(refused.required_scope.clone().unwrap_or_default());
        }
        cause = e.source();
    }
    None
}

/// Keep the `needed` scopes for server `name`'s next sign-in and say
/// what the operator does about it.
pub fn ask_for_more(name: &str, store: Option<&SignInStore>, needed: &str) -> String {
    let kept = store.is_some_and(|store| store.want(needed).is_ok());
    // Only what was kept (well-formed scope tokens) is repeated.
    let wanted = store.map(SignInStore::wanted).unwrap_or_default();
    let named: Vec<&str> = needed
        .split_whitespace()
        .filter(|s| wanted.iter().any(|w| w == s))
        .collect();
    if kept && !named.is_empty() {
        return format!(
            "the server needs the scope \"{}\" for this call: the operator can grant it with `sandcrab mcp login {name}`, which asks for it",
            named.join(" ")
        );
    }
    format!(
        "the server needs more access than it was granted for this call: sign in again with `sandcrab mcp login {name}` (the scopes to ask for go in [mcp.servers.{name}.oauth] scopes)"
    )
}
