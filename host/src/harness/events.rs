//! The bridge's event stream: the session's events renamed to the seed's
//! vocabulary (`agent:message-chunk`, `agent:session-completed`, …), each
//! with an increasing id, kept (the most recent [`KEPT`]) so a client that
//! reconnects with `Last-Event-ID` gets what it missed.
//!
//! Events belong to the workspace they happened in: a stored log keeps
//! them under `bridge:<canonical workspace path>`, and replays only the
//! current workspace's, so one bridge never shows another workspace's
//! events (or one it worked in before).

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::agent::{Event, EventData};

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
    store: std::sync::Arc<dyn crate::store::EventStore>,
    writer: tokio::sync::mpsc::UnboundedSender<(String, BridgeEvent)>,
}

struct Kept {
    next: u64,
    events: VecDeque<BridgeEvent>,
    /// The stored stream of the current workspace (None: no workspace yet;
    /// events are kept in memory only).
    stream: Option<String>,
}

/// The stored stream of `workspace` (a canonical path).
pub fn stream_of(workspace: &std::path::Path) -> String {
    format!("bridge:{}", workspace.display())
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            inner: Mutex::new(Kept {
                next: 1,
                events: VecDeque::new(),
                stream: None,
            }),
            live: broadcast::channel(4096).0,
            stored: None,
        }
    }
}

impl EventLog {
    /// A log kept in `store` as well, per workspace (see
    /// [`EventLog::switch_to`]). Needs a tokio runtime (for the writer
    /// task).
    pub fn stored(store: std::sync::Arc<dyn crate::store::EventStore>) -> Self {
        let (writer, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, BridgeEvent)>();
        let task_store = store.clone();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                let s = task_store.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    // One write per run of events of the same stream.
                    let mut rows: Vec<crate::store::StoredEvent> = Vec::new();
                    let mut stream = String::new();
                    for (name, e) in batch {
                        if name != stream && !rows.is_empty() {
                            append(&*s, &stream, &std::mem::take(&mut rows));
                        }
                        stream = name;
                        rows.push(crate::store::StoredEvent {
                            id: e.id,
                            event: e.event,
                            data: e.data.to_string(),
                        });
                    }
                    if !rows.is_empty() {
                        append(&*s, &stream, &rows);
                    }
                })
                .await;
            }
        });
        EventLog {
            stored: Some(Stored { store, writer }),
            ..EventLog::default()
        }
    }

    /// Keep this log following what other hosts sharing its store add to
    /// the current stream (a session driven elsewhere, seen live here):
    /// on each notice from the store, or every second when the store gives
    /// none, the events past the last one known are read from the store
    /// and published here (not stored again). Needs a tokio runtime.
    pub fn follow_other_hosts(self: &std::sync::Arc<Self>) {
        let Some(stored) = &self.stored else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let mut notices = stored.store.event_notices();
        let log = std::sync::Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                match notices.as_mut() {
                    Some(rx) => {
                        match rx.recv().await {
                            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(broadcast::error::RecvError::Closed) => return,
                        }
                        // One read covers every notice already queued.
                        while !matches!(
                            rx.try_recv(),
                            Err(broadcast::error::TryRecvError::Empty
                                | broadcast::error::TryRecvError::Closed)
                        ) {}
                    }
                    None => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
                }
                let Some(log) = log.upgrade() else {
                    return;
                };
                let read = tokio::task::spawn_blocking(move || log.catch_up()).await;
                if let Ok(Err(err)) = read {
                    tracing::warn!("events of other hosts not read: {err}");
                }
            }
        });
    }

    /// Publish the stored events of the current stream newer than any
    /// known here (another host's).
    fn catch_up(&self) -> Result<(), crate::store::StoreError> {
        let Some(stored) = &self.stored else {
            return Ok(());
        };
        let (stream, known) = {
            let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            match &kept.stream {
                Some(stream) => (stream.clone(), kept.next - 1),
                None => return Ok(()),
            }
        };
        let newer = stored.store.events_after(&stream, known, KEPT)?;
        if newer.is_empty() {
            return Ok(());
        }
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if kept.stream.as_deref() != Some(stream.as_str()) {
            return Ok(());
        }
        for e in newer {
            // One published here since the read has its id: ours stands.
            if e.id < kept.next {
                continue;
            }
            let e = BridgeEvent {
                id: e.id,
                event: e.event,
                data: serde_json::from_str(&e.data).unwrap_or(Value::Null),
            };
            kept.next = e.id + 1;
            if kept.events.len() == KEPT {
                kept.events.pop_front();
            }
            kept.events.push_back(e.clone());
            let _ = self.live.send(e);
        }
        Ok(())
    }

    /// Events from now on belong to `workspace` (canonical): a stored log
    /// keeps them under its stream and replays only that stream; what was
    /// kept in memory of another workspace is dropped. Ids keep growing
    /// (past every id stored for `workspace`), so a client never sees one
    /// twice.
    pub fn switch_to(&self, workspace: &std::path::Path) -> Result<(), crate::store::StoreError> {
        let stream = stream_of(workspace);
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if kept.stream.as_deref() == Some(stream.as_str()) {
            return Ok(());
        }
        if let Some(stored) = &self.stored {
            let last = stored.store.last_event_id(&stream)?;
            kept.next = kept.next.max(last.saturating_add(1));
        }
        kept.events.clear();
        kept.stream = Some(stream);
        Ok(())
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
        if let (Some(stored), Some(stream)) = (&self.stored, &kept.stream) {
            let _ = stored.writer.send((stream.clone(), e.clone()));
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
        let mut missed: Vec<BridgeEvent> = match (&self.stored, &kept.stream) {
            (Some(stored), Some(stream)) if after.saturating_add(1) < first_in_memory => stored
                .store
                .events_after(stream, after, KEPT)
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

fn append(store: &dyn crate::store::EventStore, stream: &str, rows: &[crate::store::StoredEvent]) {
    if let Err(err) = store.append_events(stream, rows) {
        tracing::warn!("bridge events not kept: {err}");
    }
}

/// The bridge event for a session event (None: not forwarded): its name
/// in the seed's vocabulary and its payload with the session's id added.
pub fn translate(event: &Event) -> Option<(&'static str, Value)> {
    let name = match &event.data {
        EventData::SessionStart(_) => "agent:session-started",
        EventData::UserInput(_) => "agent:user-message",
        EventData::AssistantTextDelta(d) => {
            return Some((
                "agent:message-chunk",
                json!({"text": d.delta, "session_id": event.session_id}),
            ));
        }
        EventData::AssistantTextEnd(_) => "agent:message-complete",
        EventData::ToolCallStart(_) => "agent:tool-call",
        EventData::ToolCallEnd(_) => "agent:tool-result",
        EventData::ProcessingEnd(d) if d.interrupted => "agent:session-interrupted",
        EventData::ProcessingEnd(_) => "agent:session-completed",
        EventData::Error(_) => "agent:error",
        EventData::Warning(_) => "agent:warning",
        EventData::Notice(_) => "agent:notice",
        EventData::JobStarted(_) => "agent:job-started",
        EventData::JobFinished(_) => "agent:job-finished",
        EventData::CompactionStart(_) => "agent:compaction-started",
        EventData::CompactionEnd(_) => "agent:compaction-completed",
        EventData::TurnLimit(_) => "agent:turn-limit",
        EventData::SpendCap(_) => "agent:spend-cap",
        EventData::ContextWarning(_) => "agent:context-warning",
        EventData::LoopDetection(_) => "agent:loop-detected",
        // Published from the permission queue, whoever asked (see
        // `Harness::report_requests`).
        EventData::PermissionRequired(_)
        | EventData::PermissionResolved(_)
        | EventData::SteeringInjected(_)
        | EventData::AssistantTextStart(_)
        | EventData::AssistantReasoningDelta(_)
        | EventData::ToolCallOutputDelta(_)
        | EventData::SessionEnd(_) => return None,
    };
    let mut data = event.data_json();
    data["session_id"] = json!(event.session_id);
    Some((name, data))
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
        let (missed, _) = log.follow(u64::MAX);
        assert!(missed.is_empty(), "the largest id is after everything");
    }

    #[test]
    fn a_tool_result_reaches_the_bridge_with_its_typed_status() {
        use crate::agent::event_data::ToolCallEnded;
        use crate::tools::ToolStatus;
        let event = Event {
            timestamp: "t".into(),
            session_id: "s1".into(),
            data: EventData::ToolCallEnd(ToolCallEnded::not_run(
                "c1",
                "write_file",
                ToolStatus::CutOff,
                "cut off",
            )),
        };
        let (name, data) = translate(&event).expect("forwarded");
        assert_eq!(name, "agent:tool-result");
        assert_eq!(
            (&data["status"], &data["is_error"], &data["session_id"]),
            (&json!("cut-off"), &json!(true), &json!("s1"))
        );
    }

    #[tokio::test]
    async fn a_workspace_replays_only_its_own_stored_events() {
        let store: std::sync::Arc<dyn crate::store::Store> =
            std::sync::Arc::new(crate::store::SqliteStore::in_memory().unwrap());
        let log = EventLog::stored(store.clone());
        log.switch_to(std::path::Path::new("/a")).unwrap();
        log.publish("agent:tool-result", json!({"output": "secret of a"}));
        log.switch_to(std::path::Path::new("/b")).unwrap();
        log.publish("agent:message-chunk", json!({"text": "b"}));
        for _ in 0..100 {
            if store.last_event_id("bridge:/b").unwrap() > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // A later bridge on /b (nothing in memory) replays from the store.
        let again = EventLog::stored(store.clone());
        again.switch_to(std::path::Path::new("/b")).unwrap();
        let (missed, _) = again.follow(0);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert_eq!(missed[0].data["text"], "b");
        assert!(again.publish("x", json!({})) > missed[0].id, "ids go on");
    }
}
