//! Reloading a plugin while the agent runs: under load, calls in flight
//! finish on the old version, none fails, and the new version answers
//! afterwards; a broken new version keeps the old one; a removed plugin's
//! tools go away. Then the same through `sandcrab chat` and its watcher.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandcrab::agent::{LivePlugins, PluginReport, Profile, ToolSelection};
use sandcrab::llm::ProviderKind;
use sandcrab::plugin::watch::Change;
use sandcrab::plugin::{PluginSource, Policy};
use sandcrab::tools::ToolCatalog;
use serde_json::json;

use crate::cli_support::{piped_chat, tool_result, wait_for};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, artifact, install_plugin, run_tool};

/// Put version `v` of the fixture into `dir` (manifest and component), as a
/// build would: write then rename.
fn put_version(dir: &Path, v: u32) {
    let a = artifact(&format!("test-fixtures/versioned-v{v}"));
    let manifest = std::fs::read_to_string(Path::new(a.source_dir).join("plugin.toml")).unwrap();
    let wasm = Path::new(a.wasm_path);
    let target = dir.join(wasm.file_name().unwrap());
    std::fs::copy(wasm, target.with_extension("tmp")).unwrap();
    std::fs::rename(target.with_extension("tmp"), &target).unwrap();
    std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
}

async fn which_version(catalog: &ToolCatalog, sleep_ms: u64) -> String {
    let outcome = run_tool(
        &catalog.snapshot(),
        "which_version",
        json!({"sleep_ms": sleep_ms}),
    )
    .await;
    assert!(!outcome.is_error(), "a call failed: {}", outcome.content);
    outcome.content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_under_load_loses_no_call_and_the_new_version_answers_afterwards() {
    let scene = Scene::new();
    let dir = scene.plugins().join("versioned");
    std::fs::create_dir_all(&dir).unwrap();
    put_version(&dir, 1);

    let mut host = scene.host(Policy::default());
    let mut sources = sandcrab::plugin::discovery::bundled();
    sources.push(PluginSource::Dir(dir.clone()));
    host.load_all(&sources).await;
    let profile = Arc::new(Profile::load(&host, "anthropic").await.unwrap());
    let selection = ToolSelection::default();
    let catalog = ToolCatalog::new(
        sandcrab::agent::tool_set::plugin_tools(&host, &profile, &selection).registry,
    );
    let live = LivePlugins::new(host, catalog.clone(), profile, selection);
    assert_eq!(which_version(&catalog, 0).await, "version 1.0.0");

    // Calls keep arriving, each holding its version for 150 ms, while the
    // plugin is replaced.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let catalog = catalog.clone();
        let stop = stop.clone();
        let answered = answered.clone();
        callers.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let started = Instant::now();
                answers.push((started, which_version(&catalog, 150).await));
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            answers
        }));
    }
    // Each caller answers a few times before the reload and after it.
    let answers_reach = |n: usize| {
        let answered = answered.clone();
        async move {
            let started = Instant::now();
            while answered.load(std::sync::atomic::Ordering::SeqCst) < n {
                assert!(started.elapsed() < Duration::from_secs(60), "calls stopped");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    answers_reach(8).await;
    put_version(&dir, 2);
    let reload_started = Instant::now();
    let report = live.apply(&Change::Modified(dir.clone())).await;
    let reloaded = Instant::now();
    assert!(
        matches!(&report, PluginReport::Loaded { version, replaced: true, .. } if version == "2.0.0"),
        "{report:?}"
    );
    answers_reach(answered.load(std::sync::atomic::Ordering::SeqCst) + 8).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);

    let mut answers = Vec::new();
    for caller in callers {
        answers.extend(caller.await.expect("no call failed"));
    }
    let before = answers.iter().filter(|(t, _)| *t < reload_started).count();
    let after: Vec<_> = answers.iter().filter(|(t, _)| *t > reloaded).collect();
    assert!(before >= 4 && after.len() >= 4, "{answers:?}");
    for (t, answer) in &answers {
        if *t < reload_started {
            assert_eq!(answer, "version 1.0.0", "a call in flight changed version");
        }
    }
    for (_, answer) in &after {
        assert_eq!(
            answer, "version 2.0.0",
            "a call after the reload got the old version"
        );
    }

    // A broken new version: reported, and the working one stays.
    std::fs::write(dir.join("versioned_v2.wasm"), b"\0asm garbage").unwrap();
    let report = live.apply(&Change::Modified(dir.clone())).await;
    match &report {
        PluginReport::Failed {
            kept: true,
            message,
            ..
        } => {
            assert!(message.contains("versioned_v2.wasm"), "{message}")
        }
        other => panic!("expected a failure keeping the old version, got {other:?}"),
    }
    assert!(report.to_string().contains("stays in use"), "{report}");
    assert_eq!(which_version(&catalog, 0).await, "version 2.0.0");

    // Gone: its tool is no longer offered.
    std::fs::remove_dir_all(&dir).unwrap();
    let report = live.apply(&Change::Removed(dir.clone())).await;
    assert_eq!(
        report,
        PluginReport::Unloaded {
            name: "versioned-tool".into()
        }
    );
    assert!(catalog.snapshot().get("which_version").is_none());
    assert!(
        catalog.snapshot().get("read_file").is_some(),
        "the core tools stay"
    );
}

/// A scene with version 1 of the fixture installed; its directory.
fn scene_with_v1() -> (Scene, std::path::PathBuf) {
    let scene = Scene::new();
    let dir = install_plugin(
        &scene.plugins(),
        "test-fixtures/versioned-v1",
        "versioned",
        |m| m,
    );
    (scene, dir)
}

/// `sandcrab chat --plugins` on the scene's plugins, read through pipes.
fn chat_with_plugins(
    scene: &Scene,
    kind: ProviderKind,
    server: &MockLlm,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    Arc<std::sync::Mutex<String>>,
) {
    let plugins = scene.plugins();
    piped_chat(
        scene,
        kind,
        server,
        &["--plugins".as_ref(), plugins.as_os_str()],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_reloads_a_changed_plugin_and_lists_plugins() {
    let (scene, dir) = scene_with_v1();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool("c1", "which_version", json!({}))]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["It is version two."])));
    // An empty component cache: the plugin's first compile happens in the
    // background, after the prompt is up.
    let cache = tempfile::tempdir().unwrap();
    scene.write_user_config(&format!("cache_dir = \"{}\"\n", cache.path().display()));

    let (mut child, mut stdin, stderr) = chat_with_plugins(&scene, kind, &server);
    let limit = Duration::from_secs(60);

    // Its first compile runs in the background: list once it is loaded
    // (a listing made before then rightly does not show it).
    wait_for(&stderr, "plugin 'versioned-tool' 1.0.0 loaded", limit);
    writeln!(stdin, "/plugins").unwrap();
    wait_for(
        &stderr,
        "versioned-tool 1.0.0 (tool, external): which_version",
        limit,
    );

    put_version(&dir, 2);
    wait_for(&stderr, "plugin 'versioned-tool' 2.0.0 reloaded", limit);
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "versioned-tool 2.0.0 (tool, external)", limit);

    writeln!(stdin, "Which version is the plugin?").unwrap();
    wait_for(&stderr, "> ", limit);
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", stderr.lock().unwrap());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "{}", stderr.lock().unwrap());
    assert_eq!(
        tool_result(kind, &reqs[1], "c1", "which_version"),
        "version 2.0.0"
    );

    // A broken version is reported and the chat goes on with the old one.
    let text = stderr.lock().unwrap().clone();
    assert!(!text.contains("stays in use"), "{text}");
}

/// After `/resume`, what the watcher reports reaches the session being
/// shown: a broken reload is a warning on the screen, not an event of the
/// session that was left (whose renderer is gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_resume_a_broken_reload_is_still_reported() {
    let (scene, dir) = scene_with_v1();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    let id = crate::sessions_test::one_run(&scene, "a session to come back to", "echo saved").await;

    let (mut child, mut stdin, stderr) = chat_with_plugins(&scene, kind, &server);
    let limit = Duration::from_secs(60);
    // `run` compiled it into the cache, so it is loaded at the start.
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "versioned-tool 1.0.0 (tool, external)", limit);
    writeln!(stdin, "/resume {id}").unwrap();
    wait_for(&stderr, &format!("resumed session {id}"), limit);

    std::fs::write(dir.join("versioned_v1.wasm"), b"\0asm garbage").unwrap();
    wait_for(&stderr, "stays in use", limit);
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", stderr.lock().unwrap());
}

/// A plugin reloaded while the operator types is told above the line
/// being typed, never drawn onto it; the line stays to finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_notice_lands_above_the_line_being_typed() {
    let (scene, dir) = scene_with_v1();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["Noted."])));
    let plugins = scene.plugins();
    let mut chat = crate::cli_support::sandcrab(&scene, kind, &server, "chat");
    chat.arg("--plugins").arg(&plugins);
    let (cols, rows) = (100, 30);
    let mut term = crate::pty::Terminal::spawn_sized(chat, cols, rows);
    term.expect("> ");
    term.send("half a tho");
    term.expect("half a tho");
    put_version(&dir, 2);
    term.expect("2.0.0 reloaded");
    std::thread::sleep(Duration::from_millis(500));
    let screen = term.screen(cols, rows);
    let last = screen
        .iter()
        .rfind(|r| !r.is_empty())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last, "> half a tho", "{}", screen.join("\n"));
    let notice = screen
        .iter()
        .find(|r| r.contains("2.0.0 reloaded"))
        .unwrap();
    assert!(notice.starts_with("● plugins:"), "{}", screen.join("\n"));
    assert!(!notice.contains("half a tho"), "{}", screen.join("\n"));
    term.send("ught\r");
    term.expect("Noted.");
    term.exit();
}
