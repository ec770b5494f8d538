//! A tool call: in one fresh instance, or spread over several
//! (`sandcrab:shards`): a
//! WebAssembly instance has one thread, the host has several cores. Each
//! shard runs in a fresh instance of its own, on a thread of its own, in
//! the same sandbox and under the same limits as a plain call; the pieces
//! they return are put in key order and merged by one more instance.
//!
//! Sharding only uses instance slots that are free at the moment: a call
//! never waits for extra slots, so a busy plugin runs its calls whole. The
//! merge runs in the slot of a shard that ended (it never queues behind
//! other calls) and within what is left of the call's time limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use super::loaded::{LoadedPlugin, ToolCallError};
use super::types::{ToolCallContext, ToolOutput};
use super::wit::{GuestContext, Piece, Shard, ShardOutput, ShardedGuest};

/// How a sharded call ended.
pub(super) enum Sharded {
    Done(ToolOutput),
    /// The shards' pieces together would not fit in one instance's memory
    /// for the merge: the call should run whole, in this slot.
    TooBigToMerge(OwnedSemaphorePermit),
}

/// The least time a merge is given, even when the shards used nearly all
/// of the call's.
const MERGE_FLOOR: Duration = Duration::from_millis(50);

/// Bytes a piece takes in the merging instance besides its text.
const PIECE_OVERHEAD: usize = 32;

impl LoadedPlugin {
    /// Call tool `name` with `args_json`. Output of programs the tool starts
    /// is also sent to `live` as it arrives. A shardable tool runs as
    /// several shards at once when instance slots are free.
    pub async fn call_tool(
        &self,
        name: &str,
        args_json: &str,
        ctx: &ToolCallContext,
        live: Option<crate::process::LiveOutput>,
    ) -> Result<ToolOutput, ToolCallError> {
        let guest = self.tool_guest()?;
        let guest_ctx = self.guest_context(ctx);
        let mut permit = self.permit().await?;
        if let Some(shards) = self.shard_slots(name) {
            match self
                .call_sharded(name, args_json, &guest_ctx, ctx, permit, shards)
                .await?
            {
                Sharded::Done(output) => return Ok(output),
                Sharded::TooBigToMerge(slot) => permit = slot,
            }
        }
        if let Some(warm) = &self.warm
            && let Some(slot) = warm.checkout(&ctx.session_id)
        {
            return self
                .call_warm(slot, permit, (name, args_json), &guest_ctx, ctx, live)
                .await;
        }
        let setup = self.tool_call_setup(&guest_ctx, live, false, ctx);
        let call = self.fresh_instance_holding(permit, setup)?;
        let (name, args_json) = (name.to_string(), args_json.to_string());
        let result = self
            .run_guest(call, ctx.detach.clone(), move |store| {
                Box::pin(async move { guest.call(store, &name, &args_json, &guest_ctx).await })
            })
            .await?;
        Ok(result?)
    }

    /// Extra instance slots for sharding a call of `name`, taken only if
    /// free now (None: run the call whole).
    pub(super) fn shard_slots(&self, name: &str) -> Option<Vec<OwnedSemaphorePermit>> {
        let (_, max_shards) = self.sharding.as_ref()?;
        let shardable = self
            .tools
            .iter()
            .any(|t| t.name == name && t.traits.shardable);
        if !shardable || *max_shards < 2 {
            return None;
        }
        let extra: Vec<_> = (1..*max_shards)
            .map_while(|_| self.instances.clone().try_acquire_owned().ok())
            .collect();
        (!extra.is_empty()).then_some(extra)
    }

    /// Run a call of `name` as `1 + extra.len()` shards, then merge.
    pub(super) async fn call_sharded(
        &self,
        name: &str,
        args_json: &str,
        guest_ctx: &GuestContext,
        ctx: &ToolCallContext,
        permit: OwnedSemaphorePermit,
        extra: Vec<OwnedSemaphorePermit>,
    ) -> Result<Sharded, ToolCallError> {
        let Some((guest, _)) = &self.sharding else {
            return Err(self
                .setup_error("the plugin cannot shard calls".into())
                .into());
        };
        let started = Instant::now();
        let count = 1 + extra.len() as u32;
        self.sharded_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shards = std::iter::once(permit)
            .chain(extra)
            .enumerate()
            .map(|(index, permit)| {
                let shard = Shard {
                    index: index as u32,
                    count,
                };
                self.run_shard(
                    guest.clone(),
                    name,
                    args_json,
                    guest_ctx,
                    ctx,
                    permit,
                    shard,
                )
            });
        // The first shard to fail ends the call and drops (stops) the
        // others; with unusable arguments every shard fails alike.
        let outputs = futures::future::try_join_all(shards).await?;
        let mut pieces: Vec<Piece> = Vec::new();
        let mut stopped_early = false;
        let mut slots = Vec::new();
        for (output, slot) in outputs {
            stopped_early |= output.stopped_early;
            pieces.extend(output.pieces);
            slots.push(slot);
        }
        // One slot for the merge; the others go back now.
        let slot = slots.swap_remove(0);
        drop(slots);
        let bytes: usize = pieces.iter().map(|p| p.text.len() + PIECE_OVERHEAD).sum();
        if bytes > self.merge_budget() {
            tracing::debug!(
                "plugin {}: {count} shards of {name} returned {bytes} bytes, too many to merge in one instance; running the call whole",
                self.name()
            );
            return Ok(Sharded::TooBigToMerge(slot));
        }
        // Stable: equal keys keep shard order.
        pieces.sort_by_key(|p| (p.major, p.minor));
        let left = self
            .call_limit()
            .saturating_sub(started.elapsed())
            .max(MERGE_FLOOR);
        let setup = self
            .tool_call_setup(guest_ctx, None, false, ctx)
            .within(left);
        let call = self.fresh_instance_holding(slot, setup)?;
        let (guest, name, args_json, guest_ctx) = (
            guest.clone(),
            name.to_string(),
            args_json.to_string(),
            guest_ctx.clone(),
        );
        let merged = self
            .run_guest(call, ctx.detach.clone(), move |store| {
                Box::pin(async move {
                    guest
                        .merge(store, &name, &args_json, &guest_ctx, pieces, stopped_early)
                        .await
                })
            })
            .await?;
        Ok(Sharded::Done(merged?))
    }

    /// How many bytes of pieces one instance is given to merge: a quarter
    /// of its memory limit (it holds them, its own copies and its answer).
    fn merge_budget(&self) -> usize {
        let limit_mb = self.decision.grants.limits.memory_mb;
        usize::try_from(limit_mb << 20).unwrap_or(usize::MAX) / 4
    }

    /// One shard in a fresh instance holding `permit`; its slot is handed
    /// back when it ends.
    #[allow(clippy::too_many_arguments)]
    async fn run_shard(
        &self,
        guest: Arc<dyn ShardedGuest>,
        name: &str,
        args_json: &str,
        guest_ctx: &GuestContext,
        ctx: &ToolCallContext,
        permit: OwnedSemaphorePermit,
        shard: Shard,
    ) -> Result<(ShardOutput, OwnedSemaphorePermit), ToolCallError> {
        let call =
            self.fresh_instance_holding(permit, self.tool_call_setup(guest_ctx, None, true, ctx))?;
        let (name, args_json, guest_ctx) =
            (name.to_string(), args_json.to_string(), guest_ctx.clone());
        let (output, slot) = self
            .run_guest_keeping_slot(call, ctx.detach.clone(), move |store| {
                Box::pin(async move {
                    guest
                        .call_shard(store, &name, &args_json, &guest_ctx, shard)
                        .await
                })
            })
            .await?;
        Ok((output?, slot))
    }
}
