//! The PostgreSQL schema: the same numbered migrations as SQLite's
//! (`store/schema.rs`), in PostgreSQL's dialect. `sandcrab_schema` holds
//! how many ran; hosts migrating at once take turns (an advisory lock).

/// Migration N (1-based) is `MIGRATIONS[N - 1]`; the same N changes the
/// same thing as SQLite's migration N.
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, turns, archival memory and its full-text index (a
    // stored tsvector, searched with a GIN index, ranked by BM25 in the
    // host).
    r#"
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        workspace   TEXT NOT NULL,
        provider    TEXT NOT NULL,
        profile     TEXT NOT NULL,
        model       TEXT NOT NULL,
        title       TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        state       TEXT NOT NULL,
        created     BIGINT GENERATED ALWAYS AS IDENTITY
    );
    CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at);
    CREATE TABLE turns (
        seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id          TEXT NOT NULL UNIQUE,
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        timestamp   TEXT NOT NULL,
        kind        TEXT NOT NULL,
        body        TEXT NOT NULL
    );
    CREATE INDEX turns_by_session ON turns (session_id, seq);
    CREATE TABLE archival (
        id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        label           TEXT NOT NULL,
        content         TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        embedding       BYTEA,
        words           TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
    );
    CREATE INDEX archival_by_conversation ON archival (conversation_id, id);
    CREATE INDEX archival_words ON archival USING GIN (words);
    "#,
    // 2: the HTTP bridge's event streams.
    r#"
    CREATE TABLE events (
        stream  TEXT NOT NULL,
        id      BIGINT NOT NULL,
        event   TEXT NOT NULL,
        data    TEXT NOT NULL,
        PRIMARY KEY (stream, id)
    );
    "#,
    // 3: every session's hash chain.
    r#"
    CREATE TABLE chain (
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         BIGINT NOT NULL,
        kind        TEXT NOT NULL,
        subject     TEXT NOT NULL,
        digest      TEXT NOT NULL,
        detail      TEXT NOT NULL,
        hash        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    "#,
    // 4: every session's flight recording (zstd-compressed JSON).
    r#"
    CREATE TABLE recordings (
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         BIGINT NOT NULL,
        kind        TEXT NOT NULL,
        size        BIGINT NOT NULL,
        body        BYTEA NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    "#,
    // 5: what each archived block's vector was made with.
    r#"
    ALTER TABLE archival ADD COLUMN embedding_model TEXT;
    ALTER TABLE archival ADD COLUMN embedding_dims INTEGER;
    "#,
    // 6: which host last took each session, and its lease (expiry in
    // milliseconds since the epoch, by the database's clock).
    r#"
    ALTER TABLE sessions ADD COLUMN host TEXT NOT NULL DEFAULT '';
    CREATE TABLE leases (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        holder      TEXT NOT NULL,
        host        TEXT NOT NULL,
        pid         BIGINT NOT NULL,
        process     TEXT NOT NULL,
        expires_ms  BIGINT NOT NULL
    );
    CREATE INDEX leases_by_holder ON leases (holder);
    "#,
    // 7: each session's seal (see the SQLite schema's 7).
    r#"
    CREATE TABLE seals (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        head        TEXT NOT NULL,
        host        TEXT NOT NULL,
        mac         TEXT NOT NULL
    );
    "#,
];

/// Create the version table if needed and apply the migrations not yet
/// applied, in one transaction (all or none), one host at a time; the
/// version now.
pub async fn migrate(client: &mut tokio_postgres::Client) -> Result<u32, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // Any constant: every sandcrab host uses the same one.
    tx.execute("SELECT pg_advisory_xact_lock(7365616)", &[])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS sandcrab_schema (version INTEGER NOT NULL)")
        .await?;
    let row = tx
        .query_opt("SELECT version FROM sandcrab_schema", &[])
        .await?;
    let mut done = match row {
        Some(r) => r.get::<_, i32>(0) as usize,
        None => {
            tx.execute("INSERT INTO sandcrab_schema (version) VALUES (0)", &[])
                .await?;
            0
        }
    };
    // All under the one lock: a host that waited finds them applied.
    while done < MIGRATIONS.len() {
        tx.batch_execute(MIGRATIONS[done]).await?;
        done += 1;
        tx.execute("UPDATE sandcrab_schema SET version = $1", &[&(done as i32)])
            .await?;
    }
    tx.commit().await?;
    Ok(done as u32)
}
