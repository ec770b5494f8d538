//! Event streams: kept in `events`, announced with `NOTIFY` in the same
//! transaction (delivered when it commits), so a bridge on another host
//! reads what was added as soon as it is there. The notice carries only
//! the stream's name; the rows are read from the table, which stays the
//! source of truth (a listener that reconnects reads what it missed).

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;

use super::PgStore;
use crate::{StoreError, StoredEvent};

/// The channel every sandcrab host listens on.
const CHANNEL: &str = "sandcrab_events";

/// Longest stream name announced (PostgreSQL's payload limit is 8000
/// bytes); a longer one is still kept, and read by polling readers.
const MAX_NAME: usize = 7000;

pub async fn append(
    store: &PgStore,
    stream: &str,
    events: &[StoredEvent],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let stmt = tx
        .prepare_cached(
            "INSERT INTO events (stream, id, event, data) VALUES ($1, $2, $3, $4) ON CONFLICT (stream, id) DO NOTHING",
        )
        .await?;
    for e in events {
        tx.execute(&stmt, &[&stream, &(e.id as i64), &e.event, &e.data])
            .await?;
    }
    if stream.len() <= MAX_NAME {
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &stream])
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn after(
    store: &PgStore,
    stream: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(
            "SELECT id, event, data FROM events WHERE stream = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&stream, &(after as i64), &(limit as i64)])
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredEvent {
            id: r.get::<_, i64>(0) as u64,
            event: r.get(1),
            data: r.get(2),
        })
        .collect())
}

pub async fn last_id(store: &PgStore, stream: &str) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let id: Option<i64> = client
        .query_one("SELECT MAX(id) FROM events WHERE stream = $1", &[&stream])
        .await?
        .get(0);
    Ok(id.unwrap_or(0) as u64)
}

/// A receiver of the names of streams appended to (by any host, this
/// one too); the listening connection starts with the first receiver and
/// reconnects when it drops. After a reconnect every stream is announced
/// once with the name `*` (something may have been missed).
pub fn notices(store: &PgStore) -> broadcast::Receiver<String> {
    store
        .notices
        .get_or_init(|| {
            let (tx, _) = broadcast::channel(1024);
            let (config, tls, sender) = (store.config.clone(), store.tls.clone(), tx.clone());
            store.handle().spawn(listen(config, tls, sender));
            tx
        })
        .subscribe()
}

async fn listen(
    config: tokio_postgres::Config,
    tls: super::connect::Tls,
    out: broadcast::Sender<String>,
) {
    let mut first = true;
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let (messages_tx, mut messages) = futures::channel::mpsc::unbounded();
                let driver = tokio::spawn(async move {
                    let mut stream =
                        futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = stream.next().await {
                        match message {
                            Ok(m) => {
                                if messages_tx.unbounded_send(m).is_err() {
                                    break;
                                }
                            }
                            Err(e) => {
                                tracing::warn!("event notices: {}", super::describe(&e));
                                break;
                            }
                        }
                    }
                });
                if client
                    .batch_execute(&format!("LISTEN {CHANNEL}"))
                    .await
                    .is_ok()
                {
                    if !first {
                        let _ = out.send("*".into());
                    }
                    first = false;
                    while let Some(message) = messages.next().await {
                        if let tokio_postgres::AsyncMessage::Notification(n) = message {
                            let _ = out.send(n.payload().to_string());
                        }
                    }
                }
                driver.abort();
            }
            Err(e) => tracing::warn!("event notices: cannot connect: {}", super::describe(&e)),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
