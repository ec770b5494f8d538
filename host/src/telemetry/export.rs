//! The exporter: a thread of its own that batches ended spans from a
//! bounded queue and posts them, with the metrics so far, to the
//! collector as OTLP/HTTP protobuf. A full queue drops the span and
//! counts it: the session never waits for the collector. Every byte sent
//! is first searched for the secrets the host knows, each replaced by as
//! many `*` (the protobuf lengths stay true).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use super::metrics::Metrics;
use super::proto::Value;
use super::settings::Endpoints;
use super::trace::Finished;

/// Spans waiting at most; beyond, spans are dropped and counted.
pub const QUEUE: usize = 2048;
/// Spans sent in one request at most.
const BATCH: usize = 512;
/// How long spans wait for more before they are sent.
const LINGER: Duration = Duration::from_millis(500);
/// How long one request to the collector may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

enum Work {
    Span(Finished),
    Flush(std::sync::mpsc::Sender<()>),
}

/// The process's exporter.
pub struct Exporter {
    queue: SyncSender<Work>,
    dropped: AtomicU64,
    /// Spans taken and not sent yet.
    queued: std::sync::Arc<AtomicU64>,
    pub(super) metrics: Metrics,
}

impl Exporter {
    /// Start the exporter thread posting to `endpoints`.
    pub fn start(
        endpoints: Endpoints,
        resource: Vec<(String, Value)>,
    ) -> std::io::Result<Exporter> {
        let (queue, inbox) = sync_channel(QUEUE);
        let queued = std::sync::Arc::new(AtomicU64::new(0));
        let sender = Sender {
            queued: queued.clone(),
            endpoints,
            resource,
            secrets: Vec::new(),
            secrets_read: None,
        };
        std::thread::Builder::new()
            .name("sandcrab-otlp".into())
            .spawn(move || sender.run(inbox))?;
        Ok(Exporter {
            queue,
            dropped: AtomicU64::new(0),
            queued,
            metrics: Metrics::new(),
        })
    }

    fn take(&self, span: Finished) {
        // Counted before it is queued: the sender may send it at once.
        self.queued.fetch_add(1, Ordering::Relaxed);
        match self.queue.try_send(Work::Span(span)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.metrics.record(
                    super::names::METRIC_DROPPED,
                    super::metrics::Kind::Counter,
                    &[],
                    1.0,
                );
            }
        }
    }

    /// Send what is queued and wait at most `limit` for it; the spans
    /// dropped so far (those still queued when the time is up included).
    pub fn flush(&self, limit: Duration) -> u64 {
        let deadline = std::time::Instant::now() + limit;
        let (done, wait) = std::sync::mpsc::channel();
        let mut flush = Work::Flush(done);
        // A full queue takes the request as soon as it has room.
        loop {
            match self.queue.try_send(flush) {
                Ok(()) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if wait.recv_timeout(left).is_err() {
                        self.dropped.fetch_add(self.waiting(), Ordering::Relaxed);
                    }
                    break;
                }
                Err(TrySendError::Full(back)) if std::time::Instant::now() < deadline => {
                    flush = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => {
                    self.dropped.fetch_add(self.waiting(), Ordering::Relaxed);
                    break;
                }
            }
        }
        self.dropped.load(Ordering::Relaxed)
    }

    /// Spans queued and not sent yet.
    fn waiting(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

/// A span that ended goes to the exporter, if there is one.
pub(super) fn span_ended(span: Finished) {
    if let Some(exporter) = super::exporter() {
        exporter.take(span);
    }
}

struct Sender {
    queued: std::sync::Arc<AtomicU64>,
    endpoints: Endpoints,
    resource: Vec<(String, Value)>,
    secrets: Vec<Vec<u8>>,
    /// When `secrets` was gathered: first when the first export goes out
    /// (the host's registry is complete by then), again every minute (a
    /// sign-in's token may be new).
    secrets_read: Option<std::time::Instant>,
}

/// How long the gathered secrets are used before they are gathered again.
const SECRETS_FOR: Duration = Duration::from_secs(60);

impl Sender {
    fn run(mut self, inbox: Receiver<Work>) {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        let client = match reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(1))
            .timeout(REQUEST_TIMEOUT)
            .build()
        {
            Ok(client) => client,
            Err(_) => return,
        };
        let mut batch: Vec<Finished> = Vec::new();
        // Flushes asked for, answered once what came before them is sent.
        let mut flushes = Vec::new();
        loop {
            let closed = match inbox.recv_timeout(LINGER) {
                Ok(Work::Span(span)) => {
                    batch.push(span);
                    if batch.len() < BATCH {
                        continue;
                    }
                    false
                }
                Ok(Work::Flush(done)) => {
                    flushes.push(done);
                    false
                }
                Err(RecvTimeoutError::Timeout) if batch.is_empty() && flushes.is_empty() => {
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            // Whatever else is waiting goes in the same request.
            while batch.len() < BATCH {
                match inbox.try_recv() {
                    Ok(Work::Span(span)) => batch.push(span),
                    Ok(Work::Flush(done)) => flushes.push(done),
                    Err(_) => break,
                }
            }
            let sent = batch.len() as u64;
            if self
                .secrets_read
                .is_none_or(|at| at.elapsed() > SECRETS_FOR)
            {
                self.secrets = super::secrets::known();
                self.secrets_read = Some(std::time::Instant::now());
            }
            runtime.block_on(self.send(&client, std::mem::take(&mut batch)));
            self.queued.fetch_sub(sent, Ordering::Relaxed);
            // A flush is answered when nothing taken before it waits.
            if self.queued.load(Ordering::Relaxed) == 0 || closed {
                for done in flushes.drain(..) {
                    let _ = done.send(());
                }
            }
            if closed {
                return;
            }
        }
    }

    async fn send(&self, client: &reqwest::Client, spans: Vec<Finished>) {
        if !spans.is_empty() {
            let body = super::trace::encode(&self.resource, &spans);
            self.post(client, &self.endpoints.traces, body).await;
        }
        if let Some(metrics) = &self.endpoints.metrics
            && let Some(exporter) = super::exporter()
            && let Some(body) = exporter.metrics.encode(&self.resource)
        {
            self.post(client, metrics, body).await;
        }
    }

    async fn post(&self, client: &reqwest::Client, url: &str, mut body: Vec<u8>) {
        withhold(&mut body, &self.secrets);
        let mut request = client
            .post(url)
            .header("content-type", "application/x-protobuf");
        for (name, value) in &self.endpoints.headers {
            request = request.header(name, value);
        }
        match request.body(body).send().await {
            Ok(answer) if answer.status().is_success() => {}
            Ok(answer) => {
                tracing::debug!("the OTLP collector at {url} answered {}", answer.status())
            }
            Err(e) => tracing::debug!("the OTLP collector at {url} is unreachable: {e}"),
        }
    }
}

/// Replace every occurrence of each secret in `body` by as many `*`.
pub(super) fn withhold(body: &mut [u8], secrets: &[Vec<u8>]) {
    for secret in secrets {
        let finder = memchr::memmem::Finder::new(secret);
        let hits: Vec<usize> = finder.find_iter(body).collect();
        for at in hits {
            body[at..at + secret.len()].fill(b'*');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_withheld_and_the_encoding_keeps_its_lengths() {
        let mut body = b"\x0a\x10key=sk-live-12345".to_vec();
        withhold(&mut body, &[b"sk-live-12345".to_vec()]);
        assert_eq!(&body, b"\x0a\x10key=*************");
    }
}
