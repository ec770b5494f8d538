//! A plugin's HTTP request against the same request made natively: the
//! issue-tracker example's `list_issues` (a GET of a small JSON document
//! from a loopback server, through the host's gate, with the credential
//! the host adds) vs reqwest doing the same GET — with a new connection
//! per request, as the plugin's request makes one, and with a pooled
//! connection. The call's fixed cost (a fresh instance per call, no
//! request) is measured beside it, so the request's own cost is the
//! difference.
//!
//! Run: `cargo bench -p sandcrab --bench plugin_http`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::plugin::{LoadedPlugin, PluginHost, PluginHostConfig, PluginSource, ToolCallContext};

const ISSUES: &str = r#"[{"id":1,"title":"deploy key rotates monthly","state":"open"},{"id":2,"title":"flaky test in ci","state":"open"}]"#;

async fn serve() -> SocketAddr {
    let app = axum::Router::new().route(
        "/issues",
        axum::routing::get(|| async { ([("content-type", "application/json")], ISSUES) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The example plugin, asking for and granted `origin`, with a token.
async fn plugin(scratch: &Path, origin: &str) -> (PluginHost, Arc<LoadedPlugin>) {
    let a = sandcrab_bundled_plugins::artifact("examples/issue-tracker").expect("built");
    let dir = scratch.join("issue-tracker");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(a.source_dir).join("plugin.toml")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        manifest.replace("https://tracker.example.com", origin),
    )
    .unwrap();
    let wasm = Path::new(a.wasm_path);
    std::fs::copy(wasm, dir.join(wasm.file_name().unwrap())).unwrap();
    let grant = format!(
        "http = [\"{origin}\"]\nenv = [\"ISSUE_TRACKER_URL\"]\n[credentials.\"{origin}\"]\nheader = \"Authorization\"\nvalue = \"Bearer ${{TRACKER_TOKEN}}\"\n"
    );
    let mut config = PluginHostConfig::new(scratch);
    config
        .policy
        .plugins
        .insert("issue-tracker".into(), toml::from_str(&grant).unwrap());
    config.cache_dir = Some(scratch.join("cache"));
    config.host_env = Some(
        [
            (
                "TRACKER_TOKEN".to_string(),
                "bench-token-123456".to_string(),
            ),
            ("ISSUE_TRACKER_URL".to_string(), origin.to_string()),
        ]
        .into(),
    );
    let mut host = PluginHost::new(config).unwrap();
    let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
    (host, plugin)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let addr = rt.block_on(serve());
    let origin = format!("http://{addr}");
    let (_host, plugin) = rt.block_on(plugin(scratch.path(), &origin));
    let ctx = ToolCallContext::default();
    let url = format!("{origin}/issues?state=open");

    let mut group = c.benchmark_group("plugin_http");
    group.bench_function("plugin_get_small_json", |b| {
        b.to_async(&rt).iter(|| async {
            let out = plugin
                .call_tool("list_issues", "{}", &ctx, None)
                .await
                .unwrap();
            assert!(out.text.contains("deploy key"));
        })
    });
    // The call's fixed cost: the same plugin, a call that fails before any
    // request (an argument the schema refuses is checked by the guest).
    group.bench_function("plugin_call_without_request", |b| {
        b.to_async(&rt).iter(|| async {
            let _ = plugin
                .call_tool("list_issues", r#"{"state":7}"#, &ctx, None)
                .await;
        })
    });
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    group.bench_function("reqwest_get_new_connection", |b| {
        b.to_async(&rt).iter(|| async {
            let body = fresh
                .get(&url)
                .header("authorization", "Bearer bench-token-123456")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let issues: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert!(issues.as_array().is_some());
        })
    });
    let pooled = reqwest::Client::new();
    group.bench_function("reqwest_get_pooled", |b| {
        b.to_async(&rt).iter(|| async {
            let body = pooled.get(&url).send().await.unwrap().text().await.unwrap();
            assert!(body.contains("deploy key"));
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
