//! [`Store`] on PostgreSQL: many hosts, one history. tokio-postgres with
//! a deadpool pool, on a small runtime of the store's own, so the
//! synchronous [`Store`] calls block only their caller (as SQLite's do)
//! and never need the caller's runtime.
//!
//! Semantics match SQLite's: every write one transaction, committed
//! before the call returns; a session's writes serialized by a row lock on
//! the session (which is also where its lease is checked: a host that lost
//! the lease cannot write); full-text search over a stored `tsvector`
//! ranked by BM25; events announced with `NOTIFY` so other hosts follow
//! live.

mod archive;
mod connect;
mod events;
pub(crate) mod schema;
mod sessions;

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

pub use connect::PgSettings;

use super::lease::{Holder, Keeper, LeaseInfo};
use super::{
    ArchivalBlock, ArchiveStore, CompactionWrite, EventStore, LeaseStore, NewBlock, NewRecord,
    SessionRecord, SessionStore, Store, StoreError, StoreOptions, StoredEvent, StoredRecord,
    StoredTurn, chain, export,
};

/// The PostgreSQL store.
pub struct PgStore {
    /// Runs the connections (taken on drop, shut down without waiting).
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    /// For the connection that listens for other hosts' events.
    config: tokio_postgres::Config,
    tls: connect::Tls,
    holder: Holder,
    ttl: Duration,
    keeper: Keeper,
    sealer: Option<chain::Sealer>,
    shown: String,
    version: u32,
    notices: OnceLock<tokio::sync::broadcast::Sender<String>>,
}

/// The database's clock, in milliseconds since the epoch (hosts' clocks
/// may disagree; leases are timed by one clock).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// How many migrations the schema has.
pub const MIGRATIONS_COUNT: usize = schema::MIGRATIONS.len();

impl PgStore {
    /// The sealer of the chains this store writes.
    pub(super) fn sealer_ref(&self) -> Option<&super::chain::Sealer> {
        self.sealer.as_ref()
    }

    /// Connect, check the schema and bring it up to date; `env` gives
    /// `password_env`'s value.
    pub fn open(
        settings: &PgSettings,
        options: &StoreOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, StoreError> {
        let shown = settings.shown();
        let open_err = |message: String| StoreError::Open {
            path: shown.clone().into(),
            message,
        };
        let (config, tls) = settings.resolve(env).map_err(&open_err)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sandcrab-pg")
            .enable_all()
            .build()
            .map_err(|e| open_err(format!("cannot start its runtime: {e}")))?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size.unwrap_or(16).max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(15)))
            .build()
            .map_err(|e| open_err(e.to_string()))?;
        let holder = Holder::this_process(options.host.as_deref());
        let mut store = PgStore {
            runtime: Some(runtime),
            pool,
            config,
            tls,
            sealer: options
                .chain_key
                .map(|key| super::chain::Sealer::new(key, &holder.host)),
            holder,
            ttl: options.lease_ttl,
            keeper: Keeper::new(),
            shown: shown.clone(),
            version: 0,
            notices: OnceLock::new(),
        };
        let version = store
            .run(async {
                let mut client = store.pool.get().await?;
                Ok(schema::migrate(&mut client).await?)
            })
            .map_err(|e| open_err(format!("{e}")))?;
        if version as usize > schema::MIGRATIONS.len() {
            return Err(open_err(format!(
                "its schema is version {version}, newer than this sandcrab knows ({}): upgrade sandcrab",
                schema::MIGRATIONS.len()
            )));
        }
        store.version = version;
        Ok(store)
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime
            .as_ref()
            .expect("runtime kept until drop")
            .handle()
    }

    /// Run `work` to completion on this thread, with the store's runtime
    /// as the context its connections and timers need.
    ///
    /// Free of the caller's cooperative budget: called from inside a tokio
    /// task that has used its budget, tokio's channels and semaphores
    /// would answer "not yet" to every poll until the task yields — which
    /// a thread blocked here never does (it would spin forever).
    fn run<T>(&self, work: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let _context = self.handle().enter();
        futures::executor::block_on(tokio::task::unconstrained(work))
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Dropping a runtime waits for its tasks, which is not allowed
        // inside another runtime: let them go.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::Postgres(describe(&e))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => StoreError::Postgres(format!("no connection: {other}")),
        }
    }
}

/// The server's own words when it said something, else the chain of
/// causes (the driver's top-level text is only "db error").
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

impl SessionStore for PgStore {
    fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.run(sessions::create(self, session))
    }

    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.run(sessions::one(self, id))
    }

    fn sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionRecord>, StoreError> {
        self.run(sessions::list(self, workspace))
    }

    fn update_session(
        &self,
        id: &str,
        title: Option<&str>,
        state: Option<&str>,
    ) -> Result<(), StoreError> {
        self.run(sessions::update(self, id, title, state))
    }

    fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        self.run(sessions::delete(self, id))
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
        self.run(sessions::append(self, session, turns, records))
    }

    fn records(&self, session: &str) -> Result<Vec<StoredRecord>, StoreError> {
        self.run(sessions::records(self, session))
    }

    fn recording_size(&self, session: &str) -> Result<u64, StoreError> {
        self.run(sessions::recording_size(self, session))
    }

    fn turns(&self, session: &str) -> Result<Vec<StoredTurn>, StoreError> {
        self.run(sessions::turns(self, session))
    }

    fn chain(&self, session: &str) -> Result<Vec<chain::Link>, StoreError> {
        self.run(sessions::chain(self, session))
    }

    fn seal(&self, session: &str) -> Result<Option<super::chain::Seal>, StoreError> {
        self.run(sessions::seal(self, session))
    }

    fn sealer(&self) -> Option<&super::chain::Sealer> {
        self.sealer.as_ref()
    }

    fn import_session(&self, session: &export::SessionExport) -> Result<(), StoreError> {
        self.run(sessions::import(self, session))
    }
}

impl ArchiveStore for PgStore {
    fn archival(&self, conversation: &str, prefix: &str) -> Result<Vec<ArchivalBlock>, StoreError> {
        self.run(archive::blocks(self, conversation, prefix))
    }

    fn add_block(&self, conversation: &str, block: &NewBlock) -> Result<i64, StoreError> {
        self.run(archive::add(self, conversation, block))
    }

    fn search(
        &self,
        conversation: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError> {
        self.run(archive::search(self, conversation, query, limit))
    }

    fn archival_blocks(&self, ids: &[i64]) -> Result<Vec<ArchivalBlock>, StoreError> {
        self.run(archive::by_ids(self, ids))
    }

    fn set_embedding(
        &self,
        id: i64,
        model: &str,
        dims: usize,
        vector: &[u8],
    ) -> Result<(), StoreError> {
        self.run(archive::set_embedding(self, id, model, dims, vector))
    }

    fn unembedded(
        &self,
        conversation: Option<&str>,
        model: &str,
        dims: usize,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ArchivalBlock>, StoreError> {
        self.run(archive::unembedded(
            self,
            conversation,
            model,
            dims,
            after,
            limit,
        ))
    }

    fn scan_embeddings(
        &self,
        conversation: &str,
        model: &str,
        dims: usize,
        visit: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        self.run(archive::scan_embeddings(
            self,
            conversation,
            model,
            dims,
            visit,
        ))
    }

    fn compact(&self, conversation: &str, write: &CompactionWrite) -> Result<(), StoreError> {
        self.run(sessions::compact(self, conversation, write))
    }
}

impl EventStore for PgStore {
    fn append_events(&self, stream: &str, events: &[StoredEvent]) -> Result<(), StoreError> {
        self.run(events::append(self, stream, events))
    }

    fn events_after(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.run(events::after(self, stream, after, limit))
    }

    fn last_event_id(&self, stream: &str) -> Result<u64, StoreError> {
        self.run(events::last_id(self, stream))
    }

    fn event_notices(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        Some(events::notices(self))
    }
}

impl LeaseStore for PgStore {
    fn holder(&self) -> &Holder {
        &self.holder
    }

    fn acquire_lease(&self, session: &str) -> Result<(), StoreError> {
        self.run(sessions::acquire_lease(self, session))?;
        let (pool, handle) = (self.pool.clone(), self.handle().clone());
        let (holder, ttl) = (self.holder.id.clone(), self.ttl);
        self.keeper.hold(
            session,
            ttl,
            Some(move || sessions::renewal(pool, handle, holder, ttl)),
        );
        Ok(())
    }

    fn lease_lost(&self, session: &str) -> bool {
        self.keeper.lost(session)
    }

    fn release_lease(&self, session: &str) -> Result<(), StoreError> {
        if !self.keeper.let_go(session) {
            return Ok(());
        }
        self.run(sessions::release_lease(self, session))
    }

    fn leases(&self) -> Result<Vec<LeaseInfo>, StoreError> {
        self.run(sessions::leases(self))
    }
}

impl Store for PgStore {
    fn describe(&self) -> (String, u32) {
        (self.shown.clone(), self.version)
    }
}
