//! The session store: sessions, their turns in order, recordings, hash
//! chains, archival memory (compaction batches) with a full-text index and
//! vectors, the bridge's event streams, and the lease that lets one host
//! at a time drive a session. SQLite by default (bundled: nothing to
//! install, one file in the user's data directory); PostgreSQL when
//! `[store] url` names one, so many hosts share one history. Everything
//! goes through [`Store`]; both backends apply the same numbered
//! migrations.
//!
//! Durability: every write is one transaction, committed before the call
//! returns (survives the process being killed at any moment).

use sandcrab_core::{terminal_safe, time, user_files};
use sandcrab_kept as kept;
pub mod tls;

mod bm25;
pub mod chain;
pub mod copy;
pub mod export;
pub mod lease;
pub mod location;
mod packing;
mod postgres;
mod private;
mod records;
mod roles;
mod schema;
mod sqlite;

use std::path::{Path, PathBuf};

pub use lease::{Holder, LeaseInfo};
pub use location::{StoreLocation, open};
pub use postgres::{PgSettings, PgStore};
pub use records::{
    ArchivalBlock, CompactionWrite, NewBlock, NewRecord, RecordingMode, SessionRecord,
    StoredRecord, StoredState, StoredTurn,
};
pub use roles::{ArchiveStore, EventStore, LeaseStore, SessionStore, Store};
pub use sqlite::SqliteStore;

/// How many migrations the PostgreSQL schema has (its latest version).
pub fn postgres_migrations() -> usize {
    postgres::MIGRATIONS_COUNT
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("session store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("session store (PostgreSQL): {0}")]
    Postgres(String),
    #[error(
        "session {session} is being driven by {host} (process {pid}); its lease runs until {until} and is renewed while that process lives (a host that died loses it within {ttl_secs} s): wait, or stop it there"
    )]
    Leased {
        session: String,
        host: String,
        pid: u32,
        until: String,
        ttl_secs: u64,
    },
    /// This host took the session's lease and lost it since.
    #[error(
        "this host no longer drives session {session}: its lease lapsed (the process was frozen or cut off from the store) and another host took the session over; nothing more is written to it from here (resume it again to go on from its stored history)"
    )]
    LeaseLost { session: String },
    #[error("no session with id '{0}' (see `sandcrab sessions list`)")]
    UnknownSession(String),
    /// An id prefix more than one session has.
    #[error("'{given}' starts the ids of {count} sessions: {candidates}; give more of the id")]
    AmbiguousSession {
        given: String,
        count: usize,
        candidates: String,
    },
    #[error(
        "session {id} belongs to the workspace {session_workspace}, not to {workspace}: its conversation stays with its workspace (resume it there: `sandcrab chat --workspace {session_workspace} --resume {id}`)"
    )]
    OtherWorkspace {
        id: String,
        session_workspace: String,
        workspace: String,
    },
    #[error(
        "a session with id '{0}' is already in this store: `sandcrab sessions verify {0}` compares it, `sandcrab sessions delete {0}` makes room"
    )]
    Exists(String),
    #[error(
        "its turns are already in this store, in session '{0}': the session was imported here before, or came from here"
    )]
    TurnsExist(String),
}

/// How a store is opened: the host name its leases carry, how long they
/// last unrenewed, and the key its chain heads are sealed with.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// `[store] host` (None: the machine's host name).
    pub host: Option<String>,
    pub lease_ttl: std::time::Duration,
    /// This host's chain key: every chain head it writes is sealed with
    /// it (None: chains are not sealed).
    pub chain_key: Option<[u8; 32]>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            host: None,
            lease_ttl: lease::DEFAULT_TTL,
            chain_key: None,
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("host", &self.host)
            .field("lease_ttl", &self.lease_ttl)
            .field("chain_key", &self.chain_key.map(|_| "<set>"))
            .finish()
    }
}

/// The chain key of this host: `DATA/sandcrab/keys/chain.key`, created on
/// first use (None when there is no data folder or it cannot be made).
pub fn chain_key() -> Option<[u8; 32]> {
    let path = crate::user_files::keys_dir()?.join("chain.key");
    match crate::kept::host_key(&path) {
        Ok(key) => Some(key),
        Err(why) => {
            tracing::warn!(
                "sessions are not sealed: the chain key {}: {why}",
                path.display()
            );
            None
        }
    }
}

/// One kept event of an event stream (the HTTP bridge's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub id: u64,
    pub event: String,
    /// JSON.
    pub data: String,
}

/// Whether `id` is a session id as sandcrab makes them: a UUID, written
/// the one way (lowercase, hyphenated). Only such an id is ever used to
/// name a folder or file; one from outside (an import, a flag) that is not
/// is refused, never used as a path.
pub fn is_session_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

/// The files of the database at `path`: the file itself and SQLite's
/// write-ahead log, shared-memory index and rollback journal beside it.
pub fn database_files(path: &Path) -> Vec<PathBuf> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    files
}

/// The default database file: `$XDG_DATA_HOME/sandcrab/sandcrab.db`, else
/// `~/.local/share/sandcrab/sandcrab.db`.
pub fn default_path() -> Option<PathBuf> {
    Some(crate::user_files::data_dir()?.join("sandcrab.db"))
}
