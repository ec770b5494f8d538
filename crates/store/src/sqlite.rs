//! [`Store`] on an embedded SQLite file (WAL, foreign keys on).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::chain;
use super::lease::{Holder, Keeper, LeaseInfo};
use super::schema::MIGRATIONS;
use super::{
    ArchivalBlock, CompactionWrite, NewBlock, NewRecord, SessionRecord, Store, StoreError,
    StoreOptions, StoredEvent, StoredRecord, StoredTurn,
};

/// Every write transaction takes the write lock at its start: one that
/// read first and wrote later would fail outright (not wait) when another
/// process wrote in between.
const IMMEDIATE: rusqlite::TransactionBehavior = rusqlite::TransactionBehavior::Immediate;

/// The SQLite store.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// The file (None: in memory).
    path: Option<PathBuf>,
    holder: Holder,
    ttl: Duration,
    keeper: Keeper,
    sealer: Option<chain::Sealer>,
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path` and bring its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, &StoreOptions::default())
    }

    /// [`SqliteStore::open`], its leases held as `options` says.
    pub fn open_with(path: &Path, options: &StoreOptions) -> Result<Self, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
        }
        super::private::secure(path).map_err(open_err)?;
        // Every conversation is in it: no confined program reads it.
        for file in super::database_files(path) {
            crate::kept::extend(
                crate::kept::Item::SessionDatabase,
                &file,
                "the store opened",
            );
        }
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        let mut store = Self::setup(conn, options).map_err(|e| open_err(e.to_string()))?;
        store.path = Some(path.to_path_buf());
        Ok(store)
    }

    /// A store in memory (tests, benchmarks).
    pub fn in_memory() -> Result<Self, StoreError> {
        Ok(Self::setup(
            Connection::open_in_memory()?,
            &StoreOptions::default(),
        )?)
    }

    fn setup(conn: Connection, options: &StoreOptions) -> Result<Self, rusqlite::Error> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // WAL: a committed transaction survives the process dying;
        // NORMAL skips the fsync per commit (power loss may lose the last
        // commits, a crash does not).
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut conn = conn;
        migrate(&mut conn)?;
        let holder = Holder::this_process(options.host.as_deref());
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path: None,
            sealer: options
                .chain_key
                .map(|key| chain::Sealer::new(key, &holder.host)),
            holder,
            ttl: options.lease_ttl,
            keeper: Keeper::new(),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Apply the migrations not yet applied, each in its own transaction.
fn migrate(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let done: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (n, sql) in MIGRATIONS.iter().enumerate().skip(done.max(0) as usize) {
        let tx = conn.transaction_with_behavior(IMMEDIATE)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", n as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: r.get(0)?,
        workspace: r.get(1)?,
        provider: r.get(2)?,
        profile: r.get(3)?,
        model: r.get(4)?,
        title: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        state: r.get(8)?,
        turns: r.get::<_, i64>(9)? as u64,
        host: r.get(10)?,
    })
}

const SESSION_COLUMNS: &str = "s.id, s.workspace, s.provider, s.profile, s.model, s.title, s.created_at, s.updated_at, s.state, (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id), s.host";

fn block_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ArchivalBlock> {
    Ok(ArchivalBlock {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        label: r.get(2)?,
        content: r.get(3)?,
        created_at: r.get(4)?,
    })
}

/// Free text as an FTS5 query: every word, quoted, any of them.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

/// The last link of `session`'s chain: its place and hash (0 and
/// [`chain::GENESIS`] for none).
fn chain_tail(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
) -> Result<(u64, String), rusqlite::Error> {
    let last: Option<(i64, String)> = tx
        .prepare_cached(
            "SELECT seq, hash FROM chain WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(last.map_or((0, chain::GENESIS.to_string()), |(seq, hash)| {
        (seq as u64, hash)
    }))
}

/// Append to `session`'s chain (inside the caller's transaction) a link
/// for each `(kind, subject, digest, detail)`, in order, and seal its new
/// head with `sealer`.
fn add_links<'a>(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    items: impl IntoIterator<Item = (&'a str, &'a str, String, &'a str)>,
    sealer: Option<&chain::Sealer>,
) -> Result<(), rusqlite::Error> {
    let links = chain::extend(chain_tail(tx, session)?, items);
    for link in &links {
        insert_link(tx, session, link)?;
    }
    if let (Some(sealer), Some(last)) = (sealer, links.last()) {
        put_seal(tx, session, &sealer.seal(session, &last.hash))?;
    }
    Ok(())
}

fn put_seal(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    seal: &chain::Seal,
) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO seals (session_id, head, host, mac) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![session, seal.head, seal.host, seal.mac])?;
    Ok(())
}

fn insert_link(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    l: &chain::Link,
) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT INTO chain (session_id, seq, kind, subject, digest, detail, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![session, l.seq as i64, l.kind, l.subject, l.digest, l.detail, l.hash])?;
    Ok(())
}

fn insert_session(conn: &Connection, s: &SessionRecord, host: &str) -> Result<(), rusqlite::Error> {
    let host = if s.host.is_empty() { host } else { &s.host };
    conn.execute(
        "INSERT INTO sessions (id, workspace, provider, profile, model, title, created_at, updated_at, state, host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![s.id, s.workspace, s.provider, s.profile, s.model, s.title, s.created_at, s.updated_at, s.state, host],
    )?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn lease_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseInfo> {
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

const LEASE_COLUMNS: &str = "session_id, holder, host, pid, process, expires_ms";

/// Refuse (inside the caller's transaction) to write `session` when
/// another holder's lease binds it.
/// Refuse what [`super::lease::fence`] refuses; `keeper` None when taking
/// the lease (a lease this store lost may be taken again once free).
fn fence(
    conn: &Connection,
    session: &str,
    me: &Holder,
    keeper: Option<&Keeper>,
    ttl: Duration,
) -> Result<(), StoreError> {
    let lease = conn
        .prepare_cached(&format!(
            "SELECT {LEASE_COLUMNS} FROM leases WHERE session_id = ?1"
        ))?
        .query_row([session], lease_row)
        .optional()?;
    let taken = keeper.is_some_and(|k| k.taken(session));
    super::lease::fence(session, lease.as_ref(), me, taken, ttl)
}

fn insert_turns(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    turns: &[StoredTurn],
) -> Result<(), rusqlite::Error> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO turns (id, session_id, timestamp, kind, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for t in turns {
        insert.execute(params![t.id, session, t.timestamp, t.kind, t.body])?;
    }
    Ok(())
}

fn insert_records(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    records: &[StoredRecord],
) -> Result<(), rusqlite::Error> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO recordings (session_id, seq, kind, size, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for r in records {
        let packed = super::packing::compress(r.body.as_bytes())
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        insert.execute(params![
            session,
            r.seq as i64,
            r.kind,
            r.body.len() as i64,
            packed
        ])?;
    }
    Ok(())
}

fn insert_block(
    tx: &rusqlite::Transaction<'_>,
    conversation: &str,
    block: &NewBlock,
) -> Result<i64, rusqlite::Error> {
    tx.execute(
        "INSERT INTO archival (conversation_id, label, content, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![conversation, block.label, block.content, crate::time::now_rfc3339()],
    )?;
    Ok(tx.last_insert_rowid())
}

impl Store for SqliteStore {
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
        let records = super::packing::numbered(next as u64, records);
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
            Ok(super::packing::unpack(
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

    fn import_session(&self, export: &super::export::SessionExport) -> Result<(), StoreError> {
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

    fn describe(&self) -> (String, u32) {
        let version: i64 = self
            .conn()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap_or(0);
        let place = self
            .path
            .as_ref()
            .map_or("sqlite::memory:".to_string(), |p| {
                format!("sqlite:{}", p.display())
            });
        (place, version as u32)
    }

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

/// The renewal of one store's leases, on a connection of its own (the
/// store's is busy with the session's own writes).
fn renew_with(path: PathBuf, holder: String, ttl: Duration) -> super::lease::Renew {
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

impl SqliteStore {
    fn event_rows(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, rusqlite::Error> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, event, data FROM events WHERE stream = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![stream, after as i64, limit as i64], |r| {
            Ok(StoredEvent {
                id: r.get::<_, i64>(0)? as u64,
                event: r.get(1)?,
                data: r.get(2)?,
            })
        })?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, ws: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            workspace: ws.into(),
            provider: "anthropic".into(),
            profile: "anthropic".into(),
            model: "m".into(),
            title: None,
            created_at: crate::time::now_rfc3339(),
            updated_at: crate::time::now_rfc3339(),
            state: "active".into(),
            turns: 0,
            host: String::new(),
        }
    }

    fn turn(id: &str) -> StoredTurn {
        StoredTurn {
            id: id.into(),
            timestamp: crate::time::now_rfc3339(),
            kind: "user".into(),
            body: format!("{{\"text\":\"{id}\"}}"),
        }
    }

    #[test]
    fn turns_come_back_in_order_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store.create_session(&session("s1", "/w")).unwrap();
            store.append_turns("s1", &[turn("a"), turn("b")]).unwrap();
            store.append_turns("s1", &[turn("c")]).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let ids: Vec<String> = store
            .turns("s1")
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(store.session("s1").unwrap().unwrap().turns, 3);
        assert!(matches!(
            store.append_turns("nope", &[turn("x")]),
            Err(StoreError::Sql(_)) | Err(StoreError::UnknownSession(_))
        ));
    }

    #[test]
    fn sessions_are_listed_per_workspace_and_deleted_whole() {
        let store = SqliteStore::in_memory().unwrap();
        store.create_session(&session("s1", "/a")).unwrap();
        store.create_session(&session("s2", "/b")).unwrap();
        store.append_turns("s1", &[turn("t1")]).unwrap();
        store
            .add_block(
                "s1",
                &NewBlock {
                    label: "l".into(),
                    content: "c".into(),
                },
            )
            .unwrap();
        assert_eq!(store.sessions(Some("/a")).unwrap().len(), 1);
        assert_eq!(store.sessions(None).unwrap().len(), 2);
        assert!(store.delete_session("s1").unwrap());
        assert!(store.turns("s1").unwrap().is_empty());
        assert!(store.archival("s1", "").unwrap().is_empty());
        assert!(!store.delete_session("s1").unwrap());
    }

    #[test]
    fn search_ranks_by_bm25_and_ignores_query_syntax() {
        let store = SqliteStore::in_memory().unwrap();
        for (label, content) in [
            ("a", "the deploy script uses rsync"),
            ("b", "rsync rsync rsync to the staging host"),
            ("c", "nothing relevant here"),
        ] {
            store
                .add_block(
                    "s",
                    &NewBlock {
                        label: label.into(),
                        content: content.into(),
                    },
                )
                .unwrap();
        }
        let hits = store.search(Some("s"), "rsync \"AND( NEAR", 10).unwrap();
        let labels: Vec<&str> = hits.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["b", "a"]);
        assert!(store.search(None, "  ()  ", 10).unwrap().is_empty());
    }

    #[test]
    fn event_streams_are_kept_in_order_per_stream() {
        let store = SqliteStore::in_memory().unwrap();
        let e = |id: u64| StoredEvent {
            id,
            event: "agent:message-chunk".into(),
            data: format!("{{\"n\":{id}}}"),
        };
        store.append_events("a", &[e(1), e(2), e(3)]).unwrap();
        store.append_events("b", &[e(1)]).unwrap();
        assert_eq!(store.last_event_id("a").unwrap(), 3);
        assert_eq!(store.last_event_id("none").unwrap(), 0);
        let ids: Vec<u64> = store
            .events_after("a", 1, 10)
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [2, 3]);
        assert_eq!(store.events_after("a", 0, 2).unwrap().len(), 2);
    }

    #[test]
    fn a_compaction_is_all_or_nothing() {
        let store = SqliteStore::in_memory().unwrap();
        store.create_session(&session("s1", "/w")).unwrap();
        store
            .append_turns("s1", &[turn("a"), turn("b"), turn("c")])
            .unwrap();
        let old = store
            .add_block(
                "s1",
                &NewBlock {
                    label: "old".into(),
                    content: "x".into(),
                },
            )
            .unwrap();
        store
            .compact(
                "s1",
                &CompactionWrite {
                    delete_turns: vec!["a".into(), "b".into()],
                    add_blocks: vec![NewBlock {
                        label: "new".into(),
                        content: "y".into(),
                    }],
                    delete_blocks: vec![old],
                },
            )
            .unwrap();
        let ids: Vec<String> = store
            .turns("s1")
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["c"]);
        let labels: Vec<String> = store
            .archival("s1", "")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["new"]);
    }
}
