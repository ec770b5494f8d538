//! Spans: started where the work starts, ended (exported) when dropped,
//! so an interrupted call's span still reaches the collector. A span made
//! while telemetry is off is inert: no ids, nothing kept.

use std::time::{SystemTime, UNIX_EPOCH};

use super::proto::{self, Message, Value};

/// Which trace a span belongs to and which span it is; passed on as W3C
/// `traceparent` (to MCP servers, in `_meta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl SpanContext {
    /// `00-TRACE-SPAN-01`.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace_id), hex(&self.span_id))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What kind of work a span is (`trace.v1.Span.SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Client = 3,
}

/// A span that ended, as exported.
#[derive(Debug, Clone)]
pub struct Finished {
    pub context: SpanContext,
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(String, Value)>,
    /// The error's type, when the work failed.
    pub error: Option<String>,
}

/// A span being recorded; see the module doc.
pub struct Span {
    live: Option<Finished>,
}

pub(super) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Span {
    /// Start a span named `name` under `parent` (None: a new trace).
    pub fn start(name: impl Into<String>, kind: SpanKind, parent: Option<SpanContext>) -> Span {
        if !super::enabled() {
            return Span { live: None };
        }
        let trace_id = parent.map(|p| p.trace_id).unwrap_or_else(rand::random);
        Span {
            live: Some(Finished {
                context: SpanContext {
                    trace_id,
                    span_id: rand::random(),
                },
                parent: parent.map(|p| p.span_id),
                name: name.into(),
                kind,
                start_ns: now_ns(),
                end_ns: 0,
                attributes: Vec::new(),
                error: None,
            }),
        }
    }

    /// Where children of this span go (None: telemetry is off).
    pub fn context(&self) -> Option<SpanContext> {
        self.live.as_ref().map(|s| s.context)
    }

    /// Set attribute `key` (a later value replaces an earlier one).
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        if let Some(span) = &mut self.live {
            let value = value.into();
            match span.attributes.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value,
                None => span.attributes.push((key.to_string(), value)),
            }
        }
        self
    }

    /// Mark the work failed with `error_type` (the `error.type`
    /// attribute and an error status).
    pub fn fail(&mut self, error_type: &str) -> &mut Self {
        if let Some(span) = &mut self.live {
            span.error = Some(error_type.to_string());
        }
        self.set(super::names::ERROR_TYPE, error_type)
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(mut span) = self.live.take() {
            span.end_ns = now_ns().max(span.start_ns);
            super::export::span_ended(span);
        }
    }
}

/// `collector.trace.v1.ExportTraceServiceRequest` of `spans`.
pub fn encode(resource: &[(String, Value)], spans: &[Finished]) -> Vec<u8> {
    proto::export_request(resource, spans.iter().map(encode_span))
}

fn encode_span(span: &Finished) -> Message {
    let mut m = Message::new();
    m.bytes(1, &span.context.trace_id)
        .bytes(2, &span.context.span_id);
    if let Some(parent) = &span.parent {
        m.bytes(4, parent);
    }
    m.string(5, &span.name)
        .varint(6, span.kind as u64)
        .fixed64(7, span.start_ns)
        .fixed64(8, span.end_ns);
    proto::attributes(&mut m, 9, &span.attributes);
    // Status { message = 2, code = 3 }: error 2, else unset.
    if let Some(error) = &span.error {
        let mut status = Message::new();
        status.string(2, error).varint(3, 2);
        m.message(15, status);
    }
    m
}
