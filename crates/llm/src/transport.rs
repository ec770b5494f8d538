//! HTTP for every adapter: retries per the policy, status codes mapped to
//! the error taxonomy, and the streaming pipeline (bytes → SSE events →
//! adapter decoder → unified events, with a read timeout and a check that
//! the stream really finished).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::adapters::{Adapter, StreamDecoder, Summary};
use super::config::ProviderConfig;
use super::error::{ErrorKind, LlmError};
use super::retry::{RetryStep, parse_retry_after};
use super::types::EventStream;

/// Largest error body read (its text becomes the error's message).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Largest complete (non-streamed) answer.
const MAX_ANSWER_BODY: usize = 64 << 20;
use super::sse::SseParser;
use super::types::{FinishReason, Reasoning, Request, Response, StreamEvent};

/// The HTTP side of a client.
pub struct Transport {
    config: ProviderConfig,
    http: reqwest::Client,
}

impl Transport {
    pub fn new(config: ProviderConfig) -> Result<Self, LlmError> {
        config
            .check_key_transport()
            .map_err(|m| LlmError::new(ErrorKind::Configuration, config.kind.id(), m))?;
        let builder = super::config::keyed_http(config.proxy.as_deref())
            .map_err(|m| LlmError::new(ErrorKind::Configuration, config.kind.id(), m))?;
        let http = builder
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.first_byte_timeout.max(config.read_timeout))
            .build()
            .map_err(|e| {
                LlmError::new(
                    ErrorKind::Configuration,
                    config.kind.id(),
                    format!("cannot build the HTTP client: {e}"),
                )
            })?;
        Ok(Transport { config, http })
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    fn provider(&self) -> &str {
        self.config.kind.id()
    }

    /// POST the request, retrying per policy until a 2xx response.
    async fn send(
        &self,
        adapter: &dyn Adapter,
        request: &Request,
        stream: bool,
    ) -> Result<reqwest::Response, LlmError> {
        let url = adapter.endpoint(&self.config.root(), &request.model, stream);
        let body = adapter.build_body(request, stream);
        let mut attempt = 0;
        loop {
            let result = self.send_once(adapter, &url, &body).await;
            match result {
                Ok(response) => return Ok(response),
                Err(mut err) => match self.config.retry.decide(attempt, &mut err) {
                    RetryStep::RetryAfter(wait) => {
                        tracing::info!("{err}; retrying in {:.1} s", wait.as_secs_f64());
                        super::retry::notice(
                            &err,
                            super::retry::Retrying {
                                attempt: attempt + 1,
                                of: self.config.retry.max_retries,
                                wait,
                            },
                        );
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    RetryStep::GiveUp => return Err(err),
                },
            }
        }
    }

    async fn send_once(
        &self,
        adapter: &dyn Adapter,
        url: &str,
        body: &Value,
    ) -> Result<reqwest::Response, LlmError> {
        let mut builder = self.http.post(url).json(body);
        for (name, value) in adapter.headers(self.config.api_key.as_deref()) {
            builder = builder.header(name, value);
        }
        let response = builder.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // An error's body is for its message: a little is plenty.
        let text = super::body::text_capped(response, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        Err(LlmError::from_status(
            self.provider(),
            status.as_u16(),
            &text,
            retry_after,
        ))
    }

    fn transport_error(&self, err: reqwest::Error) -> LlmError {
        let kind = if err.is_timeout() {
            ErrorKind::Timeout
        } else {
            ErrorKind::Network
        };
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(inner) = source {
            message.push_str(&format!(": {inner}"));
            source = inner.source();
        }
        LlmError::new(kind, self.provider(), message)
    }

    /// One complete (non-streamed) answer.
    pub async fn complete(
        &self,
        adapter: &dyn Adapter,
        request: &Request,
    ) -> Result<Response, LlmError> {
        let response = self.send(adapter, request, false).await?;
        let text = super::body::text_capped(response, MAX_ANSWER_BODY)
            .await
            .map_err(|e| match e {
                super::body::BodyError::Transport(e) => self.transport_error(e),
                too_large => {
                    LlmError::new(ErrorKind::Stream, self.provider(), too_large.to_string())
                }
            })?;
        let json: Value = serde_json::from_str(&text).map_err(|e| {
            LlmError::new(
                ErrorKind::Stream,
                self.provider(),
                format!(
                    "the response is not JSON ({e}): {}",
                    super::error::error_message(&text)
                ),
            )
        })?;
        adapter.parse_response(&json).map(normalize)
    }

    /// A streamed answer. Only the connection is retried.
    pub async fn stream(
        &self,
        adapter: &dyn Adapter,
        request: &Request,
    ) -> Result<EventStream, LlmError> {
        let response = self.send(adapter, request, true).await?;
        let provider = self.provider().to_string();
        let body = response.bytes_stream().map(move |chunk| {
            chunk.map_err(|e| {
                let kind = if e.is_timeout() {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::Stream
                };
                (kind, e.to_string())
            })
        });
        Ok(decode_stream(
            Box::pin(body),
            adapter.decoder(),
            provider,
            Timeouts {
                first_byte: self.config.first_byte_timeout,
                idle: self.config.read_timeout,
            },
        ))
    }
}

/// Tool calls make the finish reason `ToolCalls` whatever the provider said.
fn normalize(mut response: Response) -> Response {
    if !response.tool_calls.is_empty() && response.finish_reason == FinishReason::Stop {
        response.finish_reason = FinishReason::ToolCalls;
    }
    response
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, (ErrorKind, String)>> + Send>>;

/// How long a stream may be silent: before its first bytes, and between
/// chunks once it is flowing.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub first_byte: Duration,
    pub idle: Duration,
}

struct Decoding {
    body: ByteStream,
    sse: SseParser,
    decoder: Box<dyn StreamDecoder>,
    provider: String,
    timeouts: Timeouts,
    /// Bytes have arrived (the idle timeout applies from then on).
    flowing: bool,
    pending: VecDeque<Result<StreamEvent, LlmError>>,
    ended: bool,
    in_text: bool,
    response: Response,
}

/// Turn a response body into unified events.
pub fn decode_stream(
    body: ByteStream,
    decoder: Box<dyn StreamDecoder>,
    provider: String,
    timeouts: Timeouts,
) -> EventStream {
    let state = Decoding {
        body,
        sse: SseParser::new(),
        decoder,
        provider,
        timeouts,
        flowing: false,
        pending: VecDeque::new(),
        ended: false,
        in_text: false,
        response: Response::default(),
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(item) = s.pending.pop_front() {
                return Some((item, s));
            }
            if s.ended {
                return None;
            }
            s.pull().await;
        }
    }))
}

impl Decoding {
    /// Read the next chunk and queue what it produces.
    async fn pull(&mut self) {
        let wait = if self.flowing {
            self.timeouts.idle
        } else {
            self.timeouts.first_byte
        };
        let silent = |flowing: bool| {
            let secs = wait.as_secs_f64();
            if flowing {
                format!("no data for {secs} s while streaming")
            } else {
                format!("no answer began within {secs} s")
            }
        };
        let next = tokio::time::timeout(wait, self.body.next()).await;
        let chunk = match next {
            Err(_) | Ok(Some(Err((ErrorKind::Timeout, _)))) => {
                return self.fail(ErrorKind::Timeout, silent(self.flowing));
            }
            Ok(Some(Err((kind, e)))) => {
                return self.fail(kind, format!("the connection failed mid-stream: {e}"));
            }
            Ok(Some(Ok(bytes))) => bytes,
            Ok(None) => return self.end_of_body(),
        };
        self.flowing = true;
        let events = match self.sse.feed(&chunk) {
            Ok(events) => events,
            Err(too_large) => return self.fail(ErrorKind::Stream, too_large.to_string()),
        };
        for event in events {
            match self.decoder.event(&event) {
                Ok(events) => {
                    for e in events {
                        self.emit(e);
                    }
                }
                Err(err) => return self.push_error(err),
            }
            if self.decoder.done() {
                return self.finish();
            }
        }
    }

    fn end_of_body(&mut self) {
        if self.decoder.complete_at_eof() {
            self.finish();
        } else {
            self.fail(
                ErrorKind::Stream,
                "the stream ended before the response was complete".into(),
            );
        }
    }

    /// Queue `event`, inserting text start/end markers around text runs and
    /// recording it into the final response.
    fn emit(&mut self, event: StreamEvent) {
        let is_text = matches!(event, StreamEvent::TextDelta(_));
        if is_text && !self.in_text {
            self.in_text = true;
            self.pending.push_back(Ok(StreamEvent::TextStart));
        }
        if !is_text && self.in_text {
            self.in_text = false;
            self.pending.push_back(Ok(StreamEvent::TextEnd));
        }
        match &event {
            StreamEvent::TextDelta(t) => self.response.text.push_str(t),
            StreamEvent::ReasoningDelta(t) => self
                .response
                .reasoning
                .get_or_insert_with(Reasoning::default)
                .text
                .push_str(t),
            StreamEvent::ReasoningPart(part) => self
                .response
                .reasoning
                .get_or_insert_with(Reasoning::default)
                .parts
                .push(part.clone()),
            StreamEvent::ToolCallEnd(call) => self.response.tool_calls.push(call.clone()),
            _ => {}
        }
        self.pending.push_back(Ok(event));
    }

    fn finish(&mut self) {
        if self.in_text {
            self.in_text = false;
            self.pending.push_back(Ok(StreamEvent::TextEnd));
        }
        let Summary {
            id,
            model,
            usage,
            finish_reason,
            signature,
        } = self.decoder.summary();
        let mut response = std::mem::take(&mut self.response);
        response.id = id;
        response.model = model;
        response.usage = usage;
        response.finish_reason = finish_reason;
        if let Some(sig) = signature {
            response
                .reasoning
                .get_or_insert_with(Reasoning::default)
                .signature = Some(sig);
        }
        self.pending
            .push_back(Ok(StreamEvent::Finish(normalize(response))));
        self.ended = true;
    }

    fn fail(&mut self, kind: ErrorKind, message: String) {
        let err = LlmError::new(kind, &self.provider, message);
        self.push_error(err);
    }

    fn push_error(&mut self, err: LlmError) {
        self.pending.push_back(Err(err));
        self.ended = true;
    }
}
