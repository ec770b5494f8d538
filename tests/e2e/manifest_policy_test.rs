//! Bad plugin input is reported with the file and the reason, and loading
//! goes on with the others; capabilities follow request ∩ grant, and
//! locked mode grants third-party plugins only what is named.

use sandcrab::plugin::manifest::Access;
use sandcrab::plugin::policy::{PluginGrant, PolicyMode};
use sandcrab::plugin::{CacheOutcome, Diagnostic, PluginSource, Policy, Severity, ToolCallError};
use serde_json::json;

use crate::support::{Scene, call, grant, install_plugin};

fn errors(diags: &[Diagnostic]) -> Vec<&Diagnostic> {
    diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

/// Load `sources`, which include one good plugin last, and return the
/// diagnostics (asserting the good one still loaded).
async fn load_with_good_last(scene: &Scene, mut sources: Vec<PluginSource>) -> Vec<Diagnostic> {
    let good = install_plugin(&scene.plugins(), "examples/hello-tool", "zz-good", |m| m);
    sources.push(PluginSource::Dir(good));
    let mut host = scene.host(Policy::default());
    host.load_all(&sources).await;
    assert!(
        host.get("hello-tool").is_some(),
        "the good plugin loads despite the bad ones"
    );
    host.diagnostics().to_vec()
}

fn hello_manifest_with(replace: &str, with: &str) -> impl FnOnce(String) -> String {
    let (replace, with) = (replace.to_string(), with.to_string());
    move |m: String| {
        assert!(m.contains(&replace), "fixture manifest lacks {replace}");
        m.replace(&replace, &with)
    }
}

#[tokio::test]
async fn each_bad_plugin_is_reported_with_its_file_and_reason() {
    let scene = Scene::new();
    let p = scene.plugins();
    let no_manifest = p.join("no-manifest");
    std::fs::create_dir_all(&no_manifest).unwrap();
    let bad_toml = install_plugin(&p, "examples/hello-tool", "bad-toml", |_| {
        "name = [unclosed".into()
    });
    let missing_field = install_plugin(
        &p,
        "examples/hello-tool",
        "missing-field",
        hello_manifest_with("kind = \"tool\"\n", ""),
    );
    let missing_wasm = install_plugin(
        &p,
        "examples/hello-tool",
        "missing-wasm",
        hello_manifest_with("hello_tool.wasm", "nope.wasm"),
    );
    let core_module = install_plugin(&p, "examples/hello-tool", "core-module", |m| m);
    std::fs::write(core_module.join("hello_tool.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let garbage = install_plugin(&p, "examples/hello-tool", "garbage", |m| m);
    std::fs::write(
        garbage.join("hello_tool.wasm"),
        b"#!/bin/sh\necho not wasm\n",
    )
    .unwrap();
    let broken_component = install_plugin(&p, "examples/hello-tool", "broken-component", |m| m);
    std::fs::write(
        broken_component.join("hello_tool.wasm"),
        b"\0asm\x0d\0\x01\0\xff\xff\xff",
    )
    .unwrap();
    let wrong_world = install_plugin(
        &p,
        "examples/hello-tool",
        "wrong-world",
        hello_manifest_with("kind = \"tool\"", "kind = \"profile\""),
    );

    let cases = [
        (&no_manifest, "plugin.toml", "cannot read manifest"),
        (&bad_toml, "plugin.toml", "invalid manifest"),
        (&missing_field, "plugin.toml", "missing field `kind`"),
        (&missing_wasm, "nope.wasm", "cannot read plugin wasm"),
        (
            &core_module,
            "hello_tool.wasm",
            "core WebAssembly module, not a component",
        ),
        (&garbage, "hello_tool.wasm", "not WebAssembly"),
        (
            &broken_component,
            "hello_tool.wasm",
            "not a WebAssembly component",
        ),
        (
            &wrong_world,
            "hello_tool.wasm",
            "must export sandcrab:plugin/profile@0.3.0 (or an earlier supported version), but it exports sandcrab:plugin/tool@0.3.0",
        ),
    ];
    let sources = cases
        .iter()
        .map(|(dir, _, _)| PluginSource::Dir(dir.to_path_buf()))
        .collect();
    let diags = load_with_good_last(&scene, sources).await;
    let errs = errors(&diags);
    for (dir, file, reason) in cases {
        let path = dir.join(file);
        let found = errs
            .iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("no diagnostic for {}: {diags:#?}", path.display()));
        assert!(
            found.message.contains(&path.display().to_string()),
            "{}",
            found.message
        );
        assert!(
            found.message.contains(reason),
            "expected '{reason}' in: {}",
            found.message
        );
    }
    assert_eq!(errs.len(), cases.len(), "{errs:#?}");
}

#[tokio::test]
async fn duplicate_tool_and_plugin_names_are_reported() {
    let scene = Scene::new();
    let p = scene.plugins();
    let same_tool = install_plugin(
        &p,
        "examples/hello-tool",
        "same-tool",
        hello_manifest_with("name = \"hello-tool\"", "name = \"hello-again\""),
    );
    let same_name = install_plugin(&p, "examples/hello-tool", "same-name", |m| m);
    let first = install_plugin(&p, "examples/hello-tool", "first", |m| m);
    let mut host = scene.host(Policy::default());
    host.load_all(&[
        PluginSource::Dir(first),
        PluginSource::Dir(same_tool.clone()),
        PluginSource::Dir(same_name.clone()),
    ])
    .await;
    // The second plugin loads, but its colliding tool is refused: the first
    // owner keeps `hello` and the model never sees two tools of one name.
    assert_eq!(host.plugins().len(), 2);
    assert_eq!(
        host.tool_owner("hello").unwrap().manifest.name,
        "hello-tool"
    );
    let msgs: Vec<&str> = host
        .diagnostics()
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        msgs.iter().any(
            |m| m.contains(&same_tool.join("plugin.toml").display().to_string())
                && m.contains(
                    "tool 'hello' is not loaded: plugin 'hello-tool' already provides it"
                )
                && m.contains("override_tools")
        ),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter().any(
            |m| m.contains(&same_name.join("plugin.toml").display().to_string())
                && m.contains("a plugin named 'hello-tool' is already loaded")
        ),
        "{msgs:#?}"
    );
}

#[tokio::test]
async fn an_invalid_tool_schema_skips_that_tool_only() {
    let scene = Scene::new();
    let (host, plugin) = scene.hostile(Policy::default()).await;
    assert!(plugin.tools.iter().all(|t| t.name != "bad_schema"));
    assert!(plugin.tools.iter().any(|t| t.name == "echo"));
    let diag = host
        .diagnostics()
        .iter()
        .find(|d| d.message.contains("bad_schema"))
        .expect("a diagnostic");
    assert_eq!(diag.severity, Severity::Error);
    assert!(
        diag.message.contains("hostile/plugin.toml"),
        "{}",
        diag.message
    );
}

#[tokio::test]
async fn ungranted_requests_are_reported_as_warnings() {
    let scene = Scene::new();
    let (host, _plugin) = scene.hostile(Policy::default()).await;
    let warnings: Vec<&str> = host
        .diagnostics()
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .map(|d| d.message.as_str())
        .collect();
    let grant_hint = format!(
        "grant it with [policy.plugins.hostile-tool] programs = [\"sh\"] in {}",
        sandcrab::user_files::config_file_shown()
    );
    for needle in [
        "workspace: read-write requested, read granted",
        "programs: sh",
        "env: SANDCRAB_TEST_API_KEY is a secret",
        grant_hint.as_str(),
        "network",
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(needle) && w.contains("hostile/plugin.toml")),
            "{needle}: {warnings:#?}"
        );
    }
}

#[tokio::test]
async fn locked_mode_denies_process_and_env_unless_granted_by_name() {
    let scene = Scene::new();
    let locked = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    let (_host, plugin) = scene.hostile(locked.clone()).await;
    let g = &plugin.decision.grants;
    assert_eq!(
        g.workspace,
        Access::None,
        "no default workspace access in locked mode"
    );
    assert!(g.programs.is_empty() && g.env.is_empty() && !g.network);
    let run = call(
        &plugin,
        "run",
        json!({"program": "sh", "args": ["-c", "true"]}),
    )
    .await;
    assert!(matches!(run, Err(ToolCallError::Tool(_))), "{run:?}");
    assert!(
        !call(&plugin, "env", json!({}))
            .await
            .unwrap()
            .contains("PATH=")
    );

    let mut named = locked;
    named.plugins.insert(
        "hostile-tool".into(),
        PluginGrant {
            workspace: Access::ReadWrite,
            programs: vec!["sh".into()],
            env: vec!["PATH".into()],
            network: true,
            ..Default::default()
        },
    );
    let (_host, plugin) = scene.hostile(named).await;
    let g = &plugin.decision.grants;
    assert_eq!(g.programs, vec!["sh"]);
    assert_eq!(g.env, vec!["PATH"]);
    assert!(
        !g.network,
        "locked mode allows no network even when granted"
    );
    assert!(
        call(&plugin, "env", json!({}))
            .await
            .unwrap()
            .contains("PATH=")
    );
    let out = call(
        &plugin,
        "run",
        json!({"program": "sh", "args": ["-c", "echo ran"]}),
    )
    .await
    .unwrap();
    assert!(out.contains("ran\\n"), "{out}");
}

#[tokio::test]
async fn a_plugin_loads_from_the_cache_after_the_first_time() {
    let scene = Scene::new();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let mut host = scene.host(Policy::default());
    host.load(&PluginSource::Dir(dir.clone())).await.unwrap();
    let mut again = scene.host(Policy::default());
    let plugin = again.load(&PluginSource::Dir(dir)).await.unwrap();
    assert_eq!(plugin.cache, CacheOutcome::Hit);
}

#[tokio::test]
async fn hello_tool_answers_through_the_sdk() {
    let scene = Scene::new();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let mut host = scene.host(grant("unused", PluginGrant::default()));
    let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
    assert_eq!(
        call(&plugin, "hello", json!({"name": "crab"}))
            .await
            .unwrap(),
        "Hello, crab!"
    );
    assert_eq!(
        call(&plugin, "hello", json!({"name": "crab", "shout": true}))
            .await
            .unwrap(),
        "HELLO, CRAB!"
    );
    let schema = &plugin.tools[0].parameters;
    assert_eq!(schema["required"], json!(["name"]));
    assert_eq!(schema["properties"]["shout"]["type"], "boolean");
    match call(&plugin, "hello", json!({"nom": "x"})).await {
        Err(ToolCallError::Tool(f)) => {
            assert!(f.to_string().contains("invalid arguments for hello"), "{f}")
        }
        other => panic!("{other:?}"),
    }
}
