//! Blocking HTTP for tools, over `wasi:http/outgoing-handler`.
//!
//! The host decides where a request may go: the origin must be asked for
//! in the plugin's manifest (`[capabilities] http = ["https://api.github.com"]`)
//! and granted by the operator. Credentials are the host's business: it
//! adds the operator's header (an API token, say) on the way out, and the
//! plugin never sees its value. A refused request comes back as
//! [`HttpError::Refused`] with the host's reason, which names the grant
//! that is missing.
//!
//! ```ignore
//! use sandcrab_sdk::http;
//! let issues: serde_json::Value = http::get("https://api.github.com/repos/o/r/issues")?.json()?;
//! let created = http::Request::post("https://tracker.example.com/issues")
//!     .header("content-type", "application/json")
//!     .body(br#"{"title":"x"}"#.to_vec())
//!     .send()?;
//! ```

use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasi::io::streams::StreamError;

/// Redirects a request follows at most (each one checked by the host).
pub const MAX_REDIRECTS: usize = 5;

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The URL is not `http(s)://host[:port]/path`.
    InvalidUrl(String),
    /// The host refused the request (its reason names what to grant).
    Refused(String),
    /// The network or the server failed.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::InvalidUrl(m) => write!(f, "invalid URL: {m}"),
            HttpError::Refused(m) => write!(f, "request refused: {m}"),
            HttpError::Failed(m) => write!(f, "request failed: {m}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for crate::ToolError {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::Refused(m) => crate::ToolError::Denied(m),
            other => crate::ToolError::Failed(other.to_string()),
        }
    }
}

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names in lower case, values as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| HttpError::Failed(format!("the response is not the JSON expected: {e}")))
    }

    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A request to build up, then [`send`](Request::send).
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    follow_redirects: bool,
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::get(url).send()
}

impl Request {
    /// A request with `method` (GET, POST, …).
    pub fn new(method: &str, url: &str) -> Self {
        Request {
            method: method.to_ascii_uppercase(),
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            follow_redirects: true,
        }
    }

    pub fn get(url: &str) -> Self {
        Request::new("GET", url)
    }

    pub fn post(url: &str) -> Self {
        Request::new("POST", url)
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// Set the body.
    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    /// A JSON body (and its content type).
    pub fn json(self, value: &impl serde::Serialize) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json").body(body)
    }

    /// Return 3xx answers as they are instead of following them.
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Send it and read the response whole. GET and HEAD follow up to
    /// [`MAX_REDIRECTS`] redirects; the host checks every hop against the
    /// plugin's grants.
    pub fn send(self) -> Result<Response, HttpError> {
        let mut url = self.url.clone();
        let follows = self.follow_redirects && matches!(self.method.as_str(), "GET" | "HEAD");
        for _ in 0..=MAX_REDIRECTS {
            let response = send_once(&self.method, &url, &self.headers, &self.body)?;
            let location = response.header("location");
            match location {
                Some(next) if follows && matches!(response.status, 301 | 302 | 303 | 307 | 308) => {
                    url = resolve(&url, &next)?;
                }
                _ => return Ok(response),
            }
        }
        Err(HttpError::Failed(format!(
            "more than {MAX_REDIRECTS} redirects from {}",
            self.url
        )))
    }
}

/// The parts of an absolute URL.
struct Parts<'a> {
    scheme: Scheme,
    authority: &'a str,
    path: &'a str,
}

fn split(url: &str) -> Result<Parts<'_>, HttpError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| HttpError::InvalidUrl(format!("'{url}' has no scheme")))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => {
            return Err(HttpError::InvalidUrl(format!(
                "scheme '{other}' in '{url}'"
            )));
        }
    };
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    if authority.is_empty() {
        return Err(HttpError::InvalidUrl(format!("'{url}' has no host")));
    }
    Ok(Parts {
        scheme,
        authority,
        path: if path.is_empty() { "/" } else { path },
    })
}

/// `location` relative to `base`.
fn resolve(base: &str, location: &str) -> Result<String, HttpError> {
    if location.contains("://") {
        return Ok(location.to_string());
    }
    let parts = split(base)?;
    let scheme = match parts.scheme {
        Scheme::Http => "http",
        _ => "https",
    };
    if let Some(rest) = location.strip_prefix("//") {
        return Ok(format!("{scheme}://{rest}"));
    }
    if location.starts_with('/') {
        return Ok(format!("{scheme}://{}{location}", parts.authority));
    }
    let dir = parts.path.rsplit_once('/').map_or("", |(d, _)| d);
    Ok(format!("{scheme}://{}{dir}/{location}", parts.authority))
}

fn method_of(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_string()),
    }
}

fn error_text(code: &ErrorCode) -> HttpError {
    match code {
        ErrorCode::InternalError(Some(message)) if message.starts_with("sandcrab: ") => {
            HttpError::Refused(message.trim_start_matches("sandcrab: ").to_string())
        }
        other => HttpError::Failed(format!("{other:?}")),
    }
}

fn send_once(
    method: &str,
    url: &str,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Result<Response, HttpError> {
    let parts = split(url)?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value)
            .map_err(|e| HttpError::InvalidUrl(format!("header '{name}': {e:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    let bad = |what: &str| HttpError::InvalidUrl(format!("{what} of '{url}'"));
    request
        .set_method(&method_of(method))
        .map_err(|_| bad("the method"))?;
    request
        .set_scheme(Some(&parts.scheme))
        .map_err(|_| bad("the scheme"))?;
    request
        .set_authority(Some(parts.authority))
        .map_err(|_| bad("the host"))?;
    request
        .set_path_with_query(Some(parts.path))
        .map_err(|_| bad("the path"))?;
    let outgoing = request.body().map_err(|_| bad("the body"))?;

    // Hand the request over first, then stream the body: the host reads it
    // while it is written.
    let pending = outgoing_handler::handle(request, None).map_err(|e| error_text(&e))?;
    {
        let stream = outgoing.write().map_err(|_| bad("the body stream"))?;
        for chunk in body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| HttpError::Failed(format!("sending the body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| error_text(&e))?;

    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(error_text(&code)),
        _ => return Err(HttpError::Failed("the host gave no response".into())),
    };
    let status = response.status();
    let headers = response.headers().entries().into_iter().collect::<Vec<_>>();
    let incoming = response
        .consume()
        .map_err(|_| HttpError::Failed("the response body was taken".into()))?;
    let body = read_all(&incoming)?;
    // Children before their parent: the body, then the response.
    let _ = IncomingBody::finish(incoming);
    drop(response);
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn read_all(incoming: &IncomingBody) -> Result<Vec<u8>, HttpError> {
    let stream = incoming
        .stream()
        .map_err(|_| HttpError::Failed("the response body stream was taken".into()))?;
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(HttpError::Failed(format!(
                    "reading the response: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets_resolve_against_the_request() {
        let base = "https://api.example.com/v1/issues?x=1";
        assert_eq!(
            resolve(base, "/v2/a").unwrap(),
            "https://api.example.com/v2/a"
        );
        assert_eq!(resolve(base, "b").unwrap(), "https://api.example.com/v1/b");
        assert_eq!(
            resolve(base, "//cdn.example.com/z").unwrap(),
            "https://cdn.example.com/z"
        );
        assert_eq!(resolve(base, "http://x.org/").unwrap(), "http://x.org/");
    }
}
