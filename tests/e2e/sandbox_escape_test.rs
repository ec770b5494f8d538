//! A plugin cannot reach what it was not granted: files outside the
//! workspace (directly, by `..`, or through symlinks), writes without a
//! write grant, programs off its allow-list, secrets, the network. After
//! each refusal the plugin keeps working.

use std::collections::BTreeMap;

use sandcrab::plugin::manifest::Access;
use sandcrab::plugin::policy::{PluginGrant, PolicyMode};
use sandcrab::plugin::{PluginSource, Policy, ToolCallError, ToolFailure};
use serde_json::json;

use crate::support::{Scene, assert_still_works, call, grant, install_plugin};

fn failure(result: Result<String, ToolCallError>) -> String {
    match result {
        Err(ToolCallError::Tool(ToolFailure::Failed(m)))
        | Err(ToolCallError::Tool(ToolFailure::Denied(m))) => m,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

#[tokio::test]
async fn reading_outside_the_workspace_is_refused() {
    let scene = Scene::new();
    std::fs::write(scene.outside().join("secret.txt"), "top secret").unwrap();
    std::fs::write(scene.workspace().join("ok.txt"), "inside").unwrap();
    let (_host, plugin) = scene.hostile(Policy::default()).await;

    let ok = call(&plugin, "read_path", json!({"path": "/workspace/ok.txt"})).await;
    assert_eq!(ok.unwrap(), "inside", "the granted workspace is readable");

    for path in [
        "/etc/passwd".to_string(),
        "/workspace/../outside/secret.txt".to_string(),
        "../outside/secret.txt".to_string(),
        scene.outside().join("secret.txt").display().to_string(),
    ] {
        let msg = failure(call(&plugin, "read_path", json!({ "path": path })).await);
        assert!(
            !msg.contains("top secret") && !msg.contains("root:"),
            "{path}: {msg}"
        );
        assert_still_works(&plugin).await;
    }
}

#[tokio::test]
async fn symlinks_out_of_the_workspace_are_refused() {
    let scene = Scene::new();
    std::fs::write(scene.outside().join("secret.txt"), "top secret").unwrap();
    let ws = scene.workspace();
    std::os::unix::fs::symlink(scene.outside().join("secret.txt"), ws.join("file-link")).unwrap();
    std::os::unix::fs::symlink(scene.outside(), ws.join("dir-link")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("etc")).unwrap();
    let (_host, plugin) = scene.hostile(Policy::default()).await;

    for path in [
        "/workspace/file-link",
        "/workspace/dir-link/secret.txt",
        "/workspace/etc/passwd",
    ] {
        let msg = failure(call(&plugin, "read_path", json!({ "path": path })).await);
        assert!(
            !msg.contains("top secret") && !msg.contains("root:"),
            "{path}: {msg}"
        );
        assert_still_works(&plugin).await;
    }
}

#[tokio::test]
async fn third_party_without_grants_reads_but_cannot_write_or_run() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "original").unwrap();
    let (_host, plugin) = scene.hostile(Policy::default()).await;

    assert_eq!(
        call(&plugin, "read_path", json!({"path": "/workspace/a.txt"}))
            .await
            .unwrap(),
        "original"
    );
    failure(
        call(
            &plugin,
            "write_path",
            json!({"path": "/workspace/a.txt", "content": "pwned"}),
        )
        .await,
    );
    failure(
        call(
            &plugin,
            "write_path",
            json!({"path": "/workspace/new.txt", "content": "x"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("a.txt")).unwrap(),
        "original"
    );
    assert!(!scene.workspace().join("new.txt").exists());

    let msg = failure(
        call(
            &plugin,
            "run",
            json!({"program": "sh", "args": ["-c", "echo hi"]}),
        )
        .await,
    );
    assert!(msg.contains("may not run 'sh'"), "{msg}");
    assert_still_works(&plugin).await;
}

#[tokio::test]
async fn granted_write_works_and_stays_inside() {
    let scene = Scene::new();
    let policy = grant(
        "hostile-tool",
        PluginGrant {
            workspace: Access::ReadWrite,
            ..Default::default()
        },
    );
    let (_host, plugin) = scene.hostile(policy).await;
    call(
        &plugin,
        "write_path",
        json!({"path": "/workspace/new.txt", "content": "hello"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("new.txt")).unwrap(),
        "hello"
    );
    let target = scene.outside().join("escaped.txt");
    failure(
        call(
            &plugin,
            "write_path",
            json!({"path": "/workspace/../outside/escaped.txt", "content": "x"}),
        )
        .await,
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn programs_off_the_allow_list_are_refused() {
    let scene = Scene::new();
    let policy = grant(
        "hostile-tool",
        PluginGrant {
            workspace: Access::ReadWrite,
            programs: vec!["sh".into()],
            ..Default::default()
        },
    );
    let (_host, plugin) = scene.hostile(policy).await;

    let out = call(
        &plugin,
        "run",
        json!({"program": "sh", "args": ["-c", "echo allowed"]}),
    )
    .await
    .unwrap();
    let out: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["stdout"], "allowed\n");
    assert_eq!(out["exit_code"], 0);

    for program in ["cat", "ls", "/bin/sh", "/usr/bin/sh"] {
        let msg = failure(call(&plugin, "run", json!({"program": program, "args": []})).await);
        assert!(msg.contains("may not run"), "{program}: {msg}");
        assert_still_works(&plugin).await;
    }
    // The working directory must lie inside a granted directory.
    let msg = failure(
        call(
            &plugin,
            "run",
            json!({"program": "sh", "args": ["-c", "pwd"], "cwd": "/etc"}),
        )
        .await,
    );
    assert!(msg.contains("working directory '/etc'"), "{msg}");
}

fn env_with_secret() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    env.insert("SANDCRAB_TEST_PLAIN".into(), "plain-value".into());
    env.insert("SANDCRAB_TEST_API_KEY".into(), "sk-very-secret".into());
    env
}

#[tokio::test]
async fn secrets_never_reach_a_plugin_or_its_programs_unless_granted_by_name() {
    let scene = Scene::new();
    let plain_grant = PluginGrant {
        programs: vec!["sh".into()],
        env: vec!["SANDCRAB_TEST_PLAIN".into(), "PATH".into()],
        ..Default::default()
    };
    let load = |grant_: PluginGrant| {
        let dir = install_plugin(
            &scene.plugins(),
            "test-fixtures/hostile-tool",
            "hostile",
            |m| m,
        );
        let mut config = sandcrab::plugin::PluginHostConfig::new(scene.workspace());
        config.policy = grant("hostile-tool", grant_);
        config.cache_dir = Some(crate::support::cache_dir());
        config.host_env = Some(env_with_secret());
        async move {
            let mut host = sandcrab::plugin::PluginHost::new(config).unwrap();
            let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
            (host, plugin)
        }
    };

    let (_host, plugin) = load(plain_grant.clone()).await;
    let guest_env = call(&plugin, "env", json!({})).await.unwrap();
    assert!(
        guest_env.contains("SANDCRAB_TEST_PLAIN=plain-value"),
        "{guest_env}"
    );
    assert!(!guest_env.contains("sk-very-secret"), "{guest_env}");
    let child = call(
        &plugin,
        "run",
        json!({"program": "sh", "args": ["-c", "env"],
        "env": [["SANDCRAB_TEST_API_KEY", "smuggled"]]}),
    )
    .await
    .unwrap();
    assert!(child.contains("SANDCRAB_TEST_PLAIN=plain-value"), "{child}");
    assert!(
        !child.contains("sk-very-secret") && !child.contains("smuggled"),
        "{child}"
    );
    assert!(
        !plugin
            .decision
            .grants
            .env
            .contains(&"SANDCRAB_TEST_API_KEY".to_string())
    );

    let mut named = plain_grant;
    named.env.push("SANDCRAB_TEST_API_KEY".into());
    let (_host, plugin) = load(named).await;
    let guest_env = call(&plugin, "env", json!({})).await.unwrap();
    assert!(
        guest_env.contains("SANDCRAB_TEST_API_KEY=sk-very-secret"),
        "{guest_env}"
    );
}

#[tokio::test]
async fn the_guest_has_no_network_unless_granted() {
    let scene = Scene::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();

    let (_host, plugin) = scene.hostile(Policy::default()).await;
    failure(call(&plugin, "connect", json!({ "addr": addr })).await);

    let granted = grant(
        "hostile-tool",
        PluginGrant {
            network: true,
            ..Default::default()
        },
    );
    let (_host, plugin) = scene.hostile(granted.clone()).await;
    assert_eq!(
        call(&plugin, "connect", json!({ "addr": addr }))
            .await
            .unwrap(),
        "connected"
    );

    let locked = Policy {
        mode: PolicyMode::Locked,
        ..granted
    };
    let (_host, plugin) = scene.hostile(locked).await;
    failure(call(&plugin, "connect", json!({ "addr": addr })).await);
}
