//! Leases in SQLite: one holder at a time drives a session.

use super::*;

impl LeaseStore for SqliteStore {
    fn holder(&self) -> &Holder {
        &self.holder
    }

    fn acquire_lease(&self, session: &str) -> Result<(), StoreError> {
        {
            let mut conn = self.conn();
            let tx = conn.transaction_with_behavior(IMMEDIATE)?;
            fence(&tx, session, &self.holder, None, self.ttl)?;
            let h = &self.holder;
            tx.execute(
                "INSERT OR REPLACE INTO leases (session_id, holder, host, pid, process, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![session, h.id, h.host, h.pid as i64, h.process, now_ms() + self.ttl.as_millis() as i64],
            )?;
            tx.execute(
                "UPDATE sessions SET host = ?2 WHERE id = ?1",
                params![session, h.host],
            )?;
            tx.commit()?;
        }
        let (holder, ttl) = (self.holder.id.clone(), self.ttl);
        let renew = self
            .path
            .clone()
            .map(|path| move || renew_with(path, holder, ttl));
        self.keeper.hold(session, ttl, renew);
        Ok(())
    }

    fn lease_lost(&self, session: &str) -> bool {
        self.keeper.lost(session)
    }

    fn release_lease(&self, session: &str) -> Result<(), StoreError> {
        if !self.keeper.let_go(session) {
            return Ok(());
        }
        self.conn().execute(
            "DELETE FROM leases WHERE session_id = ?1 AND holder = ?2",
            params![session, self.holder.id],
        )?;
        Ok(())
    }

    fn leases(&self) -> Result<Vec<LeaseInfo>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {LEASE_COLUMNS} FROM leases ORDER BY session_id"
        ))?;
        let rows = stmt.query_map([], lease_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

pub(super) fn lease_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseInfo> {
    let expires_ms: i64 = r.get(5)?;
    Ok(LeaseInfo {
        session: r.get(0)?,
        holder: r.get(1)?,
        host: r.get(2)?,
        pid: r.get::<_, i64>(3)? as u32,
        process: r.get(4)?,
        expires_ms,
        left_ms: expires_ms - now_ms(),
    })
}

/// The renewal of one store's leases, on a connection of its own (the
/// store's is busy with the session's own writes).
fn renew_with(path: PathBuf, holder: String, ttl: Duration) -> crate::lease::Renew {
    let conn: Mutex<Option<Connection>> = Mutex::new(None);
    Box::new(move |sessions: &[String]| {
        let mut guard = conn.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let c = Connection::open(&path).map_err(|e| e.to_string())?;
            c.busy_timeout(Duration::from_secs(5))
                .map_err(|e| e.to_string())?;
            *guard = Some(c);
        }
        let c = guard.as_mut().expect("opened above");
        let tx = c
            .transaction_with_behavior(IMMEDIATE)
            .map_err(|e| e.to_string())?;
        let mut kept = Vec::new();
        for session in sessions {
            let n = tx
                .execute(
                    "UPDATE leases SET expires_ms = ?3 WHERE session_id = ?1 AND holder = ?2",
                    params![session, holder, now_ms() + ttl.as_millis() as i64],
                )
                .map_err(|e| e.to_string())?;
            if n == 1 {
                kept.push(session.clone());
            }
        }
        tx.commit().map_err(|e| e.to_string())?;
        Ok(kept)
    })
}
