//! One tool call spread over several instances (`sandcrab:shards`): a
//! WebAssembly instance has one thread, the host has several cores. Each
//! shard runs in a fresh instance of its own, on a thread of its own, in
//! the same sandbox and under the same limits as a plain call; the pieces
//! they return are put in key order and merged by one more instance.
//!
//! Sharding only uses instance slots that are free at the moment: a call
//! never waits for extra slots, so a busy plugin runs its calls whole.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use super::loaded::{LoadedPlugin, ToolCallError};
use super::types::{ToolCallContext, ToolOutput};
use super::wit::{GuestContext, Piece, Shard, ShardOutput, ShardedGuest};

impl LoadedPlugin {
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
    ) -> Result<ToolOutput, ToolCallError> {
        let Some((guest, _)) = &self.sharding else {
            return Err(self
                .setup_error("the plugin cannot shard calls".into())
                .into());
        };
        let count = 1 + extra.len() as u32;
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
        for output in outputs {
            stopped_early |= output.stopped_early;
            pieces.extend(output.pieces);
        }
        // Stable: equal keys keep shard order.
        pieces.sort_by_key(|p| (p.major, p.minor));
        let call = self.fresh_instance_holding(
            self.permit().await?,
            self.tool_call_setup(guest_ctx, None, false),
        )?;
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
        Ok(merged?)
    }

    /// One shard in a fresh instance holding `permit`.
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
    ) -> Result<ShardOutput, ToolCallError> {
        let call =
            self.fresh_instance_holding(permit, self.tool_call_setup(guest_ctx, None, true))?;
        let (name, args_json, guest_ctx) =
            (name.to_string(), args_json.to_string(), guest_ctx.clone());
        let output = self
            .run_guest(call, ctx.detach.clone(), move |store| {
                Box::pin(async move {
                    guest
                        .call_shard(store, &name, &args_json, &guest_ctx, shard)
                        .await
                })
            })
            .await?;
        Ok(output?)
    }
}
