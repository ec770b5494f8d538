//! The `sandcrab:shards/sharded-tool` export (`wit/shards/since_v0.1.0`):
//! the host may run one `grep` call as several shards in separate
//! instances, one per core, each walking its own share of the tree
//! ([`walk::each_file_of`]), and merge their matches in walk order here. A plain `grep` call
//! runs shard 0 of 1 and the same merge, so both answer alike.

use sandcrab_sdk::prelude::*;

use crate::grep::{self, Grep};
use crate::walk;

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/shards/since_v0.1.0",
        world: "sharded-tool-plugin",
    });
}

use bindings::exports::sandcrab::shards::sharded_tool as wit;

struct Sharded;

impl wit::Guest for Sharded {
    fn shardable() -> Vec<String> {
        vec![Grep::NAME.to_string()]
    }

    fn call_shard(
        name: String,
        args_json: String,
        context: wit::CallContext,
        shard: wit::Shard,
    ) -> Result<wit::ShardOutput, wit::ToolError> {
        if shard.count == 0 || shard.index >= shard.count {
            return Err(wit::ToolError::InvalidArguments(format!(
                "shard {} of {} does not exist (the index must be below the count)",
                shard.index, shard.count
            )));
        }
        let args = grep_args(&name, &args_json)?;
        let ctx = call_context(context);
        let shard = walk::Part {
            index: shard.index,
            count: shard.count,
        };
        let found = grep::search(&args, &ctx, shard).map_err(tool_error)?;
        Ok(wit::ShardOutput {
            stopped_early: found.stopped_early(&args),
            pieces: found
                .matches()
                .map(|m| wit::Piece {
                    major: m.file,
                    minor: m.line,
                    text: m.text.to_string(),
                })
                .collect(),
        })
    }

    fn merge(
        name: String,
        args_json: String,
        context: wit::CallContext,
        pieces: Vec<wit::Piece>,
        _stopped_early: bool,
    ) -> Result<wit::MergedOutput, wit::ToolError> {
        let args = grep_args(&name, &args_json)?;
        let ctx = call_context(context);
        let text = grep::answer(
            &args,
            &ctx,
            pieces.iter().map(|p| p.text.as_str()),
            pieces.len(),
        )
        .map_err(tool_error)?;
        Ok(wit::MergedOutput {
            text,
            timed_out: false,
        })
    }
}

bindings::export!(Sharded with_types_in bindings);

fn grep_args(name: &str, args_json: &str) -> Result<grep::Args, wit::ToolError> {
    if name != Grep::NAME {
        return Err(wit::ToolError::InvalidArguments(format!(
            "coding-tools cannot shard a tool named {name}; only {} is shardable",
            Grep::NAME
        )));
    }
    serde_json::from_str(args_json).map_err(|e| {
        wit::ToolError::InvalidArguments(format!("invalid arguments for {}: {e}", Grep::NAME))
    })
}

fn call_context(c: wit::CallContext) -> CallContext {
    CallContext {
        workspace_root: c.workspace_root,
        host_workspace_root: c.host_workspace_root,
        session_id: c.session_id,
        call_id: c.call_id,
        working_dir: c.working_dir,
    }
}

fn tool_error(e: ToolError) -> wit::ToolError {
    match e {
        ToolError::InvalidArguments(m) => wit::ToolError::InvalidArguments(m),
        ToolError::Denied(m) => wit::ToolError::Denied(m),
        ToolError::Failed(m) => wit::ToolError::Failed(m),
    }
}
