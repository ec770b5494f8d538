//! Host bindings for `sandcrab:plugin@0.2.0` (`wit/since_v0.2.0`), frozen:
//! `bind_version!` binds it; this file maps its types to the
//! version-neutral ones. What 0.2.0 lacks takes its 0.2.0 meaning: the
//! call context carries no sandbox facts, and a tool declares no output
//! limit (the host's default applies). Its profiles' `adapter` is ignored.

use super::{GuestContext, RawTool};
use crate::types::{ProfileInfo, ToolOutput, ToolTraits, Writes};

bind_version!("../../wit/since_v0.2.0", since_v0_2_0, |state| state.working_dir.clone());

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
            output_limit: None,
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
