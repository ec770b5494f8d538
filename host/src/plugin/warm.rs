//! Tool calls in warm instances (see [`super::warm_pool`]): an idle
//! instance of the caller's session, or a new one kept afterwards.

use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use super::clock::CallClock;
use super::loaded::{LoadedPlugin, ToolCallError};
use super::state::CallParts;
use super::types::{ToolCallContext, ToolOutput};
use super::warm_pool::{Warm, WarmInstances};
use super::wit::GuestContext;

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
                let Some(allowance) = warm.allowance() else {
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
