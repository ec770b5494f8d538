//! Archival memory in SQLite: blocks, the FTS5 index ranked by BM25, vectors, compaction.

use super::*;

impl ArchiveStore for SqliteStore {
    fn archival(&self, conversation: &str, prefix: &str) -> Result<Vec<ArchivalBlock>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, conversation_id, label, content, created_at FROM archival WHERE conversation_id = ?1 AND substr(label, 1, length(?2)) = ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map([conversation, prefix], block_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn add_block(&self, conversation: &str, block: &NewBlock) -> Result<i64, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        let id = insert_block(&tx, conversation, block)?;
        tx.commit()?;
        Ok(id)
    }

    fn search(
        &self,
        conversation: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError> {
        let Some(query) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT a.id, a.conversation_id, a.label, a.content, a.created_at FROM archival_fts f JOIN archival a ON a.id = f.rowid WHERE archival_fts MATCH ?1 AND (?2 IS NULL OR a.conversation_id = ?2) ORDER BY f.rank LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![query, conversation, limit as i64], block_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn archival_blocks(&self, ids: &[i64]) -> Result<Vec<ArchivalBlock>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, conversation_id, label, content, created_at FROM archival WHERE id = ?1",
        )?;
        let mut out = Vec::new();
        for id in ids {
            if let Some(block) = stmt.query_row([id], block_row).optional()? {
                out.push(block);
            }
        }
        Ok(out)
    }

    fn set_embedding(
        &self,
        id: i64,
        model: &str,
        dims: usize,
        vector: &[u8],
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE archival SET embedding = ?2, embedding_model = ?3, embedding_dims = ?4 WHERE id = ?1",
            params![id, vector, model, dims as i64],
        )?;
        Ok(())
    }

    fn unembedded(
        &self,
        conversation: Option<&str>,
        model: &str,
        dims: usize,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, conversation_id, label, content, created_at FROM archival WHERE (?1 IS NULL OR conversation_id = ?1) AND (embedding IS NULL OR embedding_model IS NOT ?2 OR embedding_dims IS NOT ?3) AND id > ?5 ORDER BY id LIMIT ?4",
        )?;
        let rows = stmt.query_map(
            params![conversation, model, dims as i64, limit as i64, after],
            block_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn scan_embeddings(
        &self,
        conversation: &str,
        model: &str,
        dims: usize,
        visit: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, embedding FROM archival WHERE conversation_id = ?1 AND embedding IS NOT NULL AND embedding_model = ?2 AND embedding_dims = ?3",
        )?;
        let mut rows = stmt.query(params![conversation, model, dims as i64])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            if let Ok(blob) = row.get_ref(1)?.as_blob() {
                visit(id, blob);
            }
        }
        Ok(())
    }

    fn compact(&self, conversation: &str, write: &CompactionWrite) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        fence(
            &tx,
            conversation,
            &self.holder,
            Some(&self.keeper),
            self.ttl,
        )?;
        if !write.delete_turns.is_empty() {
            // The sign-off: what it removed (as the chain knew it) and what
            // replaced it.
            let removed = {
                let mut digest = tx.prepare_cached(
                    "SELECT digest FROM chain WHERE session_id = ?1 AND kind = 'turn' AND subject = ?2",
                )?;
                let mut removed = Vec::new();
                for id in &write.delete_turns {
                    let found: Option<String> = digest
                        .query_row(params![conversation, id], |r| r.get(0))
                        .optional()?;
                    removed.push((id.clone(), found.unwrap_or_default()));
                }
                removed
            };
            let sign_off = chain::SignOff::compaction(&removed, &write.add_blocks);
            add_links(&tx, conversation, [sign_off.item()], self.sealer.as_ref())?;
        }
        for block in &write.add_blocks {
            insert_block(&tx, conversation, block)?;
        }
        {
            let mut delete =
                tx.prepare_cached("DELETE FROM archival WHERE id = ?1 AND conversation_id = ?2")?;
            for id in &write.delete_blocks {
                delete.execute(params![id, conversation])?;
            }
            let mut delete =
                tx.prepare_cached("DELETE FROM turns WHERE id = ?1 AND session_id = ?2")?;
            for id in &write.delete_turns {
                delete.execute(params![id, conversation])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}
