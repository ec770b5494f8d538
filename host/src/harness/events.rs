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
        }
    }
}

impl EventLog {
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
        // Sent under the lock, so live order is id order.
        let _ = self.live.send(e);
        kept.next - 1
    }

    /// Events after `id` still kept, and a receiver for the ones to come
    /// (taken together, so nothing falls between them).
    pub fn follow(&self, after: u64) -> (Vec<BridgeEvent>, broadcast::Receiver<BridgeEvent>) {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let missed = kept
            .events
            .iter()
            .filter(|e| e.id > after)
            .cloned()
            .collect();
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
