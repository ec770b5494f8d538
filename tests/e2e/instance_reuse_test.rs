//! Instance reuse (`[limits] reuse = true`): a plugin that does not opt in
//! never sees anything of a previous call; one that opts in is called
//! again in its warm instance, of the same session only; an instance whose
//! call trapped, timed out or hit the memory limit is never called again.

use sandcrab::plugin::ToolCallError;
use sandcrab::plugin::manifest::Limits;
use sandcrab::plugin::policy::PluginGrant;
use sandcrab::plugin::{CallError, LoadedPlugin, PluginSource, Policy, ToolCallContext};
use serde_json::json;

use crate::support::{Scene, grant, install_plugin};

async fn stateful(
    scene: &Scene,
    policy: Policy,
    edit: impl FnOnce(String) -> String,
) -> (sandcrab::plugin::PluginHost, std::sync::Arc<LoadedPlugin>) {
    let dir = install_plugin(
        &scene.plugins(),
        "test-fixtures/stateful-tool",
        "stateful",
        edit,
    );
    let mut host = scene.host(policy);
    let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
    (host, plugin)
}

/// Call `tool` leaving `marker`, in `session`: what the call answered.
async fn leave(
    plugin: &LoadedPlugin,
    session: &str,
    tool: &str,
    marker: &str,
) -> Result<String, ToolCallError> {
    let ctx = ToolCallContext {
        session_id: session.into(),
        call_id: format!("{tool}-{marker}"),
        working_dir: None,
        detach: None,
        programs: None,
        background: false,
        network: false,
    };
    plugin
        .call_tool(tool, &json!({ "marker": marker }).to_string(), &ctx, None)
        .await
        .map(|o| o.text)
}

async fn remember(plugin: &LoadedPlugin, session: &str, marker: &str) -> String {
    leave(plugin, session, "remember", marker).await.unwrap()
}

#[tokio::test]
async fn a_plugin_that_does_not_opt_in_never_sees_a_previous_calls_memory() {
    let scene = Scene::new();
    let (_host, plugin) =
        stateful(&scene, Policy::default(), |m| m.replace("reuse = true", "")).await;
    assert!(!plugin.decision.grants.limits.reuse);
    for marker in ["a", "b", "c"] {
        assert_eq!(remember(&plugin, "s1", marker).await, "previous: ");
    }
    assert_eq!(plugin.idle_instances(), 0);
}

#[tokio::test]
async fn a_plugin_that_opts_in_is_called_again_within_its_session_only() {
    let scene = Scene::new();
    let (_host, plugin) = stateful(&scene, Policy::default(), |m| m).await;
    assert!(plugin.decision.grants.limits.reuse);
    assert_eq!(remember(&plugin, "s1", "a").await, "previous: ");
    assert_eq!(remember(&plugin, "s1", "b").await, "previous: a");
    assert_eq!(plugin.idle_instances(), 1);
    // Another session never gets the first session's instance.
    assert_eq!(remember(&plugin, "s2", "x").await, "previous: ");
    assert_eq!(remember(&plugin, "s1", "c").await, "previous: b");
    assert_eq!(remember(&plugin, "s2", "y").await, "previous: x");
}

#[tokio::test]
async fn the_operator_can_refuse_reuse() {
    let scene = Scene::new();
    let policy = grant(
        "stateful-tool",
        PluginGrant {
            limits: Limits {
                reuse: Some(false),
                ..Limits::default()
            },
            ..PluginGrant::default()
        },
    );
    let (_host, plugin) = stateful(&scene, policy, |m| m).await;
    assert!(!plugin.decision.grants.limits.reuse);
    assert_eq!(remember(&plugin, "s1", "a").await, "previous: ");
    assert_eq!(remember(&plugin, "s1", "b").await, "previous: ");
}

#[tokio::test]
async fn an_instance_whose_call_failed_is_never_called_again() {
    let scene = Scene::new();
    let (_host, plugin) = stateful(&scene, Policy::default(), |m| m).await;
    for (tool, expected) in [("crash", "trap"), ("spin", "timeout"), ("hog", "memory")] {
        assert!(
            remember(&plugin, "s1", "before")
                .await
                .starts_with("previous: ")
        );
        let failed = leave(&plugin, "s1", tool, tool).await.unwrap_err();
        let matches = matches!(
            (&failed, expected),
            (ToolCallError::Runtime(CallError::Trap { .. }), "trap")
                | (ToolCallError::Runtime(CallError::Timeout { .. }), "timeout")
                | (
                    ToolCallError::Runtime(CallError::OutOfMemory { .. }),
                    "memory"
                )
        );
        assert!(
            matches,
            "{tool}: expected a {expected} failure, got {failed}"
        );
        assert_eq!(
            plugin.idle_instances(),
            0,
            "{tool}: the instance was dropped"
        );
        // The failed call's marker (and the one before it) went with it.
        assert_eq!(
            remember(&plugin, "s1", "after").await,
            "previous: ",
            "{tool}"
        );
        // The fresh instance is kept: the plugin still allows reuse.
        assert_eq!(remember(&plugin, "s1", "next").await, "previous: after");
    }
}

/// A plugin that opts in keeps working however many calls its warm
/// instance serves, and does not take the host's file descriptors with
/// it: the JavaScript example reads a workspace file in every call and
/// never closes it (its garbage collector decides when handles go), so an
/// instance kept for ever held one more host descriptor per call until
/// the process ran out (here after ~20,000 calls, everything else in the
/// process failing with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_instance_keeps_reading_files_over_thousands_of_calls() {
    let scene = Scene::new();
    let from = crate::third_party_tools_test::built_example("js-json");
    let dir = scene.plugins().join("js");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        manifest + "\n[limits]\nreuse = true\n",
    )
    .unwrap();
    std::fs::write(scene.workspace().join("data.json"), r#"{"name": "crab"}"#).unwrap();
    let mut host = scene.host(Policy::default());
    let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
    assert!(plugin.decision.grants.limits.reuse);
    let ctx = ToolCallContext {
        session_id: "s1".into(),
        call_id: "keys".into(),
        working_dir: None,
        detach: None,
        programs: None,
        background: false,
        network: false,
    };
    let mut most = 0;
    for call in 0..2000 {
        let out = plugin
            .call_tool("json_keys", r#"{"path": "data.json"}"#, &ctx, None)
            .await
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(out.text, "name: string", "call {call}");
        most = most.max(plugin.idle_resources());
    }
    // What a kept instance holds stays bounded (it is let go once it holds
    // too much), however many calls it served.
    assert!(most <= 64, "an idle instance held {most} resources");
    assert!(
        most > 8,
        "the example no longer leaks: {most} (the test proves nothing)"
    );
    assert_eq!(plugin.idle_instances(), 1);
}
