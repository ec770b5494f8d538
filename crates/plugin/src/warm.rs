//! Tool calls in warm instances (see [`super::warm_pool`]): an idle
//! instance of the caller's session, or a new one kept afterwards.

use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use super::clock::CallClock;
use super::loaded::{LoadedPlugin, ToolCallError};
use super::state::CallParts;
use super::types::{ToolCallContext, ToolOutput};
use super::warm_pool::{Checkout, Warm};
use super::wit::GuestContext;

impl LoadedPlugin {
    /// Run a tool call in the warm instance `slot` gave (an idle one of the
    /// caller's session, or a new one kept afterwards).
    pub(super) async fn call_warm(
        &self,
        slot: Checkout,
        mut permit: OwnedSemaphorePermit,
        (name, args_json): (&str, &str),
        guest_ctx: &GuestContext,
        ctx: &ToolCallContext,
        live: Option<crate::process::LiveOutput>,
    ) -> Result<ToolOutput, ToolCallError> {
        let limit = self.call_limit();
        let clock = CallClock::new(limit);
        let parts = CallParts {
            live_output: live,
            clock: clock.clone(),
            working_dir: Some(guest_ctx.working_dir.clone()),
            // A reused store is always called on the caller's task.
            on_own_thread: false,
            programs: ctx.programs.clone(),
            network: ctx.network,
        };
        let mut instance = match slot {
            Checkout::Idle(mut kept) => {
                kept.store.data_mut().begin_call(parts);
                kept.store.set_epoch_deadline(1);
                kept
            }
            Checkout::Room(allowance) => {
                let mut store = self.new_call_store(parts)?;
                let done = clock
                    .bound(self.tool_guest()?.instantiate(&mut store))
                    .await;
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
        if let Some(warm) = &self.warm {
            warm.give_back(instance);
        }
        Ok(result?)
    }
}
