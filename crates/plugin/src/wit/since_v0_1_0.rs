//! Host bindings for `sandcrab:plugin@0.1.0` (`wit/since_v0.1.0`), frozen:
//! `bind_version!` binds it; this file maps its types to the
//! version-neutral ones. What 0.1.0 lacks takes its 0.1.0 meaning: no
//! working directory (calls work at the workspace root), tools write
//! nothing the host must order and never run in the background, a tool
//! never reports a timeout, and a profile names no output limit.

use super::{GuestContext, RawTool};
use crate::types::{ProfileInfo, ToolOutput, ToolTraits};

bind_version!("../../wit/since_v0.1.0", since_v0_1_0, |_state| None);

use profile::exports::sandcrab::plugin::profile::ProfileInfo as WitProfileInfo;
use tool::sandcrab::plugin::types as wit;

/// A tool as the plugin declared it.
fn raw_tool(s: wit::ToolSpec) -> RawTool {
    RawTool {
        name: s.name,
        description: s.description,
        schema: s.parameters_schema,
        traits: ToolTraits::default(),
    }
}

/// What the call is told.
fn call_context(ctx: &GuestContext) -> wit::CallContext {
    wit::CallContext {
        workspace_root: ctx.workspace_root.clone(),
        host_workspace_root: ctx.host_workspace_root.clone(),
        session_id: ctx.session_id.clone(),
        call_id: ctx.call_id.clone(),
    }
}

/// A tool's answer: 0.1.0 tools answer with text alone.
fn tool_output(text: String) -> ToolOutput {
    ToolOutput::from(text)
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
        max_output_tokens: 0,
    }
}
