//! `GET /events`: the harness's events as Server-Sent Events. A client
//! that reconnects with `Last-Event-ID` first gets the events it missed,
//! then the live ones, with no gap and no duplicate; heartbeats keep idle
//! connections open.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::Shared;
use crate::harness::BridgeEvent;

fn frame(e: &BridgeEvent) -> Event {
    Event::default()
        .id(e.id.to_string())
        .event(e.event.clone())
        .data(e.data.to_string())
}

pub(super) async fn events(
    State(s): State<Shared>,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let after: u64 = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        // A new client starts from now.
        .unwrap_or_else(|| s.harness.events().last_id());
    let (missed, live) = s.harness.events().follow(after);
    let log = s.harness.events().clone();
    let stream = futures::stream::unfold(
        (missed.into_iter(), live, after, log),
        |(mut missed, mut live, mut last, log)| async move {
            if let Some(e) = missed.next() {
                last = e.id;
                return Some((Ok(frame(&e)), (missed, live, last, log)));
            }
            loop {
                match live.recv().await {
                    Ok(e) if e.id <= last => continue,
                    Ok(e) => {
                        last = e.id;
                        return Some((Ok(frame(&e)), (missed, live, last, log)));
                    }
                    // Too slow: catch up from what is kept.
                    Err(RecvError::Lagged(_)) => {
                        let (again, fresh) = log.follow(last);
                        missed = again.into_iter();
                        live = fresh;
                        if let Some(e) = missed.next() {
                            last = e.id;
                            return Some((Ok(frame(&e)), (missed, live, last, log)));
                        }
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    let shutdown = s.config.shutdown.clone().cancelled_owned();
    let stream = futures::StreamExt::take_until(stream, shutdown);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(s.config.heartbeat))
}
