//! The gate every `wasi:http/outgoing-handler` request of a plugin goes
//! through, in the store of one call: the origin and method against the
//! grant, the credential header (added by the host, refused from the
//! guest), the resolved addresses against private ranges, the size caps
//! and the clock, then the exchange, the response cleared of secrets, and
//! a line in the call's receipt.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::egress::HttpEgress;
use super::held::Held;
use super::send::{Refusal, send};
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
