//! Signing in to a remote MCP server, as the MCP authorization
//! specification says (OAuth 2.1): the server's protected-resource and
//! authorization-server metadata discovered, the client identified by a
//! pre-registered id, a client ID metadata document or dynamic
//! registration, and an authorization code with PKCE obtained through the
//! operator's browser, which comes back to a one-shot listener on
//! loopback. The tokens go to the server's [`SignInStore`].

use std::time::Duration;

use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationRequest, AuthorizationSession, OAuthState,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::store::SignInStore;
use crate::config::OAuthSettings;

/// How long the browser has to come back.
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(300);

/// The name sandcrab registers itself under.
pub const CLIENT_NAME: &str = "sandcrab";

/// Why signing in failed.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("signing in to {url} failed: {message}")]
    OAuth { url: String, message: String },
    #[error("cannot listen on loopback for the browser's return: {0}")]
    Listen(std::io::Error),
    #[error(
        "the browser did not come back within {} s (open the URL printed above and sign in)",
        CALLBACK_TIMEOUT.as_secs()
    )]
    Timeout,
    #[error("the environment variable {0} named by client_secret_env is not set")]
    MissingSecret(String),
}

/// Sign in to the server at `url`, showing the authorization URL through
/// `show` (and opening it in the browser); the tokens end in `store`.
pub async fn sign_in(
    url: &str,
    settings: &OAuthSettings,
    store: SignInStore,
    show: impl Fn(&str),
) -> Result<(), SignInError> {
    let failed = |e: rmcp::transport::auth::AuthError| SignInError::OAuth {
        url: url.to_string(),
        message: e.to_string(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(SignInError::Listen)?;
    let port = listener.local_addr().map_err(SignInError::Listen)?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    crate::mcp::tls::install_provider();
    let mut manager = AuthorizationManager::new(url).await.map_err(failed)?;
    // What the server itself says it needs (where its metadata is, which
    // scopes) seeds discovery; without a challenge, the well-known places.
    let challenge = challenge(url).await;
    let metadata = super::discovery::metadata(&manager, url, challenge.as_deref())
        .await
        .map_err(failed)?;
    manager.set_metadata(metadata);
    let request = request(&redirect, settings, &store)?;
    manager.set_credential_store(store);
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| failed(e))?;
    let mut state = OAuthState::Session(session);
    let address = state.get_authorization_url().await.map_err(failed)?;
    let expected = browsable(&address).map_err(|message| SignInError::OAuth {
        url: url.to_string(),
        message,
    })?;
    show(&address);
    crate::process::open_in_browser(&address);
    let callback = tokio::time::timeout(CALLBACK_TIMEOUT, callback(&listener, port, &expected))
        .await
        .map_err(|_| SignInError::Timeout)?
        .map_err(SignInError::Listen)?;
    state.handle_callback_url(&callback).await.map_err(failed)
}

/// The `WWW-Authenticate` challenge the server at `url` answers an
/// unauthenticated `initialize` with (None: it answered something else,
/// or nothing).
async fn challenge(url: &str) -> Option<String> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE.as_str(),
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let answer = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .ok()?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    answer
        .headers()
        .get("www-authenticate")?
        .to_str()
        .ok()
        .map(str::to_string)
}

/// The `state` of authorization URL `address`, when it is one to give a
/// browser: https, or http to this machine (a server's metadata names it,
/// and a browser opens whatever scheme it is given).
fn browsable(address: &str) -> Result<String, String> {
    let parsed = reqwest::Url::parse(address)
        .map_err(|e| format!("the authorization URL is not a URL ({e})"))?;
    let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if !(parsed.scheme() == "https" || parsed.scheme() == "http" && loopback) {
        return Err(format!(
            "the authorization server's endpoint is {}: only https (or http on this machine) is opened",
            parsed.scheme()
        ));
    }
    parsed
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| "the authorization URL carries no state".into())
}

/// The authorization request `settings` describe, asking too for the
/// scopes a refused call needed since the last sign-in (step-up).
fn request(
    redirect: &str,
    settings: &OAuthSettings,
    store: &SignInStore,
) -> Result<AuthorizationRequest, SignInError> {
    let mut request = AuthorizationRequest::new(redirect)
        .with_client_name(CLIENT_NAME)
        .with_initial_scope_selection();
    let mut scopes = settings.scopes.clone();
    for scope in store.step_up_scopes() {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id);
        if let Some(var) = &settings.client_secret_env {
            let secret = std::env::var(var).map_err(|_| SignInError::MissingSecret(var.clone()))?;
            request = request.with_client_secret(secret);
        }
    }
    if let Some(document) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(document);
    }
    Ok(request)
}

/// Wait for the browser's `GET /callback?…` on `listener` and answer it;
/// the full callback URL. Anything else is answered 404 and waited past.
async fn callback(
    listener: &tokio::net::TcpListener,
    port: u16,
    state: &str,
) -> std::io::Result<String> {
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut head = vec![0u8; 8192];
        let mut read = 0;
        // A connection gets 10 s in all to send its request line.
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while read < head.len() && !head[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut head[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
        })
        .await;
        let text = String::from_utf8_lossy(&head[..read]);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .filter(|target| target.starts_with("/callback?"))
            // Only the browser coming back from this sign-in (its state).
            .filter(|target| {
                reqwest::Url::parse(&format!("http://127.0.0.1{target}"))
                    .is_ok_and(|u| u.query_pairs().any(|(k, v)| k == "state" && v == state))
            });
        let Some(target) = target else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let body = "Signed in: you can close this tab and go back to sandcrab.";
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        return Ok(format!("http://127.0.0.1:{port}{target}"));
    }
}
