//! The coding tools through the WASM plugin versus the same work done
//! natively in this process, plus the truncation pipeline:
//! - `read_file` of a 1 MB file (all lines, numbered);
//! - `grep` over 3,000 files;
//! - truncating 10 MB of output.
//!
//! Run: `cargo bench -p sandcrab --bench coding_tools`.

use std::fmt::Write as _;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "peers/native_read.rs"]
mod peers;
use peers::native_read;
use sandcrab::plugin::{PluginHost, PluginHostConfig, discovery};
use sandcrab::tools::{
    ToolCallRequest, ToolContext, ToolRegistry, TruncateMode, TruncationLimits, TruncationPolicy,
    dispatch,
};
use serde_json::json;

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut big = String::new();
    for i in 0..20_000 {
        writeln!(
            big,
            "line {i:06} of a one megabyte file, with some filler text"
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("big.txt"), &big).unwrap();
    for d in 0..30 {
        let sub = dir.path().join(format!("src/module_{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            let mut text = String::new();
            for l in 0..40 {
                writeln!(text, "fn function_{d}_{f}_{l}() {{ let value = {l}; }}").unwrap();
            }
            if f % 10 == 0 {
                text.push_str("// needle: find me\n");
            }
            std::fs::write(sub.join(format!("file_{f}.rs")), text).unwrap();
        }
    }
    dir
}

fn native_grep(root: &Path, re: &regex::Regex, out: &mut String) {
    let mut entries: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            native_grep(&path, re, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    writeln!(out, "{}:{}:{line}", path.display(), i + 1).unwrap();
                }
            }
        }
    }
}

fn tools(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ws = workspace();
    let mut config = PluginHostConfig::new(ws.path());
    config.cache_dir = None;
    let mut host = PluginHost::new(config).unwrap();
    rt.block_on(host.load_all(&discovery::bundled()));
    let registry = ToolRegistry::from_plugins(host.plugins());
    let ctx = ToolContext::default();
    let call = |name: &str, args: serde_json::Value| ToolCallRequest {
        id: "b".into(),
        name: name.into(),
        arguments: args,
    };

    let read = call(
        "read_file",
        json!({"file_path": "big.txt", "limit": 100000}),
    );
    let check = rt.block_on(dispatch(&registry, &read, &ctx));
    assert!(
        !check.is_error() && check.content.len() > 1_000_000,
        "{}",
        &check.content[..200.min(check.content.len())]
    );
    let mut group = c.benchmark_group("read_file_1mb");
    group.bench_function("wasm_plugin", |b| {
        b.to_async(&rt).iter(|| dispatch(&registry, &read, &ctx))
    });
    group.bench_function("native", |b| {
        b.iter(|| native_read(&ws.path().join("big.txt"), 100_000))
    });
    let read1 = call("read_file", json!({"file_path": "big.txt", "limit": 1}));
    group.bench_function("wasm_plugin_first_line_only", |b| {
        b.to_async(&rt).iter(|| dispatch(&registry, &read1, &ctx))
    });
    group.finish();

    let grep = call(
        "grep",
        json!({"pattern": "needle: find", "max_results": 10000}),
    );
    let found = rt.block_on(dispatch(&registry, &grep, &ctx));
    assert_eq!(found.content.lines().count(), 300, "{}", found.content);
    let re = regex::Regex::new("needle: find").unwrap();
    let mut group = c.benchmark_group("grep_3000_files");
    group.sample_size(20);
    group.bench_function("wasm_plugin", |b| {
        b.to_async(&rt).iter(|| dispatch(&registry, &grep, &ctx))
    });
    group.bench_function("native", |b| {
        b.iter(|| {
            let mut out = String::new();
            native_grep(ws.path(), &re, &mut out);
            out
        })
    });
    group.finish();

    let policy = TruncationPolicy::default();
    // What the shell and grep tools declare in their specs.
    let shell = Some(TruncationLimits::new(
        30_000,
        TruncateMode::HeadTail,
        Some(256),
    ));
    let grep = Some(TruncationLimits::new(20_000, TruncateMode::Tail, Some(200)));
    let ten_mb: String = (0..1_000_000).map(|i| format!("{i:09}\n")).collect();
    let mut group = c.benchmark_group("truncate_10mb");
    group.bench_function("shell_head_tail_chars_then_lines", |b| {
        b.iter(|| policy.apply("shell", shell, &ten_mb))
    });
    group.bench_function("grep_tail", |b| {
        b.iter(|| policy.apply("grep", grep, &ten_mb))
    });
    group.finish();
}

criterion_group!(benches, tools);
criterion_main!(benches);
