//! The [`ShardedTool`] trait and the
//! [`export_sharded_tools!`](crate::export_sharded_tools) macro: one tool
//! call spread over several instances (`sandcrab:shards@0.1.0`).
//!
//! A WebAssembly instance has one thread. For a tool listed in
//! `export_sharded_tools!`, the host may run a call as `count` shards at
//! once, each [`ShardedTool::run_shard`] in a fresh instance (same sandbox,
//! same limits), sort all their [`Piece`]s by `(major, minor)` and hand them
//! to [`ShardedTool::merge`] in one more instance, whose answer is the
//! call's. When no instance slot is free the host calls [`Tool::run`]
//! instead; [`run_whole`] runs shard 0 of 1 and the same merge, so both ways
//! answer alike.

use crate::bindings::shards::exports::sandcrab::shards::sharded_tool as wit;
use crate::tool::{CallContext, Tool, ToolError, ToolOutput, ToolResult};

/// Which part of a call a shard does: `index` of `count` (`index < count`).
pub type Shard = wit::Shard;
/// One piece of a shard's answer: `text`, placed by `(major, minor)` among
/// every shard's pieces.
pub type Piece = wit::Piece;
/// A shard's pieces, and whether it stopped before the end of its part
/// (a cap was reached).
pub type ShardOutput = wit::ShardOutput;

/// A [`Tool`] whose call the host may run as several shards.
pub trait ShardedTool: Tool {
    /// Do part `shard` of the call. Pieces may come in any order; give
    /// each the key that places it in the whole answer.
    fn run_shard(
        args: &Self::Args,
        ctx: &CallContext,
        shard: Shard,
    ) -> Result<ShardOutput, ToolError>;

    /// The call's answer from every shard's pieces, sorted by key (equal
    /// keys in shard order); `stopped_early` if any shard stopped early.
    fn merge(
        args: &Self::Args,
        ctx: &CallContext,
        pieces: Vec<Piece>,
        stopped_early: bool,
    ) -> ToolResult;
}

/// A call of `T` done whole: shard 0 of 1, then [`ShardedTool::merge`]
/// (use it in [`Tool::run`], so a call run whole answers as a sharded one).
pub fn run_whole<T: ShardedTool>(args: &T::Args, ctx: &CallContext) -> ToolResult {
    let output = T::run_shard(args, ctx, Shard { index: 0, count: 1 })?;
    let mut pieces = output.pieces;
    pieces.sort_by_key(|p| (p.major, p.minor));
    T::merge(args, ctx, pieces, output.stopped_early)
}

fn parse<T: Tool>(args_json: &str) -> Result<T::Args, ToolError> {
    serde_json::from_str(args_json)
        .map_err(|e| ToolError::InvalidArguments(format!("invalid arguments for {}: {e}", T::NAME)))
}

/// Parse the arguments and run shard `shard` of `T` (used by the macro).
pub fn dispatch_shard<T: ShardedTool>(
    args_json: &str,
    ctx: &CallContext,
    shard: Shard,
) -> Result<ShardOutput, ToolError> {
    if shard.count == 0 || shard.index >= shard.count {
        return Err(ToolError::InvalidArguments(format!(
            "shard {} of {} does not exist (the index must be below the count)",
            shard.index, shard.count
        )));
    }
    T::run_shard(&parse::<T>(args_json)?, ctx, shard)
}

/// Parse the arguments and merge `pieces` for `T` (used by the macro).
pub fn dispatch_merge<T: ShardedTool>(
    args_json: &str,
    ctx: &CallContext,
    pieces: Vec<Piece>,
    stopped_early: bool,
) -> Result<ToolOutput, ToolError> {
    let text = T::merge(&parse::<T>(args_json)?, ctx, pieces, stopped_early)?;
    Ok(ToolOutput {
        text,
        timed_out: false,
    })
}

/// The call context of `sandcrab:shards` as the tool interface's. A
/// shard's context does not carry the sandbox facts: they are filled in
/// on the safe side (the strictest mode, the default protected paths, no
/// time budget known), so a sharded tool never writes more than a whole
/// call could.
pub fn shards_context(c: wit::CallContext) -> CallContext {
    CallContext {
        workspace_root: c.workspace_root,
        host_workspace_root: c.host_workspace_root,
        working_dir: c.working_dir,
        session_id: c.session_id,
        call_id: c.call_id,
        sandbox: crate::SandboxMode::Locked,
        protected_paths: crate::paths::DEFAULT_PROTECTED
            .iter()
            .map(|p| p.to_string())
            .collect(),
        time_budget_ms: 0,
        background: false,
    }
}

/// A tool error as `sandcrab:shards` carries it.
pub fn shards_error(e: ToolError) -> wit::ToolError {
    match e {
        ToolError::InvalidArguments(m) => wit::ToolError::InvalidArguments(m),
        ToolError::Denied(m) => wit::ToolError::Denied(m),
        ToolError::Failed(m) => wit::ToolError::Failed(m),
    }
}

/// Export the listed [`ShardedTool`] types as this component's
/// `sandcrab:shards/sharded-tool` interface (beside
/// [`export_tools!`](crate::export_tools), which must list them too). Use it
/// once per plugin crate.
#[macro_export]
macro_rules! export_sharded_tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __SandcrabShardedTools;

        impl $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::Guest
            for __SandcrabShardedTools
        {
            fn shardable() -> ::std::vec::Vec<::std::string::String> {
                ::std::vec![$(<$tool as $crate::Tool>::NAME.to_string()),+]
            }

            fn call_shard(
                name: ::std::string::String,
                args_json: ::std::string::String,
                context: $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::CallContext,
                shard: $crate::Shard,
            ) -> ::std::result::Result<
                $crate::ShardOutput,
                $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::ToolError,
            > {
                let ctx = $crate::__private::shards_context(context);
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::dispatch_shard::<$tool>(&args_json, &ctx, shard)
                            .map_err($crate::__private::shards_error);
                    }
                )+
                ::std::result::Result::Err($crate::__private::shards_error(
                    $crate::ToolError::InvalidArguments(::std::format!(
                        "this plugin cannot shard a tool named {name}"
                    )),
                ))
            }

            fn merge(
                name: ::std::string::String,
                args_json: ::std::string::String,
                context: $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::CallContext,
                pieces: ::std::vec::Vec<$crate::Piece>,
                stopped_early: bool,
            ) -> ::std::result::Result<
                $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::MergedOutput,
                $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::ToolError,
            > {
                let ctx = $crate::__private::shards_context(context);
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::dispatch_merge::<$tool>(
                            &args_json, &ctx, pieces, stopped_early,
                        )
                        .map(|out| {
                            $crate::bindings::shards::exports::sandcrab::shards::sharded_tool::MergedOutput {
                                text: out.text,
                                timed_out: out.timed_out,
                            }
                        })
                        .map_err($crate::__private::shards_error);
                    }
                )+
                ::std::result::Result::Err($crate::__private::shards_error(
                    $crate::ToolError::InvalidArguments(::std::format!(
                        "this plugin cannot shard a tool named {name}"
                    )),
                ))
            }
        }

        $crate::bindings::shards::export_sharded_tool_plugin!(__SandcrabShardedTools);
    };
}
