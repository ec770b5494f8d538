//! The schema, as numbered migrations applied in order (the database's
//! `user_version` says how many ran). A released migration never changes;
//! add the next one.

/// Migration N (1-based) is `MIGRATIONS[N - 1]`.
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, turns, archival memory and its full-text index.
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
        state       TEXT NOT NULL
    );
    CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at);
    CREATE TABLE turns (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        id          TEXT NOT NULL UNIQUE,
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        timestamp   TEXT NOT NULL,
        kind        TEXT NOT NULL,
        body        TEXT NOT NULL
    );
    CREATE INDEX turns_by_session ON turns (session_id, seq);
    CREATE TABLE archival (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL,
        label           TEXT NOT NULL,
        content         TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        embedding       BLOB
    );
    CREATE INDEX archival_by_conversation ON archival (conversation_id, id);
    CREATE VIRTUAL TABLE archival_fts USING fts5 (content, content = 'archival', content_rowid = 'id');
    CREATE TRIGGER archival_added AFTER INSERT ON archival BEGIN
        INSERT INTO archival_fts (rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER archival_deleted AFTER DELETE ON archival BEGIN
        INSERT INTO archival_fts (archival_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    "#,
    // 2: the HTTP bridge's event streams, so a client reconnecting after a
    // restart of the bridge gets what it missed.
    r#"
    CREATE TABLE events (
        stream  TEXT NOT NULL,
        id      INTEGER NOT NULL,
        event   TEXT NOT NULL,
        data    TEXT NOT NULL,
        PRIMARY KEY (stream, id)
    ) WITHOUT ROWID;
    "#,
    // 3: every session's hash chain: a link per stored turn and per
    // compaction, each hashed with the one before (tamper evidence).
    r#"
    CREATE TABLE chain (
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        kind        TEXT NOT NULL,
        subject     TEXT NOT NULL,
        digest      TEXT NOT NULL,
        detail      TEXT NOT NULL,
        hash        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    "#,
    // 4: every session's flight recording: what the model and the tools
    // answered, in order, each entry zstd-compressed JSON (its digest is
    // in the chain).
    r#"
    CREATE TABLE recordings (
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        kind        TEXT NOT NULL,
        size        INTEGER NOT NULL,
        body        BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    "#,
    // 5: what each archived block's vector was made with (`embedding`
    // holds little-endian f32s); only vectors of the configured model and
    // length are compared.
    r#"
    ALTER TABLE archival ADD COLUMN embedding_model TEXT;
    ALTER TABLE archival ADD COLUMN embedding_dims INTEGER;
    "#,
    // 6: which host last took each session, and the lease that lets one
    // holder at a time drive it (expiry in milliseconds since the epoch).
    r#"
    ALTER TABLE sessions ADD COLUMN host TEXT NOT NULL DEFAULT '';
    CREATE TABLE leases (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        holder      TEXT NOT NULL,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        process     TEXT NOT NULL,
        expires_ms  INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 7: each session's seal: the host's chain key over its chain head
    // (a chain rewritten without the key no longer ends at the seal).
    r#"
    CREATE TABLE seals (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        head        TEXT NOT NULL,
        host        TEXT NOT NULL,
        mac         TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    /// The tables and columns each migration makes, by name: `CREATE
    /// TABLE t (c …, …)` and `ALTER TABLE t ADD COLUMN c …` (indexes,
    /// triggers and full-text machinery differ by design).
    fn shape(sql: &str) -> BTreeMap<String, Vec<String>> {
        let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        for statement in sql.split(';') {
            let w = words(statement);
            match w.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["CREATE", "TABLE", name, ..] => {
                    let name = name.trim_end_matches('(').to_string();
                    let open = statement.find('(').expect("columns");
                    let body = &statement[open + 1..statement.rfind(')').expect("columns")];
                    let mut columns = Vec::new();
                    let mut depth = 0;
                    let mut current = String::new();
                    for ch in body.chars() {
                        match ch {
                            '(' => depth += 1,
                            ')' => depth -= 1,
                            ',' if depth == 0 => {
                                columns.push(std::mem::take(&mut current));
                                continue;
                            }
                            _ => {}
                        }
                        current.push(ch);
                    }
                    columns.push(current);
                    // A column the database fills for its own machinery
                    // (PostgreSQL's insertion order and stored full-text
                    // vector) is not data; a generated key is.
                    let machinery =
                        |c: &str| c.contains("GENERATED ALWAYS") && !c.contains("PRIMARY KEY");
                    let names = columns
                        .iter()
                        .filter(|c| !machinery(c))
                        .filter_map(|c| c.split_whitespace().next().map(str::to_string))
                        .filter(|c| {
                            !["PRIMARY", "UNIQUE", "FOREIGN", "CHECK"].contains(&c.as_str())
                        })
                        .collect();
                    tables.insert(name, names);
                }
                ["ALTER", "TABLE", name, "ADD", "COLUMN", column, ..] => {
                    tables
                        .entry(name.to_string())
                        .or_default()
                        .push(column.to_string());
                }
                _ => {}
            }
        }
        tables
    }

    /// Both backends apply the same numbered migrations: the same count,
    /// and migration N makes the same tables and columns in each, so a
    /// store copied from one to the other keeps every field.
    #[test]
    fn both_backends_have_the_same_migrations() {
        let sqlite = super::MIGRATIONS;
        let postgres = crate::postgres::schema::MIGRATIONS;
        assert_eq!(sqlite.len(), postgres.len(), "migration counts differ");
        for (n, (a, b)) in sqlite.iter().zip(postgres).enumerate() {
            let (a, b) = (shape(a), shape(b));
            assert!(!a.is_empty(), "migration {} makes nothing", n + 1);
            assert_eq!(a, b, "migration {} differs", n + 1);
        }
    }
}
