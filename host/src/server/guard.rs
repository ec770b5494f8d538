//! What every request must pass before a handler runs: a loopback `Host`
//! (defeats DNS rebinding), no foreign `Origin` (a web page the user opens
//! cannot drive the agent), and the bearer token (header, or `?token=` for
//! the event stream, which EventSource opens without headers). One route is
//! open without the token: the proof a client asks for before it sends it.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
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
    /// Largest request body read (whatever route or service reads it).
    pub max_body: usize,
}

/// Whether `origin` is this server's own loopback origin (`http://` and
/// the loopback `Host` the request was sent to): what a client sends that
/// names the server it talks to — no web page is served here, so no other
/// page can have it.
fn own_origin(origin: &str, headers: &axum::http::HeaderMap) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    loopback_host(host) && origin.strip_prefix("http://") == Some(host)
}

/// Whether `host` (a `Host` header value) names this machine's loopback:
/// `localhost`, `127.0.0.1` or `[::1]`, each with an optional port and
/// nothing else.
pub fn loopback_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, after)) => (name, after),
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, _)) => (name, &host[name.len()..]),
            None => (host, ""),
        }
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => {
            !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit())
        }
    };
    let bracketed = host.starts_with('[');
    let name_ok = if bracketed {
        name == "::1"
    } else {
        matches!(
            name.to_ascii_lowercase().as_str(),
            "localhost" | "127.0.0.1"
        )
    };
    port_ok && name_ok
}

/// Compare without leaking where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The token a request presents: the `Authorization` header, or, for the
/// event stream only (EventSource cannot set headers), `?token=`. A token
/// in the query of any other request is not taken: URLs end up in logs and
/// histories, and actions must not be triggerable by a link.
fn presented_token(request: &Request) -> Option<&str> {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if header.is_some() {
        return header;
    }
    let event_stream =
        request.method() == axum::http::Method::GET && request.uri().path() == EVENT_STREAM;
    if !event_stream {
        return None;
    }
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// The one route that takes `?token=`.
const EVENT_STREAM: &str = "/events";

/// The one route open without the token: a client asks the server to
/// prove it holds the token before sending it (see [`super::token::proof`]).
pub const PROOF_ROUTE: &str = "/bridge/proof";

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
        if !guard.cors.iter().any(|o| o == origin) && !own_origin(origin, headers) {
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
    if request.method() == axum::http::Method::GET && request.uri().path() == PROOF_ROUTE {
        return prove(&guard.token, &request);
    }
    let ok = presented_token(&request).is_some_and(|t| same(t, &guard.token));
    if !ok {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required (Authorization: Bearer TOKEN, or ?token= for the event stream); `sandcrab serve` printed where it is",
        );
    }
    let origin = headers.get(header::ORIGIN).cloned();
    let (parts, body) = request.into_parts();
    let body = axum::body::Body::new(http_body_util::Limited::new(body, guard.max_body));
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if let Some(origin) = origin {
        response
            .headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
    response
}

/// `{"proof": …}` for `?challenge=` on the address the client reached.
fn prove(token: &str, request: &Request) -> Response {
    let challenge = request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("challenge="))
        .filter(|c| c.len() == 64 && c.bytes().all(|b| b.is_ascii_hexdigit()));
    let reached = request
        .extensions()
        .get::<super::listen::Connection>()
        .map(|c| c.local);
    match (challenge, reached) {
        (Some(challenge), Some(reached)) => axum::Json(serde_json::json!({
            "proof": super::token::proof(token, challenge, &reached)
        }))
        .into_response(),
        _ => refuse(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "?challenge= must be 64 hex digits",
        ),
    }
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
            "[::1]evil.example",
            "[::1]:9990evil",
            "[::1]:",
            "localhost:",
            "localhost:99x",
            "[127.0.0.1]:9990",
            "[::2]:9990",
            "localhost:9990:1",
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
