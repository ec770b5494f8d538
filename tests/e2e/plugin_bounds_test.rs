//! Findings 8, 9, 11, 14 and 15 of the trust-boundary review: every call
//! into a plugin is bounded in wall-clock time (sleeping, blocked, or
//! looping over programs), waiting for an instance is bounded, loading is
//! bounded, live output honours its cap, plugin logs cannot flood or forge
//! the operator's log, and nothing a model or tool prints can drive the
//! terminal.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;
use sandcrab::plugin::manifest::Limits;
use sandcrab::plugin::policy::PluginGrant;
use sandcrab::plugin::{
    CallError, PluginHost, PluginHostConfig, PluginSource, Policy, Severity, ToolCallError,
};
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{
    Scene, assert_still_works, cache_dir, call, gone_soon, grant, install_plugin, sandcrab_cmd,
};

fn timed_out(result: Result<String, ToolCallError>) -> bool {
    matches!(
        result,
        Err(ToolCallError::Runtime(CallError::Timeout { .. }))
    )
}

#[tokio::test]
async fn a_sleeping_guest_is_stopped_at_its_limit() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let started = Instant::now();
    let out = call(&plugin, "sleep", json!({"seconds": 3600})).await;
    assert!(timed_out(out), "the sleeping guest was not stopped");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_still_works(&plugin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_blocked_on_a_fifo_is_stopped_and_the_host_stays_responsive() {
    let scene = Scene::new();
    let fifo = scene.workspace().join("pipe");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo on a temp path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let started = Instant::now();
    let blocked = call(&plugin, "read_path", json!({"path": "/workspace/pipe"}));
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        assert_still_works(&plugin).await;
        t.elapsed()
    };
    let (out, other) = tokio::join!(blocked, meanwhile);
    let took = started.elapsed();
    // Release the host thread still blocked opening the FIFO (the runtime
    // would wait for it when the test ends).
    let _writer = std::fs::OpenOptions::new().write(true).open(&fifo);
    assert!(timed_out(out));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        other < Duration::from_secs(1),
        "other calls stalled: {other:?}"
    );
}

/// The call's limit (1.5 s) bounds the programs it starts: a guest
/// looping over programs ends at the limit, not later (issue #24: it used
/// to get a budget of program time beyond it).
#[tokio::test]
async fn a_guest_looping_over_programs_is_stopped_at_its_limit() {
    let scene = Scene::new();
    let policy = grant(
        "hostile-tool",
        PluginGrant {
            programs: vec!["sh".into()],
            ..PluginGrant::default()
        },
    );
    let (_host, plugin) = scene.hostile(policy).await;
    let started = Instant::now();
    let out = call(&plugin, "run_forever", json!({})).await;
    assert!(timed_out(out));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_millis(2000),
        "{took:?}"
    );
}

/// One long program is stopped when its call's time is up, and is gone.
#[tokio::test]
async fn a_program_does_not_outlive_its_calls_limit() {
    let scene = Scene::new();
    let policy = grant(
        "hostile-tool",
        PluginGrant {
            programs: vec!["sh".into()],
            ..PluginGrant::default()
        },
    );
    let (_host, plugin) = scene.hostile(policy).await;
    let started = Instant::now();
    let out = call(
        &plugin,
        "run",
        json!({"program": "sh", "args": ["-c", "sleep 37.25"], "timeout_ms": 60000}),
    )
    .await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2000), "{took:?}: {out:?}");
    assert!(gone_soon("sleep 37.25"), "the program outlived its call");
}

#[tokio::test]
async fn waiting_for_a_busy_plugin_is_bounded() {
    let scene = Scene::new();
    let policy = grant(
        "hostile-tool",
        PluginGrant {
            programs: vec!["sh".into()],
            limits: Limits {
                max_instances: Some(1),
                timeout_ms: Some(4000),
                ..Limits::default()
            },
            ..PluginGrant::default()
        },
    );
    let (_host, plugin) = scene.hostile(policy).await;
    // One call holds the one instance for its whole 4 s limit (a guest
    // looping over programs); calls queued behind it at 0.5, 1 and 1.5 s
    // take it over in turn (each with a second of margin before its own
    // wait ends); a call that starts waiting at 2 s, behind them all,
    // gives up when its own wait — bounded by the limit — ends.
    let hold = |delay: u64| {
        let plugin = &plugin;
        async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            call(plugin, "run_forever", json!({})).await
        }
    };
    let waiting = async {
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let started = Instant::now();
        (
            call(&plugin, "echo", json!({"text": "x"})).await,
            started.elapsed(),
        )
    };
    let holders = futures::future::join_all([0, 500, 1000, 1500].map(hold));
    let (_, (last, waited)) = tokio::join!(holders, waiting);
    match last {
        Err(ToolCallError::Runtime(CallError::Busy { .. })) => {}
        other => panic!("expected a busy error, got {other:?}"),
    }
    assert!(
        waited >= Duration::from_millis(3500) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
    let msg = CallError::Busy {
        plugin: "p".into(),
        instances: 1,
        waited_ms: 1500,
    }
    .to_string();
    assert!(
        msg.contains("busy") && msg.contains("1 of its instances"),
        "{msg}"
    );
}

/// A host whose environment gives LOADER_MODE = `mode`, granting it (and a
/// short limit) to the loader fixture.
fn loader_host(scene: &Scene, mode: &str) -> PluginHost {
    let mut config = PluginHostConfig::new(scene.workspace());
    config.cache_dir = Some(cache_dir());
    config.host_env = Some(BTreeMap::from([(
        "LOADER_MODE".to_string(),
        mode.to_string(),
    )]));
    config.policy = grant(
        "loader-tool",
        PluginGrant {
            env: vec!["LOADER_MODE".into()],
            limits: Limits {
                timeout_ms: Some(1000),
                ..Limits::default()
            },
            ..PluginGrant::default()
        },
    );
    PluginHost::new(config).unwrap()
}

fn loader_and_hello(scene: &Scene) -> Vec<PluginSource> {
    vec![
        PluginSource::Dir(install_plugin(
            &scene.plugins(),
            "test-fixtures/loader-tool",
            "loader",
            |m| m,
        )),
        PluginSource::Dir(install_plugin(
            &scene.plugins(),
            "examples/hello-tool",
            "hello",
            |m| m,
        )),
    ]
}

fn errors(host: &PluginHost) -> Vec<String> {
    host.diagnostics()
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message.clone())
        .collect()
}

#[tokio::test]
async fn a_plugin_whose_tool_list_hangs_costs_the_others_a_bounded_wait() {
    let scene = Scene::new();
    let sources = loader_and_hello(&scene);
    let mut host = loader_host(&scene, "hang");
    let started = Instant::now();
    host.load_all(&sources).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        host.get("hello-tool").is_some(),
        "the other plugin was loaded"
    );
    assert!(host.get("loader-tool").is_none());
    let errs = errors(&host);
    assert!(
        errs.iter()
            .any(|e| e.contains("loader/plugin.toml") && e.contains("time limit")),
        "{errs:?}"
    );
}

#[tokio::test]
async fn a_plugin_with_100000_tools_is_refused() {
    let scene = Scene::new();
    let sources = loader_and_hello(&scene);
    let mut host = loader_host(&scene, "many");
    host.load_all(&sources).await;
    assert!(host.get("loader-tool").is_none());
    assert!(host.get("hello-tool").is_some());
    let errs = errors(&host);
    assert!(
        errs.iter()
            .any(|e| e.contains("declares 100000 tools; the limit is 256")),
        "{errs:?}"
    );
}

#[tokio::test]
async fn oversize_schemas_and_descriptions_are_skipped_with_a_reason() {
    let scene = Scene::new();
    for (mode, skipped, why) in [
        ("huge-schema", "huge", "parameters schema is"),
        ("long-description", "wordy", "description is"),
    ] {
        let mut host = loader_host(&scene, mode);
        host.load_all(&loader_and_hello(&scene)).await;
        let loader = host.get("loader-tool").expect("the plugin loads");
        let names: Vec<&str> = loader.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fine"], "{mode}");
        let errs = errors(&host);
        assert!(
            errs.iter()
                .any(|e| e.contains(&format!("tool '{skipped}': its {why}"))),
            "{errs:?}"
        );
    }
}

#[tokio::test]
async fn manifests_and_components_that_are_not_regular_files_are_refused() {
    let scene = Scene::new();
    let zero_manifest = scene.plugins().join("zero-manifest");
    std::fs::create_dir_all(&zero_manifest).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_manifest.join("plugin.toml")).unwrap();
    let zero_wasm = install_plugin(&scene.plugins(), "examples/hello-tool", "zero-wasm", |m| {
        m.replace("name = \"hello-tool\"", "name = \"zero-wasm\"")
    });
    std::fs::remove_file(zero_wasm.join("hello_tool.wasm")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_wasm.join("hello_tool.wasm")).unwrap();
    let huge = install_plugin(&scene.plugins(), "examples/hello-tool", "huge", |m| {
        m.replace("name = \"hello-tool\"", "name = \"huge\"")
    });
    let file = std::fs::File::create(huge.join("hello_tool.wasm")).unwrap();
    file.set_len(300 << 20).unwrap();
    let ok = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);

    let mut host = scene.host(Policy::default());
    let started = Instant::now();
    host.load_all(&[
        PluginSource::Dir(zero_manifest),
        PluginSource::Dir(zero_wasm),
        PluginSource::Dir(huge),
        PluginSource::Dir(ok),
    ])
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(host.plugins().len(), 1);
    let errs = errors(&host);
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs.iter()
            .filter(|e| e.contains("not a regular file"))
            .count()
            == 2,
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.contains("larger than")), "{errs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_output_stops_at_the_cap() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::OpenAiCompatible;
    scene.write_user_config("process_output_cap_mb = 1\n");
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "yes 0123456789abcdef | head -c 100000000", "timeout_ms": 60000}),
        )]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["done"])));
    let out = sandcrab_cmd(&scene)
        .args([
            "run",
            "--json",
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace())
        .arg("print a lot")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut live = 0usize;
    let mut full = 0usize;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["kind"].as_str().unwrap() {
            "TOOL_CALL_OUTPUT_DELTA" => live += e["data"]["text"].as_str().unwrap().len(),
            "TOOL_CALL_END" => full = e["data"]["output"].as_str().unwrap().len(),
            _ => {}
        }
    }
    assert!(live <= 1 << 20, "{live} live bytes for a 1 MiB cap");
    assert!(full < (1 << 20) + 4096, "{full}");
    assert!(
        out.stdout.len() < 8 << 20,
        "{} bytes of events",
        out.stdout.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_and_tool_output_cannot_drive_the_terminal() {
    let scene = Scene::new();
    let server = MockLlm::start().await;
    let kind = ProviderKind::OpenAiCompatible;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "printf 'tool \\033]0;pwned-title\\007 \\033]8;;http://evil\\033\\\\link\\n'"}),
        )]),
    ));
    server.push(stream(
        kind,
        &Answer::Text(vec![
            "copy \u{1b}]52;c;cHduZWQ=\u{7} this\r\u{1b}[2K",
            " \u{9b}31m red \u{202e}txt.exe\n",
        ]),
    ));
    let out = sandcrab_cmd(&scene)
        .args([
            "run",
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(scene.workspace())
        .arg("hi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        for bad in ['\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(bad), "{name} carries {bad:?}: {text:?}");
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copy \\u{1b}]52;c;cHduZWQ="),
        "shown, inert: {stdout}"
    );
}

#[tokio::test]
async fn plugin_logs_cannot_flood_or_forge_the_operators_log() {
    let scene = Scene::new();
    let dir = install_plugin(
        &scene.plugins(),
        "test-fixtures/hostile-tool",
        "hostile",
        |m| m,
    );
    let out = sandcrab_cmd(&scene)
        .args([
            "tool",
            "call",
            "log_spam",
            "--args",
            "{\"lines\": 1000}",
            "--plugins",
        ])
        .arg(&dir)
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines = stderr.lines().count();
    assert!(lines < 300, "{lines} lines of plugin log");
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("2026-01-01T00:00:00Z ERROR")),
        "a plugin forged a host log line"
    );
    assert!(!stderr.contains('\u{1b}') && !stderr.contains('\u{7}'));
    assert!(
        stderr.contains("the rest of this call's log is dropped"),
        "{stderr}"
    );
}
