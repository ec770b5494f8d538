//! Serving a router over HTTP/1.1 with the limits a listener open to local
//! processes needs: a client must send its request headers within
//! `header_read` of its first byte (no slowloris), and a connection on
//! which nothing moves for `idle` is closed (no half-open connections kept
//! forever). Each request carries the [`Connection`] it came on, so a
//! handler knows the local address the client reached.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::ServiceExt;

/// Time limits of one connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// From a request's first byte to the end of its headers.
    pub header_read: Duration,
    /// Longest time with no byte read or written (an event stream's
    /// heartbeats keep it alive).
    pub idle: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
        }
    }
}

/// The addresses of the connection a request came on.
#[derive(Debug, Clone, Copy)]
pub struct Connection {
    /// The address the client connected to (this bridge, as it reached it).
    pub local: SocketAddr,
    pub peer: SocketAddr,
}

/// Longest wait for open connections to finish after shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// Serve `router` on `listener` until `shutdown` resolves; then stop
/// accepting, let requests in flight finish (at most a few seconds) and
/// return.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // Out of descriptors and the like: wait, then go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let router = router.clone();
        let stop = stop.clone();
        tasks.spawn(connection(
            stream,
            Connection { local, peer },
            router,
            limits,
            stop,
        ));
    }
    stop.cancel();
    tasks.close();
    let _ = tokio::time::timeout(DRAIN, tasks.wait()).await;
    Ok(())
}

async fn connection(
    stream: TcpStream,
    info: Connection,
    router: axum::Router,
    limits: ConnectionLimits,
    stop: tokio_util::sync::CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
        started,
    });
    // A request being handled is not idleness (a tool call may take a
    // while before its answer's first byte).
    let handling = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let busy = handling.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(info);
        let router = router.clone();
        let busy = busy.clone();
        async move {
            busy.fetch_add(1, Ordering::SeqCst);
            let response = router.oneshot(request.map(axum::body::Body::new)).await;
            busy.fetch_sub(1, Ordering::SeqCst);
            response
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut check = tokio::time::interval(limits.idle.min(Duration::from_secs(1)));
    loop {
        tokio::select! {
            _ = &mut conn => return,
            _ = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
                return;
            }
            _ = check.tick() => {
                let last = Duration::from_millis(activity.load(Ordering::Relaxed));
                let idle = started.elapsed().saturating_sub(last);
                if idle >= limits.idle && handling.load(Ordering::SeqCst) == 0 {
                    return;
                }
            }
        }
    }
}

/// A stream that notes when a byte last moved (milliseconds since
/// `started`).
struct Watched {
    inner: TcpStream,
    activity: Arc<AtomicU64>,
    started: Instant,
}

impl Watched {
    fn moved(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.activity.store(now, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
