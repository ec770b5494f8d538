//! [`Store`] on an embedded SQLite file (WAL, foreign keys on).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::chain;
use super::lease::{Holder, Keeper, LeaseInfo};
use super::schema::MIGRATIONS;
use super::{
    ArchivalBlock, ArchiveStore, CompactionWrite, EventStore, LeaseStore, NewBlock, NewRecord,
    SessionRecord, SessionStore, Store, StoreError, StoreOptions, StoredEvent, StoredRecord,
    StoredTurn,
};

mod archive;
mod events;
mod leases;
mod sessions;

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
        state: crate::StoredState::of_row(&r.get::<_, String>(8)?),
        turns: r.get::<_, i64>(9)? as u64,
        host: r.get(10)?,
    })
}

const SESSION_COLUMNS: &str = "s.id, s.workspace, s.provider, s.profile, s.model, s.title, s.created_at, s.updated_at, s.state, (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id AND t.kind = 'user'), s.host";

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
        params![s.id, s.workspace, s.provider, s.profile, s.model, s.title, s.created_at, s.updated_at, s.state.as_str(), host],
    )?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
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
        .query_row([session], leases::lease_row)
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
    use crate::{ArchiveStore, EventStore, SessionStore};

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
            state: crate::StoredState::Active,
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
