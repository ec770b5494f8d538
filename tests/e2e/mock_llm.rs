//! A real HTTP server on 127.0.0.1 that replays scripted provider replies
//! (JSON bodies or SSE streams, split and timed as asked) and records every
//! request it receives.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<Bytes>,
    pub chunk_delay: Duration,
    /// Break the connection after the chunks instead of ending cleanly.
    pub abort: bool,
}

impl Reply {
    /// A JSON body with `status`.
    pub fn json(status: u16, body: Value) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![Bytes::from(body.to_string())],
            chunk_delay: Duration::ZERO,
            abort: false,
        }
    }

    /// An SSE body from raw text (events already framed).
    pub fn sse(text: impl Into<String>) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: vec![Bytes::from(text.into())],
            chunk_delay: Duration::ZERO,
            abort: false,
        }
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Send the body one byte per chunk.
    pub fn bytewise(mut self) -> Self {
        let all: Vec<u8> = self.chunks.iter().flat_map(|c| c.to_vec()).collect();
        self.chunks = all.into_iter().map(|b| Bytes::from(vec![b])).collect();
        self
    }

    /// Send the body one SSE event per chunk.
    pub fn eventwise(mut self) -> Self {
        let all: Vec<u8> = self.chunks.iter().flat_map(|c| c.to_vec()).collect();
        let text = String::from_utf8(all).expect("an SSE body is text");
        self.chunks = text
            .split_inclusive("\n\n")
            .map(|event| Bytes::from(event.to_string()))
            .collect();
        self
    }

    /// Wait between chunks.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Keep only the first `n` bytes of the body and end there.
    pub fn truncated(mut self, n: usize) -> Self {
        let all: Vec<u8> = self.chunks.iter().flat_map(|c| c.to_vec()).collect();
        self.chunks = vec![Bytes::from(all[..n.min(all.len())].to_vec())];
        self
    }

    /// Break the connection after sending the chunks.
    pub fn aborted(mut self) -> Self {
        self.abort = true;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Value,
    pub at: std::time::Instant,
}

#[derive(Default)]
struct Inner {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    /// Strict mode: validate requests as this provider's real API does.
    rules: Option<sandcrab::llm::ProviderKind>,
    issued: crate::provider_rules::Issued,
    /// Why requests were rejected in strict mode.
    rejections: Vec<String>,
    /// Replies for requests whose last message contains a needle (served
    /// before the general queue).
    routed: Vec<(String, VecDeque<Reply>)>,
    /// Answers to the questions a client asks a local server about itself
    /// (`/v1/models`, `/props`, `/api/show`), by path; unset ones are 404.
    info: std::collections::HashMap<String, Value>,
    /// The paths of those questions, as they were asked.
    info_asked: Vec<String>,
    /// A model window: requests counted larger are refused (see
    /// [`MockLlm::window`]).
    window: Option<(sandcrab::llm::ProviderKind, u64)>,
    /// Sizes of the requests the window let through, and of those it
    /// refused, as counted.
    accepted: Vec<u64>,
    refused: Vec<u64>,
    /// Answers a request when nothing is queued for it.
    fallback: Option<Fallback>,
}

/// Builds a reply for a request's path and body.
pub type Fallback = Box<dyn Fn(&str, &Value) -> Reply + Send>;

/// Paths where a server describes itself (not model calls).
const INFO_PATHS: &[&str] = &["/v1/models", "/props", "/api/show"];

/// The server; it stops when dropped.
pub struct MockLlm {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    _task: tokio::task::JoinHandle<()>,
}

impl MockLlm {
    /// Start on a free loopback port.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        MockLlm {
            addr,
            inner,
            _task: task,
        }
    }

    /// Start in strict mode: every request is checked the way `kind`'s real
    /// API checks it (see `provider_rules`) and rejected with its 400.
    pub async fn strict(kind: sandcrab::llm::ProviderKind) -> Self {
        let server = Self::start().await;
        server.inner.lock().unwrap().rules = Some(kind);
        server
    }

    /// Queue a reply for the requests whose last message contains `needle`
    /// (several conversations on one server, each served its own replies).
    pub fn push_for(&self, needle: &str, reply: Reply) {
        let mut inner = self.inner.lock().unwrap();
        match inner.routed.iter_mut().find(|(n, _)| n == needle) {
            Some((_, queue)) => queue.push_back(reply),
            None => inner
                .routed
                .push((needle.to_string(), VecDeque::from([reply]))),
        }
    }

    /// Answer `path` (one of the self-description paths, or Gemini's
    /// `/v1beta/models/NAME`) with `body`.
    pub fn describe(&self, path: &str, body: Value) {
        self.inner
            .lock()
            .unwrap()
            .info
            .insert(path.to_string(), body);
    }

    /// Act as a model with a window of `tokens`, refusing a longer request
    /// with `kind`'s own "prompt too long" answer and its numbers. A
    /// request counts a token per three bytes of its body (more than the
    /// client's estimate, which counts the text alone).
    pub fn window(&self, kind: sandcrab::llm::ProviderKind, tokens: u64) {
        self.inner.lock().unwrap().window = Some((kind, tokens));
    }

    /// Sizes (as counted) of the requests the window let through, and of
    /// those it refused.
    pub fn counted(&self) -> (Vec<u64>, Vec<u64>) {
        let inner = self.inner.lock().unwrap();
        (inner.accepted.clone(), inner.refused.clone())
    }

    /// Answer with `reply(path, body)` when no queued reply is left.
    pub fn fallback(&self, reply: impl Fn(&str, &Value) -> Reply + Send + 'static) {
        self.inner.lock().unwrap().fallback = Some(Box::new(reply));
    }

    /// Why requests were rejected (strict mode).
    pub fn rejections(&self) -> Vec<String> {
        self.inner.lock().unwrap().rejections.clone()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queue a reply (served in order).
    pub fn push(&self, reply: Reply) {
        self.inner.lock().unwrap().replies.push_back(reply);
    }

    /// The questions a client asked about the server itself (paths).
    pub fn info_asked(&self) -> Vec<String> {
        self.inner.lock().unwrap().info_asked.clone()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// Replies not yet served.
    pub fn pending(&self) -> usize {
        self.inner.lock().unwrap().replies.len()
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Gemini's model metadata: a GET of the model itself (its calls are
    // POSTs to `model:generateContent`).
    let gemini_metadata = method == axum::http::Method::GET
        && uri.path().starts_with("/v1beta/models/")
        && !uri.path().contains(':');
    let reply = {
        let mut inner = inner.lock().unwrap();
        if INFO_PATHS.contains(&uri.path()) || gemini_metadata {
            inner.info_asked.push(uri.path().to_string());
            return match inner.info.get(uri.path()) {
                Some(body) => Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string()))
                    .unwrap(),
                None => Response::builder().status(404).body(Body::empty()).unwrap(),
            };
        }
        let size = body.len() as u64 / 3;
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        inner.requests.push(Recorded {
            path_and_query: uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            headers,
            body: body.clone(),
            at: std::time::Instant::now(),
        });
        if let Some(kind) = inner.rules
            && let Err(why) = crate::provider_rules::check(kind, &body, &inner.issued)
        {
            inner.rejections.push(why.clone());
            return Response::builder()
                .status(400)
                .header("content-type", "application/json")
                .body(Body::from(
                    crate::llm_transcripts::error_body(kind, 400, &why).to_string(),
                ))
                .unwrap();
        }
        if let Some((kind, window)) = inner.window {
            if size > window {
                inner.refused.push(size);
                return too_long(kind, size, window);
            }
            inner.accepted.push(size);
        }
        let last = ["messages", "input", "contents"]
            .iter()
            .find_map(|k| body[*k].as_array().and_then(|a| a.last()))
            .map(Value::to_string)
            .unwrap_or_default();
        let routed = inner
            .routed
            .iter_mut()
            .find(|(needle, queue)| !queue.is_empty() && last.contains(needle.as_str()))
            .and_then(|(_, queue)| queue.pop_front());
        let reply = routed.or_else(|| inner.replies.pop_front()).or_else(|| {
            inner
                .fallback
                .as_ref()
                .map(|answer| answer(uri.path(), &body))
        });
        if let (Some(kind), Some(reply)) = (inner.rules, &reply) {
            let text: Vec<u8> = reply.chunks.iter().flat_map(|c| c.to_vec()).collect();
            inner
                .issued
                .note_reply(kind, &String::from_utf8_lossy(&text));
        }
        reply
    };
    let Some(reply) = reply else {
        return Response::builder()
            .status(500)
            .body(Body::from(
                r#"{"error":{"message":"the mock server has no scripted reply left"}}"#,
            ))
            .unwrap();
    };
    let Reply {
        status,
        headers,
        chunks,
        chunk_delay,
        abort,
    } = reply;
    let stream = async_stream(chunks, chunk_delay, abort);
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap());
    for (k, v) in headers {
        builder = builder.header(k, v);
    }
    builder.body(Body::from_stream(stream)).unwrap()
}

/// `kind`'s own answer to a prompt longer than its window.
fn too_long(kind: sandcrab::llm::ProviderKind, size: u64, window: u64) -> Response {
    use sandcrab::llm::ProviderKind;
    let body = match kind {
        ProviderKind::Anthropic => serde_json::json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": format!("prompt is too long: {size} tokens > {window} maximum")}}),
        ProviderKind::OpenAi => serde_json::json!({"error": {
            "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {size} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        ProviderKind::OpenAiCompatible => serde_json::json!({"error": {
            "code": 400,
            "message": format!("request ({size} tokens) exceeds the available context size ({window} tokens), try increasing it"),
            "type": "exceed_context_size_error", "n_prompt_tokens": size, "n_ctx": window}}),
        ProviderKind::Gemini => serde_json::json!({"error": {
            "code": 400,
            "message": format!("The input token count ({size}) exceeds the maximum number of tokens allowed ({window})."),
            "status": "INVALID_ARGUMENT"}}),
    };
    Response::builder()
        .status(400)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn async_stream(
    chunks: Vec<Bytes>,
    delay: Duration,
    abort: bool,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let items: Vec<Result<Bytes, std::io::Error>> = chunks
        .into_iter()
        .map(Ok)
        .chain(abort.then(|| Err(std::io::Error::other("connection cut by the mock server"))))
        .collect();
    futures::StreamExt::then(futures::stream::iter(items), move |item| async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        item
    })
}

/// Frame SSE events: `(event name or "", data)`.
pub fn sse(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}
