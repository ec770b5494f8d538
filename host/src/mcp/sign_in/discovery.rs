//! Finding a server's authorization server, as the MCP authorization
//! specification says: the protected-resource metadata (the challenge's
//! pointer, then the well-known places), then authorization-server
//! metadata, then the 2025-03-26 fallbacks at the server's own origin.
//!
//! One tolerance beyond the SDK's discovery: a 2025-03-26 server has no
//! protected-resource metadata, so its authorization server *is* its
//! origin; such a server's root metadata may name an issuer with a path
//! on that same origin. It is accepted when, and only when, both the
//! place asked and the issuer named are the MCP server's own origin: that
//! origin's owner writes its metadata either way, so naming itself with a
//! path claims nothing it could not claim without one. An issuer on any
//! other origin is still refused.

use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationManager, AuthorizationMetadata};

/// Largest metadata document read.
const MAX_METADATA_BYTES: usize = 64 * 1024;

/// The authorization-server metadata of the MCP server at `url`, the
/// server's `WWW-Authenticate` `challenge` (when it sent one) seeding it.
pub async fn metadata(
    manager: &AuthorizationManager,
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, AuthError> {
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => Ok(resolution.metadata),
        Err(AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        }) if legacy_issuer(url, &expected_issuer, &received_issuer) => {
            legacy_metadata(url, &received_issuer).await
        }
        Err(e) => Err(e),
    }
}

/// Whether a mismatch between the issuer `expected` (from the place the
/// metadata was found) and the one `received` is a 2025-03-26 server's:
/// the place is the root of the MCP server's origin and the issuer is on
/// that origin.
fn legacy_issuer(url: &str, expected: &str, received: &str) -> bool {
    let (Ok(server), Ok(expected), Ok(received)) = (
        reqwest::Url::parse(url),
        reqwest::Url::parse(expected),
        reqwest::Url::parse(received),
    ) else {
        return false;
    };
    let origin = server.origin();
    expected.origin() == origin
        && matches!(expected.path(), "" | "/")
        && received.origin() == origin
        && received.query().is_none()
        && received.fragment().is_none()
}

/// The root authorization-server metadata of the origin of `url`, whose
/// issuer must be `issuer` (the one the SDK saw there).
async fn legacy_metadata(url: &str, issuer: &str) -> Result<AuthorizationMetadata, AuthError> {
    let failed = |why: String| AuthError::MetadataError(format!("{url}: {why}"));
    let mut place = reqwest::Url::parse(url).map_err(|e| failed(e.to_string()))?;
    place.set_path("/.well-known/oauth-authorization-server");
    place.set_query(None);
    place.set_fragment(None);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let answer = client
        .get(place.clone())
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| failed(format!("{place}: {e}")))?;
    if !answer.status().is_success() {
        return Err(failed(format!("{place} answered {}", answer.status())));
    }
    let body = crate::llm::body::read_capped(answer, MAX_METADATA_BYTES)
        .await
        .map_err(|e| match e {
            crate::llm::body::BodyError::TooLarge { .. } => {
                failed(format!("{place} is larger than {MAX_METADATA_BYTES} bytes"))
            }
            crate::llm::body::BodyError::Transport(e) => failed(format!("{place}: {e}")),
        })?;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body)
        .map_err(|e| failed(format!("{place} is not authorization-server metadata: {e}")))?;
    if metadata.issuer.as_deref() != Some(issuer) {
        return Err(failed(format!(
            "{place} changed its issuer between two reads"
        )));
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::legacy_issuer;

    #[test]
    fn only_an_issuer_on_the_servers_own_origin_passes_for_a_legacy_server() {
        let url = "http://localhost:4000/mcp";
        let root = "http://localhost:4000/";
        assert!(legacy_issuer(url, root, "http://localhost:4000/oauth"));
        // Another origin, another port, another scheme: refused.
        assert!(!legacy_issuer(url, root, "http://evil.example/oauth"));
        assert!(!legacy_issuer(url, root, "http://localhost:4001/oauth"));
        assert!(!legacy_issuer(url, root, "https://localhost:4000/oauth"));
        // Metadata found anywhere but the origin's root is not legacy.
        assert!(!legacy_issuer(
            url,
            "http://localhost:4000/tenant",
            "http://localhost:4000/oauth"
        ));
        assert!(!legacy_issuer(
            url,
            "http://auth.example/",
            "http://auth.example/oauth"
        ));
    }
}
