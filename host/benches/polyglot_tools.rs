//! Cost of third-party tools built with other languages' toolchains: the
//! Python example (componentize-py) and the JavaScript example
//! (componentize-js), beside the Rust `hello-tool`:
//! - one tool call in-process, the component already compiled and cached;
//! - the first load (compiling the component) and a cached load;
//! - reloading a loaded plugin (what `chat --watch-plugins` does when its
//!   directory changes; the new component already in the cache).
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

/// The Rust example as a plugin directory (built by cargo with the other
/// plugins), copied under `scratch`.
fn rust_example(scratch: &Path) -> PathBuf {
    let a = sandcrab_bundled_plugins::artifact("examples/hello-tool").expect("hello-tool is built");
    let dir = scratch.join("hello-tool");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(a.source_dir).join("plugin.toml"),
        dir.join("plugin.toml"),
    )
    .unwrap();
    let wasm = Path::new(a.wasm_path);
    std::fs::copy(wasm, dir.join(wasm.file_name().unwrap())).unwrap();
    dir
}

/// (language, plugin dir, tool, arguments): a call per language that reads
/// a workspace file.
fn cases(scratch: &Path) -> Vec<(&'static str, PathBuf, &'static str, &'static str)> {
    std::fs::write(scratch.join("notes.txt"), "one\n# TODO: two\nthree\n").unwrap();
    std::fs::write(scratch.join("data.json"), r#"{"a": 1, "b": [2]}"#).unwrap();
    vec![
        (
            "rust",
            rust_example(scratch),
            "line_count",
            r#"{"path":"notes.txt"}"#,
        ),
        (
            "python",
            example("python-notes"),
            "todo_list",
            r#"{"path":"notes.txt"}"#,
        ),
        (
            "javascript",
            example("js-json"),
            "json_keys",
            r#"{"path":"data.json"}"#,
        ),
    ]
}

/// A copy of the plugin at `dir` whose manifest allows instance reuse.
fn reusing(dir: &Path, scratch: &Path) -> PathBuf {
    let copy = scratch.join(format!(
        "{}-reuse",
        dir.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let manifest = std::fs::read_to_string(copy.join("plugin.toml")).unwrap();
    std::fs::write(
        copy.join("plugin.toml"),
        manifest + "\n[limits]\nreuse = true\n",
    )
    .unwrap();
    copy
}

fn call(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let mut group = c.benchmark_group("polyglot_tool_call");
    let cases = cases(scratch.path());
    let reused: Vec<_> = cases
        .iter()
        .map(|(lang, dir, tool, args)| {
            let name: &'static str = format!("{lang}_reuse").leak();
            (name, reusing(dir, scratch.path()), *tool, *args)
        })
        .collect();
    for (lang, dir, tool, args) in cases.into_iter().chain(reused) {
        let mut host = host(scratch.path(), Some(&cache));
        let plugin: Arc<LoadedPlugin> = rt.block_on(host.load(&PluginSource::Dir(dir))).unwrap();
        let ctx = ToolCallContext {
            session_id: "bench".into(),
            call_id: "1".into(),
            working_dir: None,
            detach: None,
            programs: None,
            background: false,
            network: false,
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
    for (lang, dir, _, _) in cases(scratch.path()) {
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

/// Reload of a loaded plugin whose component is cached: read, verify,
/// link, list its tools, swap it in.
fn reload(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let mut group = c.benchmark_group("polyglot_reload");
    group.sample_size(20);
    for (lang, dir, _, _) in cases(scratch.path()) {
        let source = PluginSource::Dir(dir);
        let mut h = host(scratch.path(), Some(&cache));
        rt.block_on(h.load(&source)).unwrap();
        group.bench_function(lang, |b| b.iter(|| rt.block_on(h.reload(&source)).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, call, load, reload);
criterion_main!(benches);
