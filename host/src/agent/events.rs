//! Session events: what happened, when, in which session. Every subscriber
//! gets every event emitted after it subscribed; the session's first
//! subscriber is created with the session, so it sees SESSION_START.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

pub use super::event_data::{EventData, EventKind};

/// One event: what happened (its typed payload), when, in which session.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// RFC 3339, UTC.
    pub timestamp: String,
    pub session_id: String,
    pub data: EventData,
}

impl Event {
    /// The kind of event.
    pub fn kind(&self) -> EventKind {
        self.data.kind()
    }

    /// The payload as JSON (what the event's `data` field holds).
    pub fn data_json(&self) -> Value {
        serde_json::to_value(&self.data).unwrap_or(Value::Null)
    }
}

/// `{"kind", "timestamp", "session_id", "data"}`, in that order.
impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("Event", 4)?;
        out.serialize_field("kind", &self.kind())?;
        out.serialize_field("timestamp", &self.timestamp)?;
        out.serialize_field("session_id", &self.session_id)?;
        out.serialize_field("data", &self.data)?;
        out.end()
    }
}

/// A stream of events.
pub type EventStream = UnboundedReceiverStream<Event>;

/// The next event `events` already holds, if any, without waiting. Read
/// outside the task's cooperative budget: a spent budget would say
/// "nothing ready" with events waiting, and whoever drains a stream to
/// flush it would flush too early.
pub fn next_ready(events: &mut EventStream) -> Option<Event> {
    use futures::FutureExt;
    use tokio_stream::StreamExt;
    tokio::task::unconstrained(events.next())
        .now_or_never()
        .flatten()
}

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
    pub fn emit(&self, data: EventData) {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let event = Event {
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
    pub fn close_with(&self, data: EventData) {
        self.emit(data);
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.subscribers.lock().expect("event bus lock").clear();
    }
}
