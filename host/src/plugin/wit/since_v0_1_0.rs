//! Host bindings for `sandcrab:plugin@0.1.0` (`wit/since_v0.1.0`), frozen.
//!
//! Every world of this version is bound here and adapted to the
//! version-neutral guest interfaces; the host imports of the version
//! (`process`, `log`) forward to the one real implementation in
//! [`crate::plugin::imports`]. What 0.1.0 lacks takes its 0.1.0 meaning: no
//! working directory (calls work at the workspace root), tools write
//! nothing the host must order and never run in the background, and a
//! tool never reports a timeout.

use async_trait::async_trait;
use wasmtime::Store;

use super::{GuestContext, ProfileGuest, RawTool, ToolGuest};
use crate::plugin::state::HostState;
use crate::plugin::types::{ProfileInfo, ToolFailure, ToolOutput, ToolTraits};

bind_version!("../wit/since_v0.1.0", since_v0_1_0, |_state| None);

#[async_trait]
impl ToolGuest for tool::ToolPluginPre<HostState> {
    async fn tools(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<RawTool>> {
        let instance = self.instantiate_async(&mut *store).await?;
        let specs = instance.sandcrab_plugin_tool().call_tools(store).await?;
        Ok(specs
            .into_iter()
            .map(|s| RawTool {
                name: s.name,
                description: s.description,
                schema: s.parameters_schema,
                traits: ToolTraits::default(),
            })
            .collect())
    }

    async fn call(
        &self,
        store: &mut Store<HostState>,
        name: &str,
        args_json: &str,
        ctx: &GuestContext,
    ) -> wasmtime::Result<Result<ToolOutput, ToolFailure>> {
        use tool::sandcrab::plugin::types::{CallContext, ToolError as E};
        let wit_ctx = CallContext {
            workspace_root: ctx.workspace_root.clone(),
            host_workspace_root: ctx.host_workspace_root.clone(),
            session_id: ctx.session_id.clone(),
            call_id: ctx.call_id.clone(),
        };
        let instance = self.instantiate_async(&mut *store).await?;
        let result = instance
            .sandcrab_plugin_tool()
            .call_call(store, name, args_json, &wit_ctx)
            .await?;
        Ok(result.map(ToolOutput::from).map_err(|e| match e {
            E::InvalidArguments(m) => ToolFailure::InvalidArguments(m),
            E::Denied(m) => ToolFailure::Denied(m),
            E::Failed(m) => ToolFailure::Failed(m),
        }))
    }
}

#[async_trait]
impl ProfileGuest for profile::ProfilePluginPre<HostState> {
    async fn info(&self, store: &mut Store<HostState>) -> wasmtime::Result<ProfileInfo> {
        let instance = self.instantiate_async(&mut *store).await?;
        let info = instance.sandcrab_plugin_profile().call_info(store).await?;
        Ok(ProfileInfo {
            id: info.id,
            default_model: info.default_model,
            context_window: info.context_window,
            parallel_tool_calls: info.parallel_tool_calls,
            tool_names: info.tool_names,
            project_doc_files: info.project_doc_files,
            max_output_tokens: 0,
        })
    }

    async fn base_instructions(&self, store: &mut Store<HostState>) -> wasmtime::Result<String> {
        let instance = self.instantiate_async(&mut *store).await?;
        instance
            .sandcrab_plugin_profile()
            .call_base_instructions(store)
            .await
    }
}
