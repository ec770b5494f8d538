//! Sessions, their turns, recordings, chains and seals in SQLite.

use super::*;

impl SessionStore for SqliteStore {
    fn create_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        Ok(insert_session(&self.conn(), s, &self.holder.host)?)
    }

    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?1"),
                [id],
                session_row,
            )
            .optional()?)
    }

    fn sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s WHERE ?1 IS NULL OR s.workspace = ?1 ORDER BY s.updated_at DESC, s.rowid DESC"
        ))?;
        let rows = stmt.query_map([workspace], session_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn update_session(
        &self,
        id: &str,
        title: Option<&str>,
        state: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        // A title is set once; the chain vouches for it from then on.
        let untitled: Option<bool> = tx
            .query_row(
                "SELECT title IS NULL FROM sessions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(untitled) = untitled else {
            return Err(StoreError::UnknownSession(id.to_string()));
        };
        fence(&tx, id, &self.holder, Some(&self.keeper), self.ttl)?;
        tx.execute(
            "UPDATE sessions SET title = COALESCE(title, ?2), state = COALESCE(?3, state), updated_at = ?4 WHERE id = ?1",
            params![id, title, state, crate::time::now_rfc3339()],
        )?;
        if let (true, Some(title)) = (untitled, title) {
            let digest = chain::title_digest(title);
            add_links(
                &tx,
                id,
                [(chain::TITLE, "title", digest, "")],
                self.sealer.as_ref(),
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        fence(&tx, id, &self.holder, Some(&self.keeper), self.ttl)?;
        tx.execute("DELETE FROM archival WHERE conversation_id = ?1", [id])?;
        let n = tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    fn append(
        &self,
        session: &str,
        turns: &[StoredTurn],
        records: &[NewRecord],
    ) -> Result<(), StoreError> {
        if turns.is_empty() && records.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        fence(&tx, session, &self.holder, Some(&self.keeper), self.ttl)?;
        insert_turns(&tx, session, turns)?;
        let next: i64 = tx
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM recordings WHERE session_id = ?1")?
            .query_row([session], |r| r.get(0))?;
        let records = crate::packing::numbered(next as u64, records);
        insert_records(&tx, session, &records)?;
        let subjects: Vec<String> = records.iter().map(chain::record_subject).collect();
        add_links(
            &tx,
            session,
            chain::append_items(turns, &records, &subjects),
            self.sealer.as_ref(),
        )?;
        let changed = tx.execute(
            "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
            params![session, crate::time::now_rfc3339()],
        )?;
        if changed == 0 {
            return Err(StoreError::UnknownSession(session.to_string()));
        }
        tx.commit()?;
        Ok(())
    }

    fn records(&self, session: &str) -> Result<Vec<StoredRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, kind, size, body FROM recordings WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([session], |r| {
            Ok(crate::packing::unpack(
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn recording_size(&self, session: &str) -> Result<u64, StoreError> {
        let size: i64 = self.conn().query_row(
            "SELECT COALESCE(SUM(size), 0) FROM recordings WHERE session_id = ?1",
            [session],
            |r| r.get(0),
        )?;
        Ok(size as u64)
    }

    fn turns(&self, session: &str) -> Result<Vec<StoredTurn>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, timestamp, kind, body FROM turns WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([session], |r| {
            Ok(StoredTurn {
                id: r.get(0)?,
                timestamp: r.get(1)?,
                kind: r.get(2)?,
                body: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn chain(&self, session: &str) -> Result<Vec<chain::Link>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, kind, subject, digest, detail, hash FROM chain WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([session], |r| {
            Ok(chain::Link {
                seq: r.get::<_, i64>(0)? as u64,
                kind: r.get(1)?,
                subject: r.get(2)?,
                digest: r.get(3)?,
                detail: r.get(4)?,
                hash: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn seal(&self, session: &str) -> Result<Option<chain::Seal>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT head, host, mac FROM seals WHERE session_id = ?1",
                [session],
                |r| {
                    Ok(chain::Seal {
                        head: r.get(0)?,
                        host: r.get(1)?,
                        mac: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }

    fn sealer(&self) -> Option<&chain::Sealer> {
        self.sealer.as_ref()
    }

    fn import_session(&self, export: &crate::export::SessionExport) -> Result<(), StoreError> {
        let s = &export.session;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        let exists: Option<String> = tx
            .query_row("SELECT id FROM sessions WHERE id = ?1", [&s.id], |r| {
                r.get(0)
            })
            .optional()?;
        if exists.is_some() {
            return Err(StoreError::Exists(s.id.clone()));
        }
        if let Some(turn) = export.turns.first() {
            let holder: Option<String> = tx
                .query_row(
                    "SELECT session_id FROM turns WHERE id = ?1",
                    [&turn.id],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(holder) = holder {
                return Err(StoreError::TurnsExist(holder));
            }
        }
        insert_session(&tx, s, &self.holder.host)?;
        insert_turns(&tx, &s.id, &export.turns)?;
        insert_records(&tx, &s.id, &export.records)?;
        for link in &export.links {
            insert_link(&tx, &s.id, link)?;
        }
        // Verified on the way in: this host vouches for it from here.
        if let Some(sealer) = &self.sealer {
            put_seal(&tx, &s.id, &sealer.seal(&s.id, &export.head()))?;
        }
        for block in &export.summaries {
            insert_block(&tx, &s.id, block)?;
        }
        tx.commit()?;
        Ok(())
    }
}
