//! Host bindings for `sandcrab:plugin@0.3.0` (`wit/since_v0.3.0`), frozen:
//! `bind_version!` binds it; this file maps its types to the
//! version-neutral ones.

use super::{GuestContext, RawTool};
use crate::types::{
    ProfileInfo, ToolOutput, ToolTraits, TruncateMode, TruncationLimits, Writes,
};
use crate::process::SandboxMode;

bind_version!("../../wit/since_v0.3.0", since_v0_3_0, |state| state.working_dir.clone());

use profile::exports::sandcrab::plugin::profile::ProfileInfo as WitProfileInfo;
use tool::sandcrab::plugin::types as wit;

/// A tool as the plugin declared it.
fn raw_tool(s: wit::ToolSpec) -> RawTool {
    RawTool {
        name: s.name,
        description: s.description,
        schema: s.parameters_schema,
        traits: ToolTraits {
            writes: match s.writes {
                wit::Writes::Nothing => Writes::Nothing,
                wit::Writes::Paths(args) => Writes::Paths(args),
                wit::Writes::Workspace => Writes::Workspace,
            },
            background: s.background,
            shardable: false,
            // Decided by the host when the plugin loads.
            network: false,
            output_limit: s.output_limit.map(|l| {
                TruncationLimits::declared(
                    l.chars,
                    l.lines,
                    match l.keep {
                        wit::Keep::HeadAndTail => TruncateMode::HeadTail,
                        wit::Keep::Tail => TruncateMode::Tail,
                    },
                )
            }),
        },
    }
}

/// What the call is told.
fn call_context(ctx: &GuestContext) -> wit::CallContext {
    wit::CallContext {
        workspace_root: ctx.workspace_root.clone(),
        host_workspace_root: ctx.host_workspace_root.clone(),
        session_id: ctx.session_id.clone(),
        call_id: ctx.call_id.clone(),
        working_dir: ctx.working_dir.clone(),
        sandbox: match ctx.sandbox_mode {
            SandboxMode::Locked => wit::SandboxMode::Locked,
            SandboxMode::WorkspaceWrite => wit::SandboxMode::WorkspaceWrite,
            SandboxMode::Off => wit::SandboxMode::Off,
        },
        protected_paths: ctx.protected.clone(),
        time_budget_ms: ctx.time_budget_ms,
        background: ctx.background,
    }
}

/// A tool's answer.
fn tool_output(o: wit::ToolOutput) -> ToolOutput {
    ToolOutput {
        text: o.text,
        timed_out: o.timed_out,
    }
}

/// A profile's facts.
fn profile_info(info: WitProfileInfo) -> ProfileInfo {
    ProfileInfo {
        id: info.id,
        default_model: info.default_model,
        context_window: info.context_window,
        parallel_tool_calls: info.parallel_tool_calls,
        tool_names: info.tool_names,
        project_doc_files: info.project_doc_files,
        max_output_tokens: info.max_output_tokens,
    }
}
