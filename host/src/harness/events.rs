//! The bridge's event stream: the session's events renamed to the seed's
//! vocabulary (`agent:message-chunk`, `agent:session-completed`, …), each
//! with an increasing id, kept (the most recent [`KEPT`]) so a client that
//! reconnects with `Last-Event-ID` gets what it missed.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::agent::{Event, EventKind};

/// Events kept for clients that reconnect.
pub const KEPT: usize = 20_000;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BridgeEvent {
    pub id: u64,
    /// `agent:…`.
    pub event: String,
    pub data: Value,
}

/// Published events, in order.
pub struct EventLog {
    inner: Mutex<Kept>,
    live: broadcast::Sender<BridgeEvent>,
    /// Where events are also kept (written in batches by a task), so a
    /// client reconnecting after a restart gets what it missed.
    stored: Option<Stored>,
}

struct Stored {
    store: std::sync::Arc<dyn crate::store::Store>,
    stream: String,
    writer: tokio::sync::mpsc::UnboundedSender<BridgeEvent>,
}

struct Kept {
    next: u64,
    events: VecDeque<BridgeEvent>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            inner: Mutex::new(Kept {
                next: 1,
                events: VecDeque::new(),
            }),
            live: broadcast::channel(4096).0,
            stored: None,
        }
    }
}

impl EventLog {
    /// A log kept in `store` under `stream` as well; ids go on from the
    /// last one kept. Needs a tokio runtime (for the writer task).
    pub fn stored(
        store: std::sync::Arc<dyn crate::store::Store>,
        stream: &str,
    ) -> Result<Self, crate::store::StoreError> {
        let next = store.last_event_id(stream)? + 1;
        let (writer, mut rx) = tokio::sync::mpsc::unbounded_channel::<BridgeEvent>();
        let (task_store, task_stream) = (store.clone(), stream.to_string());
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                let rows: Vec<crate::store::StoredEvent> = batch
                    .into_iter()
                    .map(|e| crate::store::StoredEvent {
                        id: e.id,
                        event: e.event,
                        data: e.data.to_string(),
                    })
                    .collect();
                let (s, name) = (task_store.clone(), task_stream.clone());
                let _ = tokio::task::spawn_blocking(move || {
                    if let Err(err) = s.append_events(&name, &rows) {
                        tracing::warn!("bridge events not kept: {err}");
                    }
                })
                .await;
            }
        });
        let log = EventLog::default();
        log.inner.lock().unwrap_or_else(|e| e.into_inner()).next = next;
        Ok(EventLog {
            stored: Some(Stored {
                store,
                stream: stream.to_string(),
                writer,
            }),
            ..log
        })
    }

    /// Publish one event; its id.
    pub fn publish(&self, event: &str, data: Value) -> u64 {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let e = BridgeEvent {
            id: kept.next,
            event: event.to_string(),
            data,
        };
        kept.next += 1;
        if kept.events.len() == KEPT {
            kept.events.pop_front();
        }
        kept.events.push_back(e.clone());
        if let Some(stored) = &self.stored {
            let _ = stored.writer.send(e.clone());
        }
        // Sent under the lock, so live order is id order.
        let _ = self.live.send(e);
        kept.next - 1
    }

    /// Events after `id` still kept, and a receiver for the ones to come
    /// (taken together, so nothing falls between them).
    pub fn follow(&self, after: u64) -> (Vec<BridgeEvent>, broadcast::Receiver<BridgeEvent>) {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Older than what memory holds (a restart, or long ago): from the
        // store, up to where memory begins.
        let first_in_memory = kept.events.front().map_or(kept.next, |e| e.id);
        let mut missed: Vec<BridgeEvent> = match &self.stored {
            Some(stored) if after + 1 < first_in_memory => stored
                .store
                .events_after(&stored.stream, after, KEPT)
                .unwrap_or_default()
                .into_iter()
                .filter(|e| e.id < first_in_memory)
                .map(|e| BridgeEvent {
                    id: e.id,
                    event: e.event,
                    data: serde_json::from_str(&e.data).unwrap_or(Value::Null),
                })
                .collect(),
            _ => Vec::new(),
        };
        missed.extend(kept.events.iter().filter(|e| e.id > after).cloned());
        (missed, self.live.subscribe())
    }

    /// The id of the last event published (0: none).
    pub fn last_id(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).next - 1
    }
}

/// The bridge event for a session event (None: not forwarded).
pub fn translate(event: &Event) -> Option<(&'static str, Value)> {
    let d = &event.data;
    let with_session = |mut v: Value| {
        v["session_id"] = json!(event.session_id);
        v
    };
    let name = match event.kind {
        EventKind::SessionStart => "agent:session-started",
        EventKind::UserInput => "agent:user-message",
        EventKind::AssistantTextDelta => {
            return Some((
                "agent:message-chunk",
                with_session(json!({"text": d["delta"]})),
            ));
        }
        EventKind::AssistantTextEnd => "agent:message-complete",
        EventKind::ToolCallStart => "agent:tool-call",
        EventKind::ToolCallEnd => "agent:tool-result",
        EventKind::ProcessingEnd => {
            let interrupted = d["interrupted"].as_bool().unwrap_or(false);
            return Some((
                if interrupted {
                    "agent:session-interrupted"
                } else {
                    "agent:session-completed"
                },
                with_session(d.clone()),
            ));
        }
        EventKind::Error => "agent:error",
        EventKind::Warning => "agent:warning",
        EventKind::JobStarted => "agent:job-started",
        EventKind::JobFinished => "agent:job-finished",
        EventKind::CompactionStart => "agent:compaction-started",
        EventKind::CompactionEnd => "agent:compaction-completed",
        EventKind::TurnLimit => "agent:turn-limit",
        EventKind::ContextWarning => "agent:context-warning",
        EventKind::LoopDetection => "agent:loop-detected",
        EventKind::SteeringInjected
        | EventKind::AssistantTextStart
        | EventKind::ToolCallOutputDelta
        | EventKind::SessionEnd => return None,
    };
    Some((name, with_session(d.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnecting_reader_gets_exactly_what_it_missed() {
        let log = EventLog::default();
        for i in 0..5 {
            log.publish("agent:message-chunk", json!({"text": i}));
        }
        let (missed, mut live) = log.follow(2);
        let ids: Vec<u64> = missed.iter().map(|e| e.id).collect();
        assert_eq!(ids, [3, 4, 5]);
        log.publish("agent:session-completed", json!({}));
        assert_eq!(live.try_recv().unwrap().id, 6);
        assert_eq!(log.last_id(), 6);
    }
}
