//! The store by role: each caller takes the trait of what it does with
//! the store, and [`Store`] is all of them.

use crate::{
    ArchivalBlock, CompactionWrite, Holder, LeaseInfo, NewBlock, NewRecord, SessionRecord,
    StoreError, StoredEvent, StoredRecord, StoredTurn, chain, export,
};

/// Sessions, their turns and recordings, their chains and seals: what the agent
/// keeps of a conversation and `sessions` lists, verifies, exports and imports.
pub trait SessionStore: Send + Sync {
    /// Record a new session.
    fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// One session.
    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Sessions, most recently updated first; only `workspace`'s if given.
    fn sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionRecord>, StoreError>;
    /// The whole id of the one session `given` names: its id, or the start
    /// of its id that no other session's has (`9a171cc7`).
    fn resolve_id(&self, given: &str) -> Result<String, StoreError> {
        if given.is_empty() {
            return Err(StoreError::UnknownSession(given.to_string()));
        }
        if self.session(given)?.is_some() {
            return Ok(given.to_string());
        }
        let found: Vec<SessionRecord> = self
            .sessions(None)?
            .into_iter()
            .filter(|s| s.id.starts_with(given))
            .collect();
        match found.as_slice() {
            [] => Err(StoreError::UnknownSession(given.to_string())),
            [one] => Ok(one.id.clone()),
            many => Err(StoreError::AmbiguousSession {
                given: given.to_string(),
                count: many.len(),
                candidates: many
                    .iter()
                    .take(5)
                    .map(|s| match &s.title {
                        Some(title) => format!("{} ({title})", s.id),
                        None => s.id.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }
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
    /// A session's hash chain, in order (see [`chain`]).
    fn chain(&self, session: &str) -> Result<Vec<chain::Link>, StoreError>;
    /// The seal on `session`'s chain head (None: unsealed).
    fn seal(&self, session: &str) -> Result<Option<chain::Seal>, StoreError>;
    /// The sealer this store seals with (None: no chain key).
    fn sealer(&self) -> Option<&chain::Sealer>;
    /// Load an exported session as it was (its turns, chain and summary
    /// batches, not re-chained), in one transaction.
    fn import_session(&self, session: &export::SessionExport) -> Result<(), StoreError>;
}

/// Archival memory: compacted turns kept as blocks, searched by words (BM25)
/// and by meaning (vectors); and the compaction that moves turns there.
pub trait ArchiveStore: Send + Sync {
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
    /// Hand each vector of [`ArchiveStore::embeddings`] to `visit` in place (no
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
}

/// The bridge's event streams, kept so a client reconnecting after a restart
/// gets what it missed.
pub trait EventStore: Send + Sync {
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
    /// Names of event streams other processes appended to, as they do
    /// (None: this backend does not tell; a reader polls the store).
    fn event_notices(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
}

/// Leases: one holder at a time drives a session (hosts of a fleet, or
/// processes on one machine).
pub trait LeaseStore: Send + Sync {
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
}

/// A whole store: every role, and where it is. Callers that need one
/// role take that role's trait (`&dyn EventStore`, `&dyn ArchiveStore`).
pub trait Store: SessionStore + ArchiveStore + EventStore + LeaseStore {
    /// Where it is, for messages (`sqlite:PATH`, `postgres://user@host/db`;
    /// never a password), and its schema version.
    fn describe(&self) -> (String, u32);
}
