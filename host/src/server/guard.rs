//! What every request must pass before a handler runs: a loopback `Host`
//! (defeats DNS rebinding), no foreign `Origin` (a web page the user opens
//! cannot drive the agent), and the bearer token (header, or `?token=` for
//! EventSource, which cannot set headers).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use super::ApiError;

/// What the guard admits: the token, the web origins allowed, and whether
/// a non-loopback `Host` is accepted. Shared by the bridge and
/// `sandcrab mcp serve --http`.
#[derive(Debug, Clone)]
pub struct Guard {
    pub token: String,
    pub cors: Vec<String>,
    pub allow_remote: bool,
}

/// Whether `host` (a `Host` header value) names this machine's loopback.
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1"
    )
}

/// Compare without leaking where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn presented_token<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| {
            query?
                .split('&')
                .find_map(|pair| pair.strip_prefix("token="))
        })
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// The middleware.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !guard.allow_remote {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !loopback_host(host) {
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                "the Host header must name this machine's loopback (localhost or 127.0.0.1)",
            );
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !guard.cors.iter().any(|o| o == origin) {
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                "requests from web pages are refused unless their origin is allowed with `sandcrab serve --cors ORIGIN`",
            );
        }
    }
    if request.method() == axum::http::Method::OPTIONS && headers.contains_key(header::ORIGIN) {
        // A preflight from an allowed origin (it carries no token).
        let mut response = StatusCode::NO_CONTENT.into_response();
        let h = response.headers_mut();
        if let Some(origin) = headers.get(header::ORIGIN) {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        }
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            header::HeaderValue::from_static("authorization, content-type, last-event-id"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            header::HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        return response;
    }
    let ok = presented_token(headers, request.uri().query()).is_some_and(|t| same(t, &guard.token));
    if !ok {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required (Authorization: Bearer TOKEN, or ?token= for the event stream); `sandcrab serve` printed where it is",
        );
    }
    let origin = headers.get(header::ORIGIN).cloned();
    let mut response = next.run(request).await;
    if let Some(origin) = origin {
        response
            .headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_pass() {
        for ok in [
            "localhost",
            "localhost:9990",
            "127.0.0.1:9990",
            "[::1]:9990",
            "LOCALHOST",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:9990",
            "127.0.0.1.evil.example",
            "",
            "10.0.0.1:9990",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd") && !same("abc", "abcd"));
    }
}
