//! Sessions, their turns, recordings and hash chains, and their leases.

use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::Row;

use super::{NOW_MS, PgStore};
use crate::lease::LeaseInfo;
use crate::{
    CompactionWrite, NewRecord, SessionRecord, StoreError, StoredRecord, StoredTurn, chain, export,
    packing,
};

const SESSION_COLUMNS: &str = "s.id, s.workspace, s.provider, s.profile, s.model, s.title, s.created_at, s.updated_at, s.state, (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id AND t.kind = 'user'), s.host";

fn session_row(r: &Row) -> SessionRecord {
    SessionRecord {
        id: r.get(0),
        workspace: r.get(1),
        provider: r.get(2),
        profile: r.get(3),
        model: r.get(4),
        title: r.get(5),
        created_at: r.get(6),
        updated_at: r.get(7),
        state: crate::StoredState::of_row(&r.get::<_, String>(8)),
        turns: r.get::<_, i64>(9) as u64,
        host: r.get(10),
    }
}

const LEASE_COLUMNS: &str = "session_id, holder, host, pid, process, expires_ms";

fn lease_row(r: &Row) -> LeaseInfo {
    LeaseInfo {
        session: r.get(0),
        holder: r.get(1),
        host: r.get(2),
        pid: r.get::<_, i64>(3) as u32,
        process: r.get(4),
        expires_ms: r.get(5),
        left_ms: r.get(6),
    }
}

/// Lock `session`'s row for the rest of the transaction (its writes take
/// turns) and refuse what [`crate::lease::fence`] refuses.
async fn lock_and_fence(
    store: &PgStore,
    tx: &Transaction<'_>,
    session: &str,
) -> Result<(), StoreError> {
    lock_and_check(store, tx, session, store.keeper.taken(session)).await
}

/// [`lock_and_fence`], with `taken` saying whether this store's own
/// earlier hold counts (not when it takes the lease again).
async fn lock_and_check(
    store: &PgStore,
    tx: &Transaction<'_>,
    session: &str,
    taken: bool,
) -> Result<(), StoreError> {
    let found = tx
        .query_opt(
            "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
            &[&session],
        )
        .await?;
    if found.is_none() {
        return Err(StoreError::UnknownSession(session.to_string()));
    }
    let lease = lease_of(tx, session).await?;
    crate::lease::fence(session, lease.as_ref(), &store.holder, taken, store.ttl)
}

async fn lease_of(tx: &Transaction<'_>, session: &str) -> Result<Option<LeaseInfo>, StoreError> {
    let row = tx
        .query_opt(
            &format!(
                "SELECT {LEASE_COLUMNS}, expires_ms - {NOW_MS} FROM leases WHERE session_id = $1"
            ),
            &[&session],
        )
        .await?;
    Ok(row.as_ref().map(lease_row))
}

async fn insert_session(
    tx: &Transaction<'_>,
    s: &SessionRecord,
    host: &str,
) -> Result<(), StoreError> {
    let host = if s.host.is_empty() { host } else { &s.host };
    tx.execute(
        "INSERT INTO sessions (id, workspace, provider, profile, model, title, created_at, updated_at, state, host) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[&s.id, &s.workspace, &s.provider, &s.profile, &s.model, &s.title, &s.created_at, &s.updated_at, &s.state.as_str(), &host],
    )
    .await?;
    Ok(())
}

pub async fn create(store: &PgStore, s: &SessionRecord) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    insert_session(&tx, s, &store.holder.host).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn one(store: &PgStore, id: &str) -> Result<Option<SessionRecord>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = $1"),
            &[&id],
        )
        .await?;
    Ok(row.as_ref().map(session_row))
}

pub async fn list(
    store: &PgStore,
    workspace: Option<&str>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions s WHERE $1::text IS NULL OR s.workspace = $1 ORDER BY s.updated_at DESC, s.created DESC"
            ),
            &[&workspace],
        )
        .await?;
    Ok(rows.iter().map(session_row).collect())
}

pub async fn update(
    store: &PgStore,
    id: &str,
    title: Option<&str>,
    state: Option<&str>,
) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    lock_and_fence(store, &tx, id).await?;
    let untitled: bool = tx
        .query_one("SELECT title IS NULL FROM sessions WHERE id = $1", &[&id])
        .await?
        .get(0);
    tx.execute(
        "UPDATE sessions SET title = COALESCE(title, $2), state = COALESCE($3, state), updated_at = $4 WHERE id = $1",
        &[&id, &title, &state, &crate::time::now_rfc3339()],
    )
    .await?;
    if let (true, Some(title)) = (untitled, title) {
        let digest = chain::title_digest(title);
        add_links(
            &tx,
            id,
            [(chain::TITLE, "title", digest, "")],
            store.sealer_ref(),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn delete(store: &PgStore, id: &str) -> Result<bool, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    match lock_and_fence(store, &tx, id).await {
        Err(StoreError::UnknownSession(_)) => return Ok(false),
        other => other?,
    }
    tx.execute("DELETE FROM archival WHERE conversation_id = $1", &[&id])
        .await?;
    let n = tx
        .execute("DELETE FROM sessions WHERE id = $1", &[&id])
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

async fn chain_tail(tx: &Transaction<'_>, session: &str) -> Result<(u64, String), StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT seq, hash FROM chain WHERE session_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .await?;
    let row = tx.query_opt(&stmt, &[&session]).await?;
    Ok(row.map_or((0, chain::GENESIS.to_string()), |r| {
        (r.get::<_, i64>(0) as u64, r.get(1))
    }))
}

/// Append links to `session`'s chain (inside the caller's transaction),
/// and seal its new head with `sealer`.
async fn add_links<'a>(
    tx: &Transaction<'_>,
    session: &str,
    items: impl IntoIterator<Item = (&'a str, &'a str, String, &'a str)>,
    sealer: Option<&chain::Sealer>,
) -> Result<(), StoreError> {
    let links = chain::extend(chain_tail(tx, session).await?, items);
    for link in &links {
        insert_link(tx, session, link).await?;
    }
    if let (Some(sealer), Some(last)) = (sealer, links.last()) {
        put_seal(tx, session, &sealer.seal(session, &last.hash)).await?;
    }
    Ok(())
}

async fn put_seal(
    tx: &Transaction<'_>,
    session: &str,
    seal: &chain::Seal,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO seals (session_id, head, host, mac) VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO UPDATE SET head = $2, host = $3, mac = $4",
        &[&session, &seal.head, &seal.host, &seal.mac],
    )
    .await?;
    Ok(())
}

/// The seal on `session`'s chain head.
pub async fn seal(store: &PgStore, session: &str) -> Result<Option<chain::Seal>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT head, host, mac FROM seals WHERE session_id = $1",
            &[&session],
        )
        .await?;
    Ok(row.map(|r| chain::Seal {
        head: r.get(0),
        host: r.get(1),
        mac: r.get(2),
    }))
}

async fn insert_link(
    tx: &Transaction<'_>,
    session: &str,
    l: &chain::Link,
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO chain (session_id, seq, kind, subject, digest, detail, hash) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &session,
            &(l.seq as i64),
            &l.kind,
            &l.subject,
            &l.digest,
            &l.detail,
            &l.hash,
        ],
    )
    .await?;
    Ok(())
}

async fn insert_turns(
    tx: &Transaction<'_>,
    session: &str,
    turns: &[StoredTurn],
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO turns (id, session_id, timestamp, kind, body) VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    for t in turns {
        tx.execute(&stmt, &[&t.id, &session, &t.timestamp, &t.kind, &t.body])
            .await?;
    }
    Ok(())
}

async fn insert_records(
    tx: &Transaction<'_>,
    session: &str,
    records: &[StoredRecord],
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO recordings (session_id, seq, kind, size, body) VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    for r in records {
        let packed = packing::compress(r.body.as_bytes())
            .map_err(|e| StoreError::Postgres(format!("cannot compress a recording entry: {e}")))?;
        tx.execute(
            &stmt,
            &[
                &session,
                &(r.seq as i64),
                &r.kind,
                &(r.body.len() as i64),
                &packed,
            ],
        )
        .await?;
    }
    Ok(())
}

pub async fn append(
    store: &PgStore,
    session: &str,
    turns: &[StoredTurn],
    records: &[NewRecord],
) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    lock_and_fence(store, &tx, session).await?;
    insert_turns(&tx, session, turns).await?;
    let stmt = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM recordings WHERE session_id = $1")
        .await?;
    let last: i64 = tx.query_one(&stmt, &[&session]).await?.get(0);
    let records = packing::numbered(last as u64, records);
    insert_records(&tx, session, &records).await?;
    let subjects: Vec<String> = records.iter().map(chain::record_subject).collect();
    add_links(
        &tx,
        session,
        chain::append_items(turns, &records, &subjects),
        store.sealer_ref(),
    )
    .await?;
    let stmt = tx
        .prepare_cached("UPDATE sessions SET updated_at = $2 WHERE id = $1")
        .await?;
    tx.execute(&stmt, &[&session, &crate::time::now_rfc3339()])
        .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn records(store: &PgStore, session: &str) -> Result<Vec<StoredRecord>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT seq, kind, size, body FROM recordings WHERE session_id = $1 ORDER BY seq",
            &[&session],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| packing::unpack(r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}

pub async fn recording_size(store: &PgStore, session: &str) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let size: i64 = client
        .query_one(
            "SELECT COALESCE(SUM(size), 0)::bigint FROM recordings WHERE session_id = $1",
            &[&session],
        )
        .await?
        .get(0);
    Ok(size as u64)
}

pub async fn turns(store: &PgStore, session: &str) -> Result<Vec<StoredTurn>, StoreError> {
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(
            "SELECT id, timestamp, kind, body FROM turns WHERE session_id = $1 ORDER BY seq",
        )
        .await?;
    let rows = client.query(&stmt, &[&session]).await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredTurn {
            id: r.get(0),
            timestamp: r.get(1),
            kind: r.get(2),
            body: r.get(3),
        })
        .collect())
}

pub async fn chain(store: &PgStore, session: &str) -> Result<Vec<chain::Link>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT seq, kind, subject, digest, detail, hash FROM chain WHERE session_id = $1 ORDER BY seq",
            &[&session],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| chain::Link {
            seq: r.get::<_, i64>(0) as u64,
            kind: r.get(1),
            subject: r.get(2),
            digest: r.get(3),
            detail: r.get(4),
            hash: r.get(5),
        })
        .collect())
}

pub async fn import(store: &PgStore, export: &export::SessionExport) -> Result<(), StoreError> {
    let s = &export.session;
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let exists = tx
        .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&s.id])
        .await?;
    if exists.is_some() {
        return Err(StoreError::Exists(s.id.clone()));
    }
    if let Some(turn) = export.turns.first() {
        let holder = tx
            .query_opt("SELECT session_id FROM turns WHERE id = $1", &[&turn.id])
            .await?;
        if let Some(holder) = holder {
            return Err(StoreError::TurnsExist(holder.get(0)));
        }
    }
    insert_session(&tx, s, &store.holder.host).await?;
    insert_turns(&tx, &s.id, &export.turns).await?;
    insert_records(&tx, &s.id, &export.records).await?;
    for link in &export.links {
        insert_link(&tx, &s.id, link).await?;
    }
    if let Some(sealer) = store.sealer_ref() {
        put_seal(&tx, &s.id, &sealer.seal(&s.id, &export.head())).await?;
    }
    for block in &export.summaries {
        super::archive::insert_block(&tx, &s.id, block).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn acquire_lease(store: &PgStore, session: &str) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // Two hosts taking one session at once take turns on its row: the
    // second sees the first's lease. A lease this store lost may be
    // taken again once free (the caller reads the history anew).
    lock_and_check(store, &tx, session, false).await?;
    let h = &store.holder;
    tx.execute(
        &format!(
            "INSERT INTO leases (session_id, holder, host, pid, process, expires_ms) VALUES ($1, $2, $3, $4, $5, {NOW_MS} + $6) ON CONFLICT (session_id) DO UPDATE SET holder = EXCLUDED.holder, host = EXCLUDED.host, pid = EXCLUDED.pid, process = EXCLUDED.process, expires_ms = EXCLUDED.expires_ms"
        ),
        &[&session, &h.id, &h.host, &(h.pid as i64), &h.process, &(store.ttl.as_millis() as i64)],
    )
    .await?;
    tx.execute(
        "UPDATE sessions SET host = $2 WHERE id = $1",
        &[&session, &h.host],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn release_lease(store: &PgStore, session: &str) -> Result<(), StoreError> {
    let client = store.client().await?;
    client
        .execute(
            "DELETE FROM leases WHERE session_id = $1 AND holder = $2",
            &[&session, &store.holder.id],
        )
        .await?;
    Ok(())
}

pub async fn leases(store: &PgStore) -> Result<Vec<LeaseInfo>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {LEASE_COLUMNS}, expires_ms - {NOW_MS} FROM leases ORDER BY session_id"
            ),
            &[],
        )
        .await?;
    Ok(rows.iter().map(lease_row).collect())
}

/// The renewal of one store's leases: one statement for all of them.
pub fn renewal(
    pool: Pool,
    handle: tokio::runtime::Handle,
    holder: String,
    ttl: Duration,
) -> crate::lease::Renew {
    Box::new(move |sessions: &[String]| {
        let _context = handle.enter();
        futures::executor::block_on(async {
            let client = pool.get().await.map_err(|e| e.to_string())?;
            let rows = client
                .query(
                    &format!(
                        "UPDATE leases SET expires_ms = {NOW_MS} + $3 WHERE holder = $1 AND session_id = ANY($2) RETURNING session_id"
                    ),
                    &[&holder, &sessions, &(ttl.as_millis() as i64)],
                )
                .await
                .map_err(|e| super::describe(&e))?;
            Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
        })
    })
}

/// Replace compacted turns and summary blocks in one transaction, fenced
/// by the session's lease and signed off in its chain.
pub async fn compact(
    store: &PgStore,
    conversation: &str,
    write: &CompactionWrite,
) -> Result<(), StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    lock_and_fence(store, &tx, conversation).await?;
    if !write.delete_turns.is_empty() {
        // The sign-off: what it removed (as the chain knew it) and what
        // replaced it.
        let rows = tx
            .query(
                "SELECT subject, digest FROM chain WHERE session_id = $1 AND kind = 'turn' AND subject = ANY($2)",
                &[&conversation, &write.delete_turns],
            )
            .await?;
        let removed: Vec<(String, String)> = write
            .delete_turns
            .iter()
            .map(|id| {
                let digest = rows
                    .iter()
                    .find(|r| r.get::<_, &str>(0) == id)
                    .map(|r| r.get::<_, String>(1))
                    .unwrap_or_default();
                (id.clone(), digest)
            })
            .collect();
        let sign_off = chain::SignOff::compaction(&removed, &write.add_blocks);
        add_links(&tx, conversation, [sign_off.item()], store.sealer_ref()).await?;
    }
    for block in &write.add_blocks {
        super::archive::insert_block(&tx, conversation, block).await?;
    }
    tx.execute(
        "DELETE FROM archival WHERE id = ANY($1) AND conversation_id = $2",
        &[&write.delete_blocks, &conversation],
    )
    .await?;
    tx.execute(
        "DELETE FROM turns WHERE id = ANY($1) AND session_id = $2",
        &[&write.delete_turns, &conversation],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
