//! One request through the gate, step by step: the target against the
//! grant, the credential (added by the host, refused from the guest), the
//! body within its cap, the addresses against private ranges, the
//! exchange (a kept connection first), the answer cleared of secrets, and
//! its body held against the plugin's memory.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::time::Instant as Deadline;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

use super::connect::{self, Connection, PoolKey, WireError};
use super::egress::{Credential, HttpEgress};
use super::held::Held;
use super::origin::{RequestOrigin, Scheme};
use crate::clock::CallClock;
use crate::types::HttpExchange;

/// Why a request did not get its answer.
pub(super) enum Refusal {
    /// The policy or a limit said no (the guest reads the message).
    Policy(String),
    /// The network failed.
    Wire(HttpError, String),
}

impl Refusal {
    pub(super) fn message(&self) -> String {
        match self {
            Refusal::Policy(m) | Refusal::Wire(_, m) => m.clone(),
        }
    }

    pub(super) fn into_error(self) -> HttpError {
        match self {
            Refusal::Policy(m) => HttpError::InternalError(Some(format!("sandcrab: {m}"))),
            Refusal::Wire(e, _) => e,
        }
    }
}

/// Send `request` for the plugin `egress` speaks for, within the call's
/// `clock`; its line in the receipt is `record`.
pub(super) async fn send(
    egress: &HttpEgress,
    clock: &CallClock,
    held: &Held,
    options: Option<RequestOptions>,
    request: http::Request<WasiBody>,
    record: &mut HttpExchange,
) -> Result<http::Response<WasiBody>, Refusal> {
    let origin = RequestOrigin::of(request.uri()).map_err(Refusal::Policy)?;
    record.origin = origin.to_string();
    let method = request.method().as_str().to_string();
    if !egress.any() {
        return Err(Refusal::Policy(format!(
            "plugin '{}' is granted no HTTP origin; to let it reach {origin}, its manifest asks for it ([capabilities] http = [\"{origin}\"]) and the operator grants it ([policy.plugins.{}] http = [\"{origin}\"] in {})",
            egress.plugin, egress.plugin, egress.config_file
        )));
    }
    let rule = egress.rule_for(&method, &origin).map_err(Refusal::Policy)?;
    // One deadline for the whole request, never past the call's end; a
    // step the guest gave a shorter timeout ends sooner.
    let clocks = Clocks {
        deadline: Deadline::now()
            + std::time::Duration::from_millis(egress.limits.timeout_ms).min(clock.remaining()),
        options,
    };
    let (mut parts, body) = request.into_parts();
    let path = target_path(&parts.uri)?;
    let credential = egress.credential_for(&origin);
    if let Some(credential) = credential {
        add_credential(credential, &mut parts.headers, record)?;
    }
    let body = collect_body(egress, body, clocks.until(None)).await?;
    record.request_bytes = body.len() as u64;
    frame_body(&mut parts, body.len());
    let addrs = resolve(egress, &origin, clocks.until(clocks.connect())).await?;
    let addrs = egress
        .reachable(rule, &origin, &addrs)
        .map_err(Refusal::Policy)?;
    let uri = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|e| Refusal::Policy(format!("invalid path: {e}")))?;
    let outgoing = Outgoing {
        parts: &parts,
        uri,
        body: Bytes::from(body),
    };
    let (mut head, mut body) =
        exchange(egress, &origin, &addrs, &outgoing, &clocks, record).await?;
    record.status = Some(head.status.as_u16());
    record.response_bytes = body.len() as u64;
    super::screen::screen(egress, &origin, credential.is_some(), &mut head, &mut body)
        .map_err(Refusal::Policy)?;
    hold(egress, held, head, body)
}

/// The request's deadlines: one for the whole request, and the shorter
/// ones the guest gave a step.
struct Clocks {
    deadline: Deadline,
    options: Option<RequestOptions>,
}

impl Clocks {
    /// When a step the guest gave `guest` for must end.
    fn until(&self, guest: Option<std::time::Duration>) -> Deadline {
        guest.map_or(self.deadline, |g| self.deadline.min(Deadline::now() + g))
    }

    fn connect(&self) -> Option<std::time::Duration> {
        self.options.and_then(|o| o.connect_timeout)
    }

    fn first_byte(&self) -> Option<std::time::Duration> {
        self.options.and_then(|o| o.first_byte_timeout)
    }
}

/// The request's path and query; anything but an absolute path would make
/// the request line name another target.
fn target_path(uri: &http::Uri) -> Result<String, Refusal> {
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if !path.starts_with('/') {
        return Err(Refusal::Policy(
            "the request's path must start with '/'".into(),
        ));
    }
    Ok(path)
}

/// The credential: the host's to add, never the guest's to send. The
/// answer is searched for the secret before the guest sees it, so nothing
/// may ask for it compressed, re-encoded or in slices.
fn add_credential(
    credential: &Credential,
    headers: &mut http::HeaderMap,
    record: &mut HttpExchange,
) -> Result<(), Refusal> {
    if headers.contains_key(&credential.header) {
        return Err(Refusal::Policy(format!(
            "the request carries its own '{}' header, which sandcrab adds for {} ({}); remove it from the request",
            credential.header,
            credential.grant.origin,
            credential.grant.describe()
        )));
    }
    let value = credential.value().map_err(|e| Refusal::Policy(e.into()))?;
    headers.insert(credential.header.clone(), value.clone());
    for name in [
        http::header::RANGE,
        http::header::TE,
        http::header::ACCEPT_CHARSET,
        http::header::IF_RANGE,
    ] {
        headers.remove(name);
    }
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    record.credential = Some(credential.grant.describe());
    Ok(())
}

/// The request body, within its cap and the clock.
async fn collect_body(
    egress: &HttpEgress,
    body: WasiBody,
    until: Deadline,
) -> Result<Vec<u8>, Refusal> {
    let limit = egress.limits.request_bytes;
    tokio::time::timeout_at(until, async {
        let mut bytes = Vec::new();
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Refusal::Wire(e, "the request body failed".into()))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() as u64 + data.len() as u64 > limit {
                    return Err(Refusal::Policy(format!(
                        "the request body is larger than {} KiB (limits.http_request_kb); {}",
                        limit >> 10,
                        raise_hint(egress, "http_request_kb")
                    )));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    })
    .await
    .map_err(|_| timed_out(egress, "sending the request body"))?
}

/// The body's framing is the host's: its length, when it has one or the
/// method carries one.
fn frame_body(parts: &mut http::request::Parts, length: usize) {
    parts.headers.remove(http::header::CONTENT_LENGTH);
    if length > 0 || !matches!(parts.method, http::Method::GET | http::Method::HEAD) {
        parts.headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(length),
        );
    }
}

/// Where `origin` is: its address, or what its name resolves to (once:
/// what is checked is what is connected to).
async fn resolve(
    egress: &HttpEgress,
    origin: &RequestOrigin,
    until: Deadline,
) -> Result<Vec<std::net::IpAddr>, Refusal> {
    if let Some(addr) = origin.address() {
        return Ok(vec![addr]);
    }
    let lookup = tokio::net::lookup_host((origin.host.as_str(), origin.port));
    let found = tokio::time::timeout_at(until, lookup)
        .await
        .map_err(|_| timed_out(egress, "resolving the host name"))?
        .map_err(|e| {
            Refusal::Wire(
                HttpError::DnsError {
                    rcode: Some(e.to_string()),
                    info_code: None,
                },
                format!("{} could not be resolved: {e}", origin.host),
            )
        })?;
    let mut addrs: Vec<_> = found.map(|a| a.ip()).collect();
    addrs.dedup();
    Ok(addrs)
}

/// The request as it goes out (built again for a retry).
struct Outgoing<'a> {
    parts: &'a http::request::Parts,
    uri: http::Uri,
    body: Bytes,
}

impl Outgoing<'_> {
    fn build(&self) -> http::Request<Full<Bytes>> {
        let mut request = http::Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.parts.headers.clone();
        request
    }

    /// Whether it may be sent again when a kept connection turns out
    /// closed.
    fn idempotent(&self) -> bool {
        matches!(
            self.parts.method,
            http::Method::GET
                | http::Method::HEAD
                | http::Method::PUT
                | http::Method::DELETE
                | http::Method::OPTIONS
        )
    }
}

/// The exchange with one of the checked `addrs`: a kept connection first;
/// if the server closed it meanwhile, a new one, for a request that may be
/// sent again. A connection the server does not close is kept.
async fn exchange(
    egress: &HttpEgress,
    origin: &RequestOrigin,
    addrs: &[std::net::IpAddr],
    outgoing: &Outgoing<'_>,
    clocks: &Clocks,
    record: &mut HttpExchange,
) -> Result<(http::response::Parts, Vec<u8>), Refusal> {
    let tls_host = (origin.scheme == Scheme::Https).then(|| origin.host.clone());
    let open = || async {
        tokio::time::timeout_at(clocks.until(clocks.connect()), async {
            let (stream, addr) = connect::connect(addrs, origin.port).await?;
            let key = PoolKey {
                addr,
                tls_host: tls_host.clone(),
            };
            Connection::open(stream, key, &egress.tls).await
        })
        .await
        .map_err(|_| timed_out(egress, "connecting"))?
        .map_err(|e| wire(e, egress, origin))
    };
    let (mut conn, mut kept) = match egress.pool.take(addrs, origin.port, tls_host.as_deref()) {
        Some(conn) => (conn, true),
        None => (open().await?, false),
    };
    let (head, body) = loop {
        record.address = Some(conn.key.addr.ip().to_string());
        let answer = tokio::time::timeout_at(
            clocks.until(clocks.first_byte()),
            conn.exchange(outgoing.build(), egress.limits.response_bytes),
        )
        .await
        .map_err(|_| timed_out(egress, "waiting for the response"))?;
        match answer {
            Ok(done) => break done,
            Err(WireError::Http(e))
                if kept
                    && outgoing.idempotent()
                    && (e.is_canceled() || e.is_closed() || e.is_incomplete_message()) =>
            {
                conn = open().await?;
                kept = false;
            }
            Err(e) => return Err(wire(e, egress, origin)),
        }
    };
    let closing = head
        .headers
        .get(http::header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    if !closing {
        egress.pool.give_back(conn);
    }
    Ok((head, body))
}

/// The answer as the guest gets it: its body whole (its length known, its
/// framing the host's), held against the plugin's memory until read.
fn hold(
    egress: &HttpEgress,
    held: &Held,
    mut head: http::response::Parts,
    body: Vec<u8>,
) -> Result<http::Response<WasiBody>, Refusal> {
    head.headers.remove(http::header::TRANSFER_ENCODING);
    head.headers.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(body.len()),
    );
    let budget = egress.limits.held_bytes;
    let body = held
        .take(body.len(), budget)
        .map_err(|holding| {
            Refusal::Policy(format!(
                "the plugin holds {} KiB of responses it has not read; this one ({} KiB) would pass its memory limit ({} MiB): read or drop the earlier responses",
                holding >> 10,
                body.len() >> 10,
                budget >> 20
            ))
        })?
        .with(body)
        .map_err(|never| match never {})
        .boxed_unsync();
    Ok(http::Response::from_parts(head, body))
}

/// A failure on the wire as the guest reads it: a response over its cap
/// is a limit (naming the setting), the rest the network's error codes.
fn wire(e: WireError, egress: &HttpEgress, origin: &RequestOrigin) -> Refusal {
    let message = e.to_string();
    let code = match e {
        WireError::TooLarge { limit } => {
            return Refusal::Policy(format!(
                "the response from {origin} is larger than {} KiB (limits.http_response_kb); {}",
                limit >> 10,
                raise_hint(egress, "http_response_kb")
            ));
        }
        WireError::Connect { source, .. } => HttpError::Connect(source),
        WireError::Tls { source, .. } => HttpError::Tls(source),
        WireError::ServerName(_) => HttpError::HttpRequestUriInvalid,
        WireError::Http(e) => HttpError::Hyper(e),
    };
    Refusal::Wire(code, message)
}

fn timed_out(egress: &HttpEgress, step: &str) -> Refusal {
    Refusal::Policy(format!(
        "no answer in time while {step} (the request's limit is {} ms, limits.http_timeout_ms, and never past the call's own time limit)",
        egress.limits.timeout_ms
    ))
}

fn raise_hint(egress: &HttpEgress, key: &str) -> String {
    format!(
        "raise it with [policy.plugins.{}] limits = {{ {key} = … }} in {}",
        egress.plugin, egress.config_file
    )
}
