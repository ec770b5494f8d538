//! Fixed cost of the plugin runtime:
//! - a no-op tool call through the full path (fresh store, instance, call),
//!   with the pooling allocator and with on-demand allocation, and the same
//!   call of a plugin that allows reuse (a warm instance called again);
//! - loading plugins cold (compiling) and from the on-disk cache, for
//!   `hello-tool` and for every first-party plugin together.
//!
//! Run: `cargo bench -p sandcrab --bench plugin_runtime`.

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::plugin::{
    EngineOptions, LoadedPlugin, PluginHost, PluginHostConfig, PluginSource, ToolCallContext,
    discovery,
};

fn hello_dir(scratch: &Path) -> std::path::PathBuf {
    hello_dir_as(scratch, "hello", "")
}

/// hello-tool installed in `scratch/name`, with `extra` appended to its
/// manifest.
fn hello_dir_as(scratch: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    let a = sandcrab_bundled_plugins::artifact("examples/hello-tool").expect("hello-tool is built");
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(a.source_dir).join("plugin.toml")).unwrap();
    std::fs::write(dir.join("plugin.toml"), manifest + extra).unwrap();
    std::fs::copy(a.wasm_path, dir.join("hello_tool.wasm")).unwrap();
    dir
}

fn host(workspace: &Path, cache: Option<&Path>, pooling: bool) -> PluginHost {
    let mut config = PluginHostConfig::new(workspace);
    config.cache_dir = cache.map(Path::to_path_buf);
    config.engine = EngineOptions {
        pooling,
        ..EngineOptions::default()
    };
    PluginHost::new(config).unwrap()
}

fn noop_call(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = hello_dir(scratch.path());
    let reusable = hello_dir_as(scratch.path(), "hello-reuse", "\n[limits]\nreuse = true\n");
    let mut group = c.benchmark_group("noop_tool_call");
    for (name, pooling, dir) in [
        ("pooling", true, &dir),
        ("on_demand", false, &dir),
        ("reuse", true, &reusable),
    ] {
        let mut host = host(scratch.path(), None, pooling);
        let plugin: Arc<LoadedPlugin> = rt
            .block_on(host.load(&PluginSource::Dir(dir.clone())))
            .unwrap();
        assert_eq!(
            host.pooling(),
            pooling,
            "the machine must allow pooling for this benchmark"
        );
        assert_eq!(plugin.decision.grants.limits.reuse, name == "reuse");
        let ctx = ToolCallContext {
            session_id: "bench".into(),
            call_id: "1".into(),
            working_dir: None,
            detach: None,
            programs: None,
            background: false,
            network: false,
        };
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                plugin
                    .call_tool("hello", r#"{"name":"x"}"#, &ctx, None)
                    .await
                    .unwrap()
            })
        });
    }
    group.finish();
}

fn load(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let dir = hello_dir(scratch.path());
    let mut all = discovery::bundled();
    all.push(PluginSource::Dir(dir.clone()));
    // Warm the cache.
    rt.block_on(host(scratch.path(), Some(&cache), true).load_all(&all));

    let mut group = c.benchmark_group("plugin_load");
    group.sample_size(20);
    group.bench_function("hello_cold_compile", |b| {
        b.to_async(&rt).iter(|| async {
            let mut h = host(scratch.path(), None, true);
            h.load(&PluginSource::Dir(dir.clone())).await.unwrap();
        })
    });
    // The engine is created outside the timed part: what is measured is
    // reading, verifying and deserializing the cached code plus the
    // load-time calls (listing tools).
    group.bench_function("hello_cached", |b| {
        b.iter_batched(
            || host(scratch.path(), Some(&cache), true),
            |mut h| {
                rt.block_on(h.load(&PluginSource::Dir(dir.clone())))
                    .unwrap()
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.bench_function("all_first_party_cached", |b| {
        let bundled = discovery::bundled();
        b.iter_batched(
            || host(scratch.path(), Some(&cache), true),
            |mut h| {
                rt.block_on(h.load_all(&bundled));
                assert_eq!(h.plugins().len(), bundled.len(), "{:?}", h.diagnostics());
                h
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, noop_call, load);
criterion_main!(benches);
