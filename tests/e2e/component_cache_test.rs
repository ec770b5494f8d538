//! Compiled components are cached on disk: the second load does not
//! compile, and a corrupt entry is detected, rebuilt and never trusted.

use sandcrab::plugin::{CacheOutcome, PluginHost, PluginHostConfig, PluginSource, Policy};
use serde_json::json;

use crate::support::{Scene, call, install_plugin};

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
    let dir = install_plugin(&scene.plugins(), "hello-tool", "hello", |m| m);
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
    let hello = install_plugin(&scene.plugins(), "hello-tool", "hello", |m| m);
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
