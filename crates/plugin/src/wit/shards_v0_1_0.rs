//! Host bindings for `sandcrab:shards@0.1.0` (`wit/shards/since_v0.1.0`),
//! frozen: a tool plugin's optional export that lets one call run as
//! several shards at once, adapted to the version-neutral [`ShardedGuest`].

use async_trait::async_trait;
use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use super::{GuestContext, Piece, Shard, ShardOutput, ShardedGuest};
use crate::state::HostState;
use crate::types::{ToolFailure, ToolOutput};

wasmtime::component::bindgen!({
    path: "../../wit/shards/since_v0.1.0",
    world: "sharded-tool-plugin",
    exports: { default: async },
});

use exports::sandcrab::shards::sharded_tool as wit;

/// The name a component exports the interface under.
pub const EXPORT: &str = "sandcrab:shards/sharded-tool@0.1.0";

/// The sharded guest of `component`, when it exports this interface.
pub fn guest(
    component: &Component,
    engine: &Engine,
    pre: &InstancePre<HostState>,
) -> wasmtime::Result<Option<std::sync::Arc<dyn ShardedGuest>>> {
    if !super::export_names(component, engine)
        .iter()
        .any(|n| n == EXPORT)
    {
        return Ok(None);
    }
    Ok(Some(std::sync::Arc::new(ShardedToolPluginPre::new(
        pre.clone(),
    )?)))
}

fn context(ctx: &GuestContext) -> wit::CallContext {
    wit::CallContext {
        workspace_root: ctx.workspace_root.clone(),
        host_workspace_root: ctx.host_workspace_root.clone(),
        working_dir: ctx.working_dir.clone(),
        session_id: ctx.session_id.clone(),
        call_id: ctx.call_id.clone(),
    }
}

fn failure(e: wit::ToolError) -> ToolFailure {
    match e {
        wit::ToolError::InvalidArguments(m) => ToolFailure::InvalidArguments(m),
        wit::ToolError::Denied(m) => ToolFailure::Denied(m),
        wit::ToolError::Failed(m) => ToolFailure::Failed(m),
    }
}

#[async_trait]
impl ShardedGuest for ShardedToolPluginPre<HostState> {
    async fn shardable(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<String>> {
        let instance = self.instantiate_async(&mut *store).await?;
        instance
            .sandcrab_shards_sharded_tool()
            .call_shardable(store)
            .await
    }

    async fn call_shard(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
        shard: Shard,
    ) -> wasmtime::Result<Result<ShardOutput, ToolFailure>> {
        let instance = self.instantiate_async(&mut *store).await?;
        let shard = wit::Shard {
            index: shard.index,
            count: shard.count,
        };
        let result = instance
            .sandcrab_shards_sharded_tool()
            .call_call_shard(store, name, args_json, &context(ctx), shard)
            .await?;
        Ok(result.map_err(failure).map(|out| ShardOutput {
            pieces: out
                .pieces
                .into_iter()
                .map(|p| Piece {
                    major: p.major,
                    minor: p.minor,
                    text: p.text,
                })
                .collect(),
            stopped_early: out.stopped_early,
        }))
    }

    async fn merge(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
        pieces: Vec<Piece>,
        stopped_early: bool,
    ) -> wasmtime::Result<Result<ToolOutput, ToolFailure>> {
        let pieces: Vec<wit::Piece> = pieces
            .into_iter()
            .map(|p| wit::Piece {
                major: p.major,
                minor: p.minor,
                text: p.text,
            })
            .collect();
        let instance = self.instantiate_async(&mut *store).await?;
        let result = instance
            .sandcrab_shards_sharded_tool()
            .call_merge(
                store,
                name,
                args_json,
                &context(ctx),
                &pieces,
                stopped_early,
            )
            .await?;
        Ok(result.map_err(failure).map(|out| ToolOutput {
            text: out.text,
            timed_out: out.timed_out,
        }))
    }
}
