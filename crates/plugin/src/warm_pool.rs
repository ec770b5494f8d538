//! The idle instances of plugins whose manifest allows reuse
//! (`[limits] reuse = true`) and whose operator did not refuse it.
//!
//! Such a plugin's tool calls run in an instance kept from an earlier call
//! of the same session when one is idle, instead of a fresh store and
//! instance per call. The instance keeps its grants and limits (its
//! memory budget counts for its whole life); what the host keeps per call
//! (the clock, the program log, the live output, the log budget) starts
//! over at each call. An instance whose call failed in any way — a trap, a
//! timeout, the memory limit, an invalid result, a cancelled call — is
//! dropped, never called again. Idle instances are few (per plugin and
//! across the host), are dropped after [`IDLE_LIMIT`], and one whose
//! memory grew past [`KEEP_MEMORY_LIMIT`] is not kept.
//!
//! What can pass between two calls of one reused instance is what the
//! plugin itself kept: its memory and the handles it holds, all inside the
//! same plugin's sandbox, of the same session. Nothing of another plugin
//! or another session is ever reachable.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;

use super::state::HostState;
use super::wit::ToolInstance;

/// Idle instances kept across the whole host (each holds a slot of the
/// engine's instance pool and its memory).
pub const HOST_WARM_INSTANCES: usize = 16;

/// Idle instances kept per plugin, at most (and at most its
/// `max_instances`).
pub const PLUGIN_WARM_INSTANCES: usize = 4;

/// An idle instance older than this is dropped instead of called.
pub const IDLE_LIMIT: Duration = Duration::from_secs(300);

/// An instance whose memory grew past this is not kept idle (a call that
/// read a huge file should not pin that memory for later).
pub const KEEP_MEMORY_LIMIT: usize = 128 << 20;

/// An instance left holding more resources than this after a call (a
/// guest that never closes its files, each a descriptor of the host
/// process) is not kept: its handles go with it.
pub const KEEP_RESOURCE_LIMIT: usize = 64;

/// A plugin's idle instances.
pub(super) struct WarmInstances {
    idle: Mutex<Vec<Warm>>,
    keep: usize,
    /// The host-wide allowance of idle instances.
    budget: Arc<Semaphore>,
}

/// One instance kept for reuse, with its store.
pub(super) struct Warm {
    pub(super) session: String,
    pub(super) store: Store<HostState>,
    pub(super) instance: Box<dyn ToolInstance>,
    pub(super) idle_since: Instant,
    /// Its share of the host-wide allowance.
    pub(super) _allowance: OwnedSemaphorePermit,
}

/// See [`WarmInstances::checkout`].
pub(super) enum Checkout {
    /// An idle instance of the session.
    Idle(Warm),
    /// None idle; this share of the allowance keeps a new one.
    Room(OwnedSemaphorePermit),
}

impl WarmInstances {
    /// Idle instances for a plugin that may run `max_instances` calls at
    /// once, under the host-wide `budget`.
    pub(super) fn new(max_instances: u32, budget: Arc<Semaphore>) -> Self {
        WarmInstances {
            idle: Mutex::new(Vec::new()),
            keep: (max_instances as usize).clamp(1, PLUGIN_WARM_INSTANCES),
            budget,
        }
    }

    /// The most recently used idle instance of `session`, if any.
    fn take(&self, session: &str) -> Option<Warm> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|w| w.idle_since.elapsed() < IDLE_LIMIT);
        let newest = idle.iter().rposition(|w| w.session == session)?;
        Some(idle.remove(newest))
    }

    /// Keep `warm` for the next call of its session, dropping the oldest
    /// idle instance if the plugin already keeps as many as it may.
    pub(super) fn give_back(&self, mut warm: Warm) {
        if warm.store.data().memory_bytes() > KEEP_MEMORY_LIMIT
            || warm.store.data_mut().open_resources() > KEEP_RESOURCE_LIMIT
        {
            return;
        }
        warm.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= self.keep {
            idle.remove(0);
        }
        idle.push(warm);
    }

    /// Where a call of `session` runs: its idle instance, else room (in
    /// the host-wide allowance) to keep a new one; None when there is
    /// neither, and the call runs in a fresh instance like any other.
    pub(super) fn checkout(&self, session: &str) -> Option<Checkout> {
        match self.take(session) {
            Some(kept) => Some(Checkout::Idle(kept)),
            None => self
                .budget
                .clone()
                .try_acquire_owned()
                .ok()
                .map(Checkout::Room),
        }
    }

    /// How many instances are idle now.
    pub(super) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Resources (open files, streams, …) the idle instances hold.
    pub(super) fn idle_resources(&self) -> usize {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.iter_mut()
            .map(|w| w.store.data_mut().open_resources())
            .sum()
    }
}
