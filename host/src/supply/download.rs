//! Bounded HTTP for installs: every body has a bound, redirects are
//! followed only within the host that was asked (or to a host the
//! operator names in `plugin_redirect_hosts`, a registry's CDN, over
//! https and without credentials), and a blob is written to a `.partial`
//! file first, resumed from where it broke, and returned only once its
//! digest matches.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, LOCATION, RANGE};
use reqwest::{Method, StatusCode};

/// Most redirects followed (each within the same host).
const MAX_REDIRECTS: usize = 5;
/// Tries for one blob (a broken stream resumes where it stopped).
const BLOB_TRIES: usize = 3;

/// Why a download failed.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{url}: {reason}")]
    Transport { url: String, reason: String },
    #[error("{url}: the server answered {status}{detail}")]
    Status {
        url: String,
        status: StatusCode,
        detail: String,
    },
    #[error("{url}: the answer is bigger than its bound of {bound} bytes, so it was not kept")]
    TooBig { url: String, bound: u64 },
    #[error(
        "{from}: redirected to {to}, another host; sandcrab follows redirects only within the host it asked, so nothing was downloaded (a registry that serves downloads from a CDN: name that host in plugin_redirect_hosts)"
    )]
    OtherHost { from: String, to: String },
    #[error(
        "{url}: the content has digest sha256:{actual}, not the sha256:{expected} asked for (the server answered something else), so it was discarded"
    )]
    Digest {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The HTTP an install uses: a client that follows no redirect by
/// itself, and the hosts the operator lets a download be redirected to.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    redirect_hosts: std::sync::Arc<[String]>,
}

impl Http {
    /// `redirect_hosts`: `plugin_redirect_hosts` from the operator's file.
    pub fn new(redirect_hosts: &[String]) -> Http {
        Http {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(15))
                .read_timeout(Duration::from_secs(60))
                // A server that sends a byte a minute still ends.
                .timeout(Duration::from_secs(15 * 60))
                .user_agent(concat!("sandcrab/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("an HTTP client with static settings"),
            redirect_hosts: redirect_hosts.into(),
        }
    }

    /// Whether a redirect from `from` to `to` may be followed, and if so
    /// whether the credentials go along (only to the same host).
    fn may_follow(&self, from: &url::Url, to: &url::Url) -> Option<bool> {
        if same_host(from, to) {
            return Some(true);
        }
        let host = to.host_str().unwrap_or_default();
        let secure = to.scheme() == "https" || crate::llm::is_loopback(to.host());
        let named = self
            .redirect_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host));
        (secure && named).then_some(false)
    }
}

/// One request, its redirects followed within the same host (or to a
/// host the operator named, without credentials).
pub async fn send(
    http: &Http,
    method: Method,
    url: &url::Url,
    headers: &HeaderMap,
    body: Option<Vec<u8>>,
) -> Result<reqwest::Response, DownloadError> {
    let mut url = url.clone();
    let mut headers = headers.clone();
    for _ in 0..=MAX_REDIRECTS {
        let mut request = http
            .client
            .request(method.clone(), url.clone())
            .headers(headers.clone());
        if let Some(body) = &body {
            request = request.body(body.clone());
        }
        let response = request.send().await.map_err(|e| transport(&url, e))?;
        if !response.status().is_redirection() {
            return Ok(response);
        }
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| url.join(l).ok())
            .ok_or_else(|| DownloadError::Transport {
                url: url.to_string(),
                reason: format!("a {} redirect without a usable Location", response.status()),
            })?;
        match http.may_follow(&url, &location) {
            Some(true) => {}
            Some(false) => {
                headers.remove(AUTHORIZATION);
            }
            None => {
                return Err(DownloadError::OtherHost {
                    from: url.to_string(),
                    to: location.to_string(),
                });
            }
        }
        url = location;
    }
    Err(DownloadError::Transport {
        url: url.to_string(),
        reason: format!("more than {MAX_REDIRECTS} redirects"),
    })
}

/// Whether `to` is on the host (scheme, name and port) of `from`.
pub fn same_host(from: &url::Url, to: &url::Url) -> bool {
    from.scheme() == to.scheme()
        && from.host_str() == to.host_str()
        && from.port_or_known_default() == to.port_or_known_default()
}

/// The body of `response`, at most `bound` bytes.
pub async fn body(response: reqwest::Response, bound: u64) -> Result<Vec<u8>, DownloadError> {
    let url = response.url().clone();
    let limit = usize::try_from(bound).unwrap_or(usize::MAX);
    crate::llm::body::read_capped(response, limit)
        .await
        .map_err(|e| match e {
            crate::llm::body::BodyError::TooLarge { .. } => DownloadError::TooBig {
                url: url.to_string(),
                bound,
            },
            crate::llm::body::BodyError::Transport(e) => transport(&url, e),
        })
}

/// A failure status as an error (with the start of the server's words).
pub async fn status_error(response: reqwest::Response) -> DownloadError {
    let url = response.url().to_string();
    let status = response.status();
    let text = body(response, 2048).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text: String = text
        .trim()
        .chars()
        .filter(|c| !crate::terminal_safe::needs_escape(*c))
        .collect();
    DownloadError::Status {
        url,
        status,
        detail: if text.is_empty() {
            String::new()
        } else {
            format!(": {}", text.chars().take(300).collect::<String>())
        },
    }
}

/// Download the blob at `url` whose SHA-256 is `hex` and size at most
/// `bound`, through `partial` (resumed if a previous try left it there).
/// The bytes are returned only when their digest is `hex`; `partial` is
/// gone afterwards either way, except after a broken stream.
pub async fn blob(
    http: &Http,
    url: &url::Url,
    headers: &HeaderMap,
    hex: &str,
    bound: u64,
    partial: &Path,
) -> Result<Vec<u8>, DownloadError> {
    let io = |source| DownloadError::Io {
        path: partial.to_path_buf(),
        source,
    };
    // Only a partial download of our own is resumed: anything else there
    // (a link planted to make the download write elsewhere) goes first.
    if std::fs::symlink_metadata(partial).is_ok_and(|m| !m.file_type().is_file()) {
        std::fs::remove_file(partial).map_err(io)?;
    }
    let mut last = None;
    for _ in 0..BLOB_TRIES {
        let have = std::fs::symlink_metadata(partial)
            .map(|m| m.len())
            .unwrap_or(0);
        let mut headers = headers.clone();
        if have > 0 {
            headers.insert(
                RANGE,
                HeaderValue::from_str(&format!("bytes={have}-")).expect("ASCII"),
            );
        }
        let mut response = send(http, Method::GET, url, &headers, None).await?;
        let append = match response.status() {
            StatusCode::PARTIAL_CONTENT if have > 0 => true,
            s if s.is_success() => false,
            _ => {
                let _ = std::fs::remove_file(partial);
                return Err(status_error(response).await);
            }
        };
        let mut file = super::files::open_partial(partial, append).map_err(io)?;
        let mut written = if append { have } else { 0 };
        let broke = loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    written += chunk.len() as u64;
                    if written > bound {
                        drop(file);
                        let _ = std::fs::remove_file(partial);
                        return Err(DownloadError::TooBig {
                            url: url.to_string(),
                            bound,
                        });
                    }
                    file.write_all(&chunk).map_err(io)?;
                }
                Ok(None) => break None,
                Err(e) => break Some(transport(url, e)),
            }
        };
        file.sync_all().map_err(io)?;
        drop(file);
        if let Some(err) = broke {
            last = Some(err);
            continue;
        }
        let bytes = std::fs::read(partial).map_err(io)?;
        let _ = std::fs::remove_file(partial);
        let actual = crate::plugin::integrity::sha256_hex(&bytes);
        if actual != hex {
            return Err(DownloadError::Digest {
                url: url.to_string(),
                expected: hex.to_string(),
                actual,
            });
        }
        return Ok(bytes);
    }
    Err(last.expect("a failed try left its error"))
}

fn transport(url: &url::Url, e: reqwest::Error) -> DownloadError {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        reason.push_str(&format!(": {s}"));
        source = s.source();
    }
    DownloadError::Transport {
        url: url.to_string(),
        reason,
    }
}
