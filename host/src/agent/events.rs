//! Session events: what happened, when, in which session. Every subscriber
//! gets every event emitted after it subscribed; the session's first
//! subscriber is created with the session, so it sees SESSION_START.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// The kinds of events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventKind {
    SessionStart,
    UserInput,
    AssistantTextStart,
    AssistantTextDelta,
    AssistantTextEnd,
    ToolCallStart,
    ToolCallOutputDelta,
    ToolCallEnd,
    SteeringInjected,
    TurnLimit,
    LoopDetection,
    ContextWarning,
    Warning,
    Error,
    ProcessingEnd,
    SessionEnd,
    /// A tool call became a background job.
    JobStarted,
    /// A background job reached a terminal status.
    JobFinished,
    /// Compaction of the history started.
    CompactionStart,
    /// Compaction ended (its stats; all zero when nothing changed).
    CompactionEnd,
}

/// One event.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub kind: EventKind,
    /// RFC 3339, UTC.
    pub timestamp: String,
    pub session_id: String,
    pub data: Value,
}

/// A stream of events.
pub type EventStream = UnboundedReceiverStream<Event>;

/// Fans events out to subscribers.
pub struct EventBus {
    session_id: String,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Event>>>,
    closed: std::sync::atomic::AtomicBool,
}

impl EventBus {
    pub fn new(session_id: &str) -> Self {
        EventBus {
            session_id: session_id.to_string(),
            subscribers: Mutex::new(Vec::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Events from now on.
    pub fn subscribe(&self) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        if !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            self.subscribers.lock().expect("event bus lock").push(tx);
        }
        UnboundedReceiverStream::new(rx)
    }

    /// Send an event to every live subscriber.
    pub fn emit(&self, kind: EventKind, data: Value) {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let event = Event {
            kind,
            timestamp: crate::time::now_rfc3339(),
            session_id: self.session_id.clone(),
            data,
        };
        self.subscribers
            .lock()
            .expect("event bus lock")
            .retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Emit a last event and end every stream.
    pub fn close_with(&self, kind: EventKind, data: Value) {
        self.emit(kind, data);
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.subscribers.lock().expect("event bus lock").clear();
    }
}
