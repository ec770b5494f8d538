//! Compiled components are cached on disk: the second load does not
//! compile, and a corrupt or planted entry is detected, rebuilt and never
//! loaded (finding 4 of the trust-boundary review).

use sandcrab::plugin::{CacheOutcome, PluginHost, PluginHostConfig, PluginSource, Policy};
use serde_json::json;

use crate::support::{Scene, call, install_plugin};

use sandcrab::plugin::Severity;
use std::os::unix::fs::PermissionsExt;

fn host_with_cache(scene: &Scene, cache: &std::path::Path) -> PluginHost {
    let mut config = PluginHostConfig::new(scene.workspace());
    config.policy = Policy::default();
    config.cache_dir = Some(cache.to_path_buf());
    PluginHost::new(config).unwrap()
}

#[tokio::test]
async fn second_load_uses_the_cache_and_corruption_is_repaired() {
    let scene = Scene::new();
    let cache = tempfile::tempdir().unwrap();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let source = PluginSource::Dir(dir);

    let first = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(first.cache, CacheOutcome::Miss);
    let entries = cwasm_entries(cache.path());
    assert_eq!(entries.len(), 1, "{entries:?}");

    let second = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(second.cache, CacheOutcome::Hit);

    // Flip bytes in the middle of the compiled code.
    let entry = &entries[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xA5;
    }
    std::fs::write(entry, &bytes).unwrap();
    let repaired = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(repaired.cache, CacheOutcome::Repaired);
    assert_eq!(
        call(&repaired, "hello", json!({"name": "cache"}))
            .await
            .unwrap(),
        "Hello, cache!"
    );

    // Truncated to nothing useful.
    std::fs::write(entry, b"\x7fELF").unwrap();
    let again = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(again.cache, CacheOutcome::Repaired);
    let healed = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(
        healed.cache,
        CacheOutcome::Hit,
        "the rewritten entry is valid"
    );
}

#[tokio::test]
async fn a_changed_plugin_gets_a_new_entry() {
    let scene = Scene::new();
    let cache = tempfile::tempdir().unwrap();
    let hello = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let hostile = install_plugin(
        &scene.plugins(),
        "test-fixtures/hostile-tool",
        "hostile",
        |m| m,
    );
    let mut host = host_with_cache(&scene, cache.path());
    assert_eq!(
        host.load(&PluginSource::Dir(hello)).await.unwrap().cache,
        CacheOutcome::Miss
    );
    assert_eq!(
        host.load(&PluginSource::Dir(hostile)).await.unwrap().cache,
        CacheOutcome::Miss
    );
    assert_eq!(cwasm_entries(cache.path()).len(), 2);
}

fn cwasm_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

/// Compiled code for `wasm` from a cache in a scratch directory (a real,
/// valid compilation by this very engine, just not this user's cache).
async fn foreign_entry(scene: &Scene, artifact: &str) -> Vec<u8> {
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = install_plugin(&scene.plugins(), artifact, "foreign", |m| m);
    host_with_cache(scene, elsewhere.path())
        .load(&PluginSource::Dir(dir.clone()))
        .await
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::read(&cwasm_entries(elsewhere.path())[0]).unwrap()
}

#[tokio::test]
async fn a_planted_entry_is_never_loaded() {
    let scene = Scene::new();
    let cache = tempfile::tempdir().unwrap();
    let hello = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let source = PluginSource::Dir(hello);
    let first = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(first.cache, CacheOutcome::Miss);
    let entry = cwasm_entries(cache.path())[0].clone();

    // Plant another component's compiled code where hello's belongs, with
    // the checksum file the old scheme trusted beside it.
    let planted = foreign_entry(&scene, "test-fixtures/hostile-tool").await;
    std::fs::write(&entry, &planted).unwrap();
    std::fs::write(
        entry.with_extension("b3"),
        blake3::hash(&planted).to_hex().as_bytes(),
    )
    .unwrap();
    let loaded = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(loaded.cache, CacheOutcome::Repaired);
    let tools: Vec<&str> = loaded.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        ["hello", "line_count", "sort_lines"],
        "the planted code was loaded"
    );

    // Same with raw serialized code and no MAC at all.
    let raw = &planted[32..];
    std::fs::write(&entry, raw).unwrap();
    let loaded = host_with_cache(&scene, cache.path())
        .load(&source)
        .await
        .unwrap();
    assert_eq!(loaded.cache, CacheOutcome::Repaired);
    assert_eq!(loaded.tools[0].name, "hello");
}

#[tokio::test]
async fn a_cache_directory_others_can_write_is_not_used() {
    let scene = Scene::new();
    let base = tempfile::tempdir().unwrap();
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let hello = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let mut host = host_with_cache(&scene, &shared);
    let loaded = host.load(&PluginSource::Dir(hello)).await.unwrap();
    assert_eq!(loaded.cache, CacheOutcome::Disabled);
    assert!(cwasm_entries(&shared).is_empty());
    let warning = host
        .diagnostics()
        .iter()
        .find(|d| d.severity == Severity::Warning)
        .expect("a warning says why");
    assert!(
        warning.message.contains("accessible by others"),
        "{}",
        warning.message
    );

    // A fresh directory is created private.
    let fresh = base.path().join("fresh");
    let _ = host_with_cache(&scene, &fresh);
    assert_eq!(
        std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // Its key is kept beside the folder, not in it, private.
    assert!(std::fs::read_dir(&fresh).unwrap().next().is_none());
    let key = std::fs::metadata(base.path().join("fresh.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
}

/// `sandcrab tool call read_file` on `scene` with its own (empty at first)
/// cache directory: (stdout, stderr).
fn read_through_binary(scene: &Scene, cache_home: &std::path::Path) -> (String, String) {
    let out = crate::support::sandcrab_cmd(scene)
        .env("XDG_CACHE_HOME", cache_home)
        .args([
            "tool",
            "call",
            "read_file",
            "--args",
            r#"{"file_path":"a.txt"}"#,
        ])
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn cached_components(cache_home: &std::path::Path) -> usize {
    let dir = cache_home.join("sandcrab/components");
    if dir.exists() {
        cwasm_entries(&dir).len()
    } else {
        0
    }
}

#[test]
fn a_first_start_on_an_empty_cache_compiles_nothing() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "alpha\nbeta\n").unwrap();
    let cache_home = scene.root.path().join("fresh-cache");
    let (stdout, stderr) = read_through_binary(&scene, &cache_home);
    assert_eq!(stdout, "     1\talpha\n     2\tbeta\n");
    assert!(!stderr.contains("note:"), "{stderr}");
    // The built-in plugins ran from the code in the binary: nothing was
    // compiled into the cache.
    assert_eq!(cached_components(&cache_home), 0);
}

#[test]
fn other_engine_settings_fall_back_to_compiling_once_with_a_note() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "alpha\nbeta\n").unwrap();
    let embedded = read_through_binary(&scene, &scene.root.path().join("embedded-cache")).0;
    // Native debug information changes the compiled code: the embedded
    // code (built without it) is refused by the engine.
    scene.write_user_config("plugin_debug_info = true\n");
    let cache_home = scene.root.path().join("fallback-cache");
    let (stdout, stderr) = read_through_binary(&scene, &cache_home);
    assert_eq!(stdout, embedded, "the compiled path answers the same");
    for name in sandcrab_bundled_plugins::BUNDLED.iter().map(|b| b.name) {
        let note = stderr
            .lines()
            .find(|l| l.starts_with(&format!("note: built-in plugin {name}: ")))
            .unwrap_or_else(|| panic!("no note for {name}:\n{stderr}"));
        assert!(
            note.contains("not usable here") && note.contains("debug information"),
            "the note says why: {note}"
        );
        assert!(note.ends_with("compiled and cached instead"), "{note}");
    }
    assert_eq!(
        cached_components(&cache_home),
        sandcrab_bundled_plugins::BUNDLED.len()
    );
    // Once: the next start takes them from the cache, silently.
    let (again, stderr) = read_through_binary(&scene, &cache_home);
    assert_eq!(again, embedded);
    assert!(!stderr.contains("note:"), "{stderr}");
}
