//! The bridge's event streams in SQLite.

use super::*;

impl EventStore for SqliteStore {
    fn append_events(&self, stream: &str, events: &[StoredEvent]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO events (stream, id, event, data) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for e in events {
                insert.execute(params![stream, e.id as i64, e.event, e.data])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn events_after(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(self.event_rows(stream, after, limit)?)
    }

    fn last_event_id(&self, stream: &str) -> Result<u64, StoreError> {
        let id: Option<i64> = self.conn().query_row(
            "SELECT MAX(id) FROM events WHERE stream = ?1",
            [stream],
            |r| r.get(0),
        )?;
        Ok(id.unwrap_or(0) as u64)
    }
}
