//! Warm instances, for plugins whose manifest allows reuse
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

use super::clock::CallClock;
use super::loaded::{LoadedPlugin, ToolCallError};
use super::state::{CallParts, HostState};
use super::types::{ToolCallContext, ToolOutput};
use super::wit::{GuestContext, ToolInstance};

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

/// A plugin's idle instances.
pub(super) struct WarmInstances {
    idle: Mutex<Vec<Warm>>,
    keep: usize,
    /// The host-wide allowance of idle instances.
    budget: Arc<Semaphore>,
}

/// One instance kept for reuse, with its store.
struct Warm {
    session: String,
    store: Store<HostState>,
    instance: Box<dyn ToolInstance>,
    idle_since: Instant,
    /// Its share of the host-wide allowance.
    _allowance: OwnedSemaphorePermit,
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
    fn give_back(&self, mut warm: Warm) {
        if warm.store.data().memory_bytes() > KEEP_MEMORY_LIMIT {
            return;
        }
        warm.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= self.keep {
            idle.remove(0);
        }
        idle.push(warm);
    }

    /// How many instances are idle now.
    pub(super) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl LoadedPlugin {
    /// Run a tool call in a warm instance of the caller's session (or a
    /// new one, kept afterwards when the host-wide allowance has room).
    pub(super) async fn call_warm(
        &self,
        warm: &WarmInstances,
        mut permit: OwnedSemaphorePermit,
        (name, args_json): (&str, &str),
        guest_ctx: &GuestContext,
        ctx: &ToolCallContext,
        live: Option<crate::process::LiveOutput>,
    ) -> Result<ToolOutput, ToolCallError> {
        let guest = self.tool_guest()?;
        let limit = self.call_limit();
        let clock = CallClock::new(limit);
        let parts = CallParts {
            live_output: live,
            clock: clock.clone(),
            working_dir: Some(guest_ctx.working_dir.clone()),
            // A reused store is always called on the caller's task.
            on_own_thread: false,
            programs: ctx.programs.clone(),
        };
        let mut instance = match warm.take(&ctx.session_id) {
            Some(mut kept) => {
                kept.store.data_mut().begin_call(parts);
                kept.store.set_epoch_deadline(1);
                kept
            }
            None => {
                let Ok(allowance) = warm.budget.clone().try_acquire_owned() else {
                    // No room to keep one more: an ordinary fresh call.
                    let call = self.fresh_instance_holding(
                        permit,
                        self.tool_call_setup(guest_ctx, parts.live_output, false, parts.programs),
                    )?;
                    let (name, args_json, guest_ctx) =
                        (name.to_string(), args_json.to_string(), guest_ctx.clone());
                    let result = self
                        .run_guest(call, ctx.detach.clone(), move |store| {
                            Box::pin(async move {
                                guest.call(store, &name, &args_json, &guest_ctx).await
                            })
                        })
                        .await?;
                    return Ok(result?);
                };
                let mut store = self.new_call_store(parts)?;
                let done = clock.bound(guest.instantiate(&mut store)).await;
                let instance = self.conclude(done, &store, limit)?;
                Warm {
                    session: ctx.session_id.clone(),
                    store,
                    instance,
                    idle_since: Instant::now(),
                    _allowance: allowance,
                }
            }
        };
        let Warm {
            store, instance: i, ..
        } = &mut instance;
        let work = clock.bound(i.call(store, name, args_json, guest_ctx));
        let done = self.detachable(work, ctx.detach.clone(), &mut permit).await;
        let result = self.conclude(done, &instance.store, limit)?;
        // The call ended cleanly (a tool's own failure is a clean end): the
        // instance may serve the session's next call.
        warm.give_back(instance);
        Ok(result?)
    }
}
