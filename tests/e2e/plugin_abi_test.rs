//! What the host tells a plugin travels in typed fields of the call
//! context (sandcrab:plugin@0.3.0), never in environment variables or
//! argument conventions: the sandbox mode, the protected paths, the call's
//! time budget and whether it runs in the background.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use sandcrab::jobs::{BackgroundSettings, CallMode, JobRegistry, JobStatus, Payload, run_call};
use sandcrab::plugin::policy::Policy;
use sandcrab::plugin::{LoadedPlugin, ToolCallContext};
use sandcrab::tools::{ToolCallRequest, ToolContext, ToolRegistry, TruncationPolicy};

use crate::support::{Scene, call};

async fn context_seen(plugin: &LoadedPlugin, background: bool) -> Value {
    let ctx = ToolCallContext {
        session_id: "s".into(),
        call_id: "c".into(),
        working_dir: None,
        detach: None,
        programs: None,
        background,
        network: false,
    };
    let out = plugin
        .call_tool("call_context", "{}", &ctx, None)
        .await
        .expect("call_context answers");
    serde_json::from_str(&out.text).expect("JSON")
}

#[tokio::test]
async fn the_call_context_carries_the_sandbox_facts_as_typed_fields() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let seen = context_seen(&plugin, false).await;
    let sandbox = plugin.sandbox();
    assert_eq!(seen["sandbox"], sandbox.sandbox_mode.to_string());
    assert_eq!(seen["protected_paths"], json!(sandbox.protected));
    assert!(
        sandbox.protected.iter().any(|p| p == "**/.git"),
        "{:?}",
        sandbox.protected
    );
    assert_eq!(
        seen["time_budget_ms"],
        json!(plugin.decision.grants.limits.timeout_ms)
    );
    assert_eq!(seen["background"], false);
    assert_eq!(context_seen(&plugin, true).await["background"], true);
}

#[tokio::test]
async fn no_environment_variable_carries_an_abi_meaning() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let env = call(&plugin, "env", json!({})).await.unwrap();
    assert!(
        !env.lines().any(|l| l.starts_with("SANDCRAB_")),
        "the guest environment carries host facts: {env}"
    );
}

#[tokio::test]
async fn a_call_started_in_the_background_is_told_so_in_its_context() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let plugin: Arc<LoadedPlugin> = plugin;
    let mut tools = ToolRegistry::new();
    tools.register_plugin(&plugin);
    let jobs = JobRegistry::new(TruncationPolicy::default());
    let request = ToolCallRequest {
        id: "c1".into(),
        name: "call_context".into(),
        arguments: json!({"run_in_background": true}),
    };
    let ctx = ToolContext {
        session_id: "t".into(),
        call_id: "c1".into(),
        ..ToolContext::default()
    };
    let settings = BackgroundSettings {
        after: Duration::from_secs(60),
        max_duration: Duration::from_secs(60),
    };
    let record = match run_call(&jobs, tools, request, ctx, settings)
        .await
        .unwrap()
    {
        CallMode::Background(record) => record,
        CallMode::Inline(o) => panic!("run_in_background ran inline: {o:?}"),
    };
    let mut done = None;
    for _ in 0..500 {
        let r = jobs.inspect("t", &record.job_id).unwrap();
        if r.status != JobStatus::Running {
            done = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = done.expect("the job finished");
    assert_eq!(done.status, JobStatus::Completed, "{done:?}");
    let Some(Payload::Inline { text }) = &done.payload else {
        panic!("no inline payload: {done:?}");
    };
    let seen: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(seen["background"], true, "{seen}");
}

#[tokio::test]
async fn tools_declare_how_much_of_their_output_the_model_sees() {
    use sandcrab::plugin::{TruncateMode, TruncationLimits};
    let scene = Scene::new();
    let (_host, tools) = crate::support::coding_tools(&scene, Policy::default()).await;
    let declared = |name: &str| tools.get(name).unwrap().spec.traits.output_limit;
    assert_eq!(
        declared("read_file"),
        Some(TruncationLimits::new(50_000, TruncateMode::HeadTail, None))
    );
    assert_eq!(
        declared("grep"),
        Some(TruncationLimits::new(20_000, TruncateMode::Tail, Some(200)))
    );
    // A tool that declares nothing gets the host's fallback.
    assert_eq!(declared("list_dir"), None);
}
