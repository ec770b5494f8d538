//! The gate every `wasi:http/outgoing-handler` request of a plugin goes
//! through, in the store of one call: the origin and method against the
//! grant, the credential header (added by the host, refused from the
//! guest), the resolved addresses against private ranges, the size caps
//! and the clock, then the exchange, the response cleared of secrets, and
//! a line in the call's receipt.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::connect::{self, Connection, PoolKey, WireError};
use super::egress::HttpEgress;
use super::held::Held;
use super::origin::{RequestOrigin, Scheme};
use crate::clock::CallClock;
use crate::types::{ActivityLog, HttpExchange};

/// Most exchanges one call's receipt records.
const MAX_RECORDED: usize = 256;

/// The per-call gate (the store's `wasi:http` hooks).
pub struct HttpGate {
    egress: Arc<HttpEgress>,
    clock: Arc<CallClock>,
    log: Option<ActivityLog>,
    open: Arc<tokio::sync::Semaphore>,
    /// Response bodies held for the instance, not read yet.
    held: Held,
}

impl HttpGate {
    /// The gate of one call.
    pub fn new(egress: Arc<HttpEgress>, clock: Arc<CallClock>, log: Option<ActivityLog>) -> Self {
        let open = Arc::new(tokio::sync::Semaphore::new(
            egress.limits.concurrent as usize,
        ));
        HttpGate {
            egress,
            clock,
            log,
            open,
            held: Held::default(),
        }
    }

    /// Start the next call of a reused instance: its clock, its receipt.
    /// The count of open requests stays the instance's: a request the
    /// previous call left open still counts.
    pub fn begin_call(&mut self, clock: Arc<CallClock>, log: Option<ActivityLog>) {
        self.clock = clock;
        self.log = log;
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let egress = self.egress.clone();
        let clock = self.clock.clone();
        // Listed in the receipt now, before anything can go out: a request
        // the guest abandons, or one cut by the call's end, stays listed.
        let mut entry = Entry::open(self.log.clone(), HttpExchange::started(&request));
        let permit = self.open.clone().try_acquire_owned();
        let held = self.held.clone();
        Box::new(async move {
            let result = match (permit, check_method(request.method())) {
                (_, Err(why)) => Err(Refusal::Policy(why)),
                (Ok(_permit), Ok(())) => {
                    send(&egress, &clock, &held, options, request, &mut entry.record).await
                }
                (Err(_), Ok(())) => Err(Refusal::Policy(format!(
                    "plugin '{}' already has {} requests open (limits.http_concurrent); wait for one to finish",
                    egress.plugin, egress.limits.concurrent
                ))),
            };
            let result = result.map_err(|refusal| {
                let message = refusal.message();
                entry.record.refused = Some(message.clone());
                tracing::info!("plugin {}: HTTP request refused: {message}", egress.plugin);
                refusal.into_error()
            });
            if result.is_ok() {
                entry.record.refused = None;
            }
            entry.close();
            let response = result?;
            let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

/// Methods are tokens of at most this many bytes.
const MAX_METHOD: usize = 32;

fn check_method(method: &http::Method) -> Result<(), String> {
    match method.as_str() {
        "CONNECT" => Err("CONNECT (a tunnel past the host's checks) is never sent".into()),
        "TRACE" => Err("TRACE (the server echoes the request back) is never sent".into()),
        m if m.len() > MAX_METHOD => Err(format!("a method longer than {MAX_METHOD} bytes")),
        _ => Ok(()),
    }
}

/// A request's line in the call's receipt: written when the request is
/// made, rewritten when it ends, and marked abandoned if its future is
/// dropped before that.
struct Entry {
    log: Option<ActivityLog>,
    /// Its place in the log (None: over the cap, only counted).
    index: Option<usize>,
    record: HttpExchange,
    started: Instant,
    closed: bool,
}

impl Entry {
    fn open(log: Option<ActivityLog>, mut record: HttpExchange) -> Self {
        record.refused = Some("still open when the receipt was written".into());
        let index = log.as_ref().and_then(|log| {
            let mut activity = log.lock().ok()?;
            if activity.http.len() < MAX_RECORDED {
                activity.http.push(record.clone());
                Some(activity.http.len() - 1)
            } else {
                activity.http_unlisted += 1;
                None
            }
        });
        Entry {
            log,
            index,
            record,
            started: Instant::now(),
            closed: false,
        }
    }

    fn write(&mut self) {
        self.record.duration_ms = self.started.elapsed().as_millis() as u64;
        if let (Some(log), Some(index)) = (&self.log, self.index)
            && let Ok(mut activity) = log.lock()
            && let Some(slot) = activity.http.get_mut(index)
        {
            *slot = self.record.clone();
        }
    }

    fn close(&mut self) {
        self.closed = true;
        self.write();
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if !self.closed {
            self.record.refused = Some(
                "abandoned before it ended (the guest dropped it, or the call ended); it may have reached the server"
                    .into(),
            );
            self.write();
        }
    }
}

/// Why a request did not get its answer.
enum Refusal {
    /// The policy or a limit said no (the guest reads the message).
    Policy(String),
    /// The network failed.
    Wire(HttpError, String),
}

impl Refusal {
    fn message(&self) -> String {
        match self {
            Refusal::Policy(m) | Refusal::Wire(_, m) => m.clone(),
        }
    }

    fn into_error(self) -> HttpError {
        match self {
            Refusal::Policy(m) => HttpError::InternalError(Some(format!("sandcrab: {m}"))),
            Refusal::Wire(e, _) => e,
        }
    }
}

async fn send(
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
    let limits = egress.limits;
    // One deadline for the whole request, never past the call's end; a
    // step the guest gave a shorter timeout ends sooner.
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(limits.timeout_ms).min(clock.remaining());
    let until = |guest: Option<std::time::Duration>| {
        guest.map_or(deadline, |g| deadline.min(tokio::time::Instant::now() + g))
    };
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if !path.starts_with('/') {
        // Anything else would make the request line name another target.
        return Err(Refusal::Policy(
            "the request's path must start with '/'".into(),
        ));
    }

    // The credential: the host's to add, never the guest's to send.
    let credential = egress.credential_for(&origin);
    if let Some(credential) = credential {
        if parts.headers.contains_key(&credential.header) {
            return Err(Refusal::Policy(format!(
                "the request carries its own '{}' header, which sandcrab adds for {} ({}); remove it from the request",
                credential.header,
                credential.grant.origin,
                credential.grant.describe()
            )));
        }
        let value = credential.value().map_err(|e| Refusal::Policy(e.into()))?;
        parts
            .headers
            .insert(credential.header.clone(), value.clone());
        // The response is searched for the secret before the guest sees
        // it: nothing may ask for it compressed, re-encoded or in slices.
        for name in [
            http::header::RANGE,
            http::header::TE,
            http::header::ACCEPT_CHARSET,
            http::header::IF_RANGE,
        ] {
            parts.headers.remove(name);
        }
        parts.headers.insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        record.credential = Some(credential.grant.describe());
    }

    // The body, within its cap and the clock.
    let body_limit = limits.request_bytes;
    let collected = tokio::time::timeout_at(until(None), async {
        let mut bytes = Vec::new();
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Refusal::Wire(e, "the request body failed".into()))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() as u64 + data.len() as u64 > body_limit {
                    return Err(Refusal::Policy(format!(
                        "the request body is larger than {} KiB (limits.http_request_kb); {}",
                        body_limit >> 10,
                        raise_hint(egress, "http_request_kb")
                    )));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    })
    .await
    .map_err(|_| timed_out(egress, "sending the request body"))??;
    record.request_bytes = collected.len() as u64;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    if !collected.is_empty() || !matches!(parts.method, http::Method::GET | http::Method::HEAD) {
        parts.headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(collected.len()),
        );
    }

    // Where it goes: the addresses are checked, then connected to as
    // checked (a name is never resolved twice).
    let addrs: Vec<std::net::IpAddr> = match origin.address() {
        Some(addr) => vec![addr],
        None => {
            let lookup = tokio::net::lookup_host((origin.host.as_str(), origin.port));
            let found =
                tokio::time::timeout_at(until(options.and_then(|o| o.connect_timeout)), lookup)
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
            addrs
        }
    };
    let addrs = egress
        .reachable(rule, &origin, &addrs)
        .map_err(Refusal::Policy)?;
    let uri = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|e| Refusal::Policy(format!("invalid path: {e}")))?;
    let body = Bytes::from(collected);
    let build = || {
        let mut request = http::Request::new(Full::new(body.clone()));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = uri.clone();
        *request.headers_mut() = parts.headers.clone();
        request
    };
    let tls_host = (origin.scheme == Scheme::Https).then(|| origin.host.clone());
    let idempotent = matches!(
        parts.method,
        http::Method::GET
            | http::Method::HEAD
            | http::Method::PUT
            | http::Method::DELETE
            | http::Method::OPTIONS
    );
    let answer_within = options.and_then(|o| o.first_byte_timeout);
    let open = || async {
        tokio::time::timeout_at(until(options.and_then(|o| o.connect_timeout)), async {
            let (stream, addr) = connect::connect(&addrs, origin.port).await?;
            let key = PoolKey {
                addr,
                tls_host: tls_host.clone(),
            };
            Connection::open(stream, key, &egress.tls).await
        })
        .await
        .map_err(|_| timed_out(egress, "connecting"))?
        .map_err(|e| wire(e, egress, &origin))
    };

    // A kept connection to a checked address first; if the server closed
    // it meanwhile, a new one, for a request that may be sent again.
    let (mut conn, mut kept) = match egress.pool.take(&addrs, origin.port, tls_host.as_deref()) {
        Some(conn) => (conn, true),
        None => (open().await?, false),
    };
    let (mut head, mut body) = loop {
        record.address = Some(conn.key.addr.ip().to_string());
        let answer = tokio::time::timeout_at(
            until(answer_within),
            conn.exchange(build(), limits.response_bytes),
        )
        .await
        .map_err(|_| timed_out(egress, "waiting for the response"))?;
        match answer {
            Ok(done) => break done,
            Err(WireError::Http(e))
                if kept
                    && idempotent
                    && (e.is_canceled() || e.is_closed() || e.is_incomplete_message()) =>
            {
                conn = open().await?;
                kept = false;
            }
            Err(e) => return Err(wire(e, egress, &origin)),
        }
    };
    let closing = head
        .headers
        .get(http::header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    if !closing {
        egress.pool.give_back(conn);
    }
    record.status = Some(head.status.as_u16());
    record.response_bytes = body.len() as u64;

    if credential.is_some() {
        let coded = |name: http::header::HeaderName, plain: &[u8]| {
            head.headers.get_all(name).iter().any(|v| {
                v.as_bytes()
                    .split(|b| *b == b',')
                    .map(|t| t.trim_ascii())
                    .any(|t| {
                        !t.is_empty()
                            && !t.eq_ignore_ascii_case(plain)
                            && !t.eq_ignore_ascii_case(b"identity")
                    })
            })
        };
        let encoded = coded(http::header::CONTENT_ENCODING, b"identity")
            || coded(http::header::TRANSFER_ENCODING, b"chunked");
        if encoded {
            return Err(Refusal::Policy(format!(
                "{origin} answered with a compressed body although sandcrab asked for none; a compressed body cannot be checked for the credential, so it is withheld"
            )));
        }
    }
    // What the guest reads never holds a secret, even one a server echoes:
    // a credentialed answer keeps only headers whose names are known data,
    // every value and the body are searched, and then all of it together
    // (a secret split over two headers, or a header and the body).
    if credential.is_some() {
        head.headers = credentialed_headers(std::mem::take(&mut head.headers));
    }
    egress.redact(&mut body);
    for value in head.headers.values_mut() {
        let mut bytes = value.as_bytes().to_vec();
        if egress.redact(&mut bytes) {
            *value = http::HeaderValue::from_bytes(&bytes)
                .unwrap_or_else(|_| http::HeaderValue::from_static("[withheld]"));
        }
    }
    let mut together: Vec<u8> = Vec::new();
    for (name, value) in &head.headers {
        together.extend_from_slice(name.as_str().as_bytes());
        together.extend_from_slice(value.as_bytes());
    }
    together.extend_from_slice(&body);
    if egress.redact(&mut together) {
        return Err(Refusal::Policy(format!(
            "{origin} answered with the credential split over its headers and body; the answer is withheld"
        )));
    }
    // The body is whole now: its length is known, its framing the host's.
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

/// Response headers a credentialed answer keeps: names of data a client
/// needs (type, length, caching, paging, rate limits), none a server could
/// use to hand the credential back under a name of its choosing.
const CREDENTIALED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-language",
    "content-disposition",
    "content-range",
    "accept-ranges",
    "cache-control",
    "date",
    "etag",
    "expires",
    "last-modified",
    "vary",
    "age",
    "retry-after",
    "link",
    "location",
    "x-total-count",
];

/// `headers` cut to [`CREDENTIALED_HEADERS`] and the rate-limit family.
fn credentialed_headers(headers: http::HeaderMap) -> http::HeaderMap {
    let mut kept = http::HeaderMap::new();
    let mut name = None;
    for (next, value) in headers {
        if let Some(next) = next {
            name = Some(next);
        }
        let Some(name) = &name else { continue };
        let n = name.as_str();
        if CREDENTIALED_HEADERS.contains(&n)
            || n.starts_with("x-ratelimit-")
            || n.starts_with("ratelimit")
        {
            kept.append(name.clone(), value);
        }
    }
    kept
}

/// One request through the gate outside any plugin call (`sandbox
/// check`): the response, or the refusal's text.
pub async fn send_checked(
    egress: &HttpEgress,
    clock: &CallClock,
    request: http::Request<WasiBody>,
) -> Result<http::Response<WasiBody>, String> {
    let mut record = HttpExchange::started(&request);
    send(egress, clock, &Held::default(), None, request, &mut record)
        .await
        .map_err(|r| r.message())
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
