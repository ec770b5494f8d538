//! End-to-end tests of sandcrab: the plugin runtime with real built
//! plugins, the sandbox, and the `sandcrab` binary. One test binary, one
//! module per feature.

// Test diagnostics are our own text, not a peer's.
#![allow(clippy::disallowed_macros)]

mod cli_support;
mod oci_registry;
mod support;

mod acp_test;
mod agent_abort_test;
mod agent_cli_test;
mod agent_loop_test;
mod approvals_test;
mod background_jobs_test;
mod bridge_test;
mod budget_test;
mod call_path_test;
mod chat_approvals_test;
mod chat_screen_test;
mod chat_start_test;
mod chat_terminal_test;
mod cli_plugins_test;
mod coding_tools_test;
mod component_cache_test;
mod confinement_test;
mod docs_test;
mod fleet_test;
mod fs_interface_test;
mod golden_test;
mod grant_engine_test;
mod headless_run_test;
mod hooks_test;
mod host_integrity_test;
mod instance_reuse_test;
mod llama_server_test;
mod llm_client_test;
mod llm_request_shape_test;
mod llm_transcripts;
mod manifest_policy_test;
mod mcp_client_test;
mod mcp_conformance_test;
mod mcp_server_test;
mod mcp_sign_in_test;
mod memory_meaning_test;
mod mock_llm;
mod pg_cluster;
mod plugin_abi_test;
mod plugin_bounds_test;
mod plugin_http_test;
mod plugin_limits_test;
mod plugin_registry_test;
mod plugin_reload_test;
mod plugin_scaffold_test;
mod process_sandbox_test;
mod profiles_test;
mod provider_rules;
mod pty;
mod replay_test;
mod sandbox_escape_test;
mod sessions_test;
mod sharded_calls_test;
mod store_backends_test;
mod surfaces_test;
mod telemetry_test;
mod third_party_tools_test;
mod trust_config_test;
mod window_edge_test;
