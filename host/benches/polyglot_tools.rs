//! Cost of third-party tools built with other languages' toolchains: the
//! Python example (componentize-py) and the JavaScript example
//! (componentize-js), beside the Rust `hello-tool`:
//! - one tool call in-process, the component already compiled and cached;
//! - the first load (compiling the component) and a cached load.
//!
//! The examples are built by `scripts/build-examples` into
//! `target/examples/`. Run: `cargo bench -p sandcrab --bench polyglot_tools`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::plugin::{LoadedPlugin, PluginHost, PluginHostConfig, PluginSource, ToolCallContext};

/// A built example plugin directory.
fn example(name: &str) -> PathBuf {
    let root = std::env::var_os("SANDCRAB_EXAMPLES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/examples"));
    let dir = root.join(name);
    assert!(
        dir.join("plugin.toml").exists(),
        "{} is not built: run scripts/build-examples first",
        dir.display()
    );
    dir
}

fn host(workspace: &Path, cache: Option<&Path>) -> PluginHost {
    let mut config = PluginHostConfig::new(workspace);
    config.cache_dir = cache.map(Path::to_path_buf);
    PluginHost::new(config).unwrap()
}

/// (plugin dir, tool, arguments) of one cheap call per language.
fn cases() -> Vec<(&'static str, PathBuf, &'static str, &'static str)> {
    vec![
        (
            "python",
            example("python-tool"),
            "word_count",
            r#"{"path":"notes.txt"}"#,
        ),
        (
            "javascript",
            example("js-tool"),
            "line_count",
            r#"{"text":"a\nb"}"#,
        ),
    ]
}

fn call(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("notes.txt"), "one two three\n").unwrap();
    let cache = scratch.path().join("cache");
    let mut group = c.benchmark_group("polyglot_tool_call");
    for (lang, dir, tool, args) in cases() {
        let mut host = host(scratch.path(), Some(&cache));
        let plugin: Arc<LoadedPlugin> = rt.block_on(host.load(&PluginSource::Dir(dir))).unwrap();
        let ctx = ToolCallContext {
            session_id: "bench".into(),
            call_id: "1".into(),
            working_dir: None,
            detach: None,
        };
        let out = rt
            .block_on(plugin.call_tool(tool, args, &ctx, None))
            .unwrap();
        assert!(!out.text.is_empty());
        group.bench_function(lang, |b| {
            b.to_async(&rt)
                .iter(|| async { plugin.call_tool(tool, args, &ctx, None).await.unwrap() })
        });
    }
    group.finish();
}

fn load(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let mut group = c.benchmark_group("polyglot_load");
    group.sample_size(10);
    for (lang, dir, _, _) in cases() {
        let source = PluginSource::Dir(dir);
        rt.block_on(host(scratch.path(), Some(&cache)).load(&source))
            .unwrap();
        group.bench_function(format!("{lang}_first_compile"), |b| {
            b.iter_batched(
                || host(scratch.path(), None),
                |mut h| rt.block_on(h.load(&source)).unwrap(),
                criterion::BatchSize::PerIteration,
            )
        });
        group.bench_function(format!("{lang}_cached"), |b| {
            b.iter_batched(
                || host(scratch.path(), Some(&cache)),
                |mut h| rt.block_on(h.load(&source)).unwrap(),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, call, load);
criterion_main!(benches);
