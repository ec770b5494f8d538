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
mod schema;
mod sqlite;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use lease::{Holder, LeaseInfo};
pub use location::{StoreLocation, open};
pub use postgres::{PgSettings, PgStore};
pub use sqlite::SqliteStore;

/// How many migrations the PostgreSQL schema has (its latest version).
pub fn postgres_migrations() -> usize {
    postgres::MIGRATIONS_COUNT
}

/// How much is recorded (`[store] recording`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordingMode {
    /// Requests as they changed, every streamed event with its time.
    #[default]
    Full,
    /// Requests as digests of their messages, the final answer only.
    Digests,
    /// Nothing (the session cannot be replayed).
    Off,
}

impl std::str::FromStr for RecordingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(RecordingMode::Full),
            "digests" => Ok(RecordingMode::Digests),
            "off" => Ok(RecordingMode::Off),
            other => Err(format!(
                "recording = \"{other}\": use \"full\", \"digests\" or \"off\""
            )),
        }
    }
}

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    /// The workspace it worked in (host path).
    pub workspace: String,
    pub provider: String,
    pub profile: String,
    pub model: String,
    /// The first user input, shortened (set when it arrives).
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
    /// `active` or `closed`.
    pub state: String,
    /// Turns stored now (compacted turns are gone).
    pub turns: u64,
    /// The host that last took it (empty: not known).
    pub host: String,
}

/// One turn as stored: its id, time, kind, and the whole turn as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTurn {
    pub id: String,
    pub timestamp: String,
    /// `user`, `assistant`, `tool_results`, `steering` or `system`.
    pub kind: String,
    pub body: String,
}

/// One entry of a session's flight recording, as stored: its place, its
/// kind and its JSON (compressed in the database, plain here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Its place in the recording (1 for the first).
    pub seq: u64,
    pub kind: String,
    pub body: String,
}

/// A recording entry to append (the store numbers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub kind: String,
    pub body: String,
}

/// A block of archival memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivalBlock {
    pub id: i64,
    pub conversation_id: String,
    pub label: String,
    pub content: String,
    pub created_at: String,
}

/// A block to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBlock {
    pub label: String,
    pub content: String,
}

/// What one compaction writes, all or nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionWrite {
    /// Turns now summarized.
    pub delete_turns: Vec<String>,
    /// New summary batches.
    pub add_blocks: Vec<NewBlock>,
    /// Batches folded into a deeper one.
    pub delete_blocks: Vec<i64>,
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
    #[error("no session with id '{0}' (see `sandcrab sessions list --all`)")]
    UnknownSession(String),
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

/// Sessions, turns and archival memory.
pub trait Store: Send + Sync {
    /// Record a new session.
    fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// One session.
    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Sessions, most recently updated first; only `workspace`'s if given.
    fn sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionRecord>, StoreError>;
    /// Set a session's title (when still unset) and state.
    fn update_session(
        &self,
        id: &str,
        title: Option<&str>,
        state: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Delete a session, its turns and its archival memory; false if none.
    fn delete_session(&self, id: &str) -> Result<bool, StoreError>;
    /// Append turns, in order, in one transaction.
    fn append_turns(&self, session: &str, turns: &[StoredTurn]) -> Result<(), StoreError> {
        self.append(session, turns, &[])
    }
    /// Append turns and recording entries, in order, in one transaction
    /// (each chained).
    fn append(
        &self,
        session: &str,
        turns: &[StoredTurn],
        records: &[NewRecord],
    ) -> Result<(), StoreError>;
    /// A session's recording, in order.
    fn records(&self, session: &str) -> Result<Vec<StoredRecord>, StoreError>;
    /// Bytes of recording kept for a session (uncompressed).
    fn recording_size(&self, session: &str) -> Result<u64, StoreError>;
    /// The turns of a session, in order.
    fn turns(&self, session: &str) -> Result<Vec<StoredTurn>, StoreError>;
    /// Archival blocks of a conversation whose label starts with `prefix`,
    /// oldest first.
    fn archival(&self, conversation: &str, prefix: &str) -> Result<Vec<ArchivalBlock>, StoreError>;
    /// Add one archival block; its id.
    fn add_block(&self, conversation: &str, block: &NewBlock) -> Result<i64, StoreError>;
    /// Full-text search of archival memory (BM25, best first), within one
    /// conversation if given.
    fn search(
        &self,
        conversation: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError>;
    /// The archival blocks with these ids (any order; unknown ids left
    /// out).
    fn archival_blocks(&self, ids: &[i64]) -> Result<Vec<ArchivalBlock>, StoreError>;
    /// Keep `vector` (little-endian f32s, `dims` of them, made by
    /// `model`) for archival block `id`.
    fn set_embedding(
        &self,
        id: i64,
        model: &str,
        dims: usize,
        vector: &[u8],
    ) -> Result<(), StoreError>;
    /// Archival blocks (of one conversation if given) without a vector of
    /// `model` and `dims`: never embedded, or embedded by another model.
    /// Only blocks after id `after`, in id order (a cursor: a block the
    /// endpoint refuses does not stop the ones after it).
    fn unembedded(
        &self,
        conversation: Option<&str>,
        model: &str,
        dims: usize,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError>;
    /// The vectors of one conversation's blocks made by `model` with
    /// `dims`, with their block ids.
    fn embeddings(
        &self,
        conversation: &str,
        model: &str,
        dims: usize,
    ) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        self.scan_embeddings(conversation, model, dims, &mut |id, v| {
            out.push((id, v.to_vec()))
        })?;
        Ok(out)
    }
    /// Hand each vector of [`Store::embeddings`] to `visit` in place (no
    /// copy: a search compares thousands).
    fn scan_embeddings(
        &self,
        conversation: &str,
        model: &str,
        dims: usize,
        visit: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError>;
    /// Apply one compaction atomically.
    fn compact(&self, conversation: &str, write: &CompactionWrite) -> Result<(), StoreError>;
    /// Keep events of the event stream `stream` (one transaction).
    fn append_events(&self, stream: &str, events: &[StoredEvent]) -> Result<(), StoreError>;
    /// Events of `stream` with an id above `after`, in order, at most
    /// `limit`.
    fn events_after(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;
    /// The highest event id kept for `stream` (0: none).
    fn last_event_id(&self, stream: &str) -> Result<u64, StoreError>;
    /// A session's hash chain, in order (see [`chain`]).
    fn chain(&self, session: &str) -> Result<Vec<chain::Link>, StoreError>;
    /// The seal on `session`'s chain head (None: unsealed).
    fn seal(&self, session: &str) -> Result<Option<chain::Seal>, StoreError>;
    /// The sealer this store seals with (None: no chain key).
    fn sealer(&self) -> Option<&chain::Sealer>;
    /// Load an exported session as it was (its turns, chain and summary
    /// batches, not re-chained), in one transaction.
    fn import_session(&self, session: &export::SessionExport) -> Result<(), StoreError>;

    /// Who this store holds leases as (one holder per open store).
    fn holder(&self) -> &Holder;
    /// Take the lease of `session` (renewed from then on until released):
    /// [`StoreError::Leased`] naming the holder when another holds it.
    fn acquire_lease(&self, session: &str) -> Result<(), StoreError>;
    /// Give the lease of `session` back (nothing if this store does not
    /// hold it).
    fn release_lease(&self, session: &str) -> Result<(), StoreError>;
    /// Every lease kept, expired ones too.
    fn leases(&self) -> Result<Vec<LeaseInfo>, StoreError>;
    /// Whether this store took the lease of `session` and has seen
    /// another holder take it since (as of its last renewal).
    fn lease_lost(&self, _session: &str) -> bool {
        false
    }
    /// Names of event streams other processes appended to, as they do
    /// (None: this backend does not tell; a reader polls the store).
    fn event_notices(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
    /// Where it is, for messages (`sqlite:PATH`, `postgres://user@host/db`;
    /// never a password), and its schema version.
    fn describe(&self) -> (String, u32);
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
