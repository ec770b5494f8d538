//! Host overhead of one agent turn, the model excluded: a scripted client
//! answers instantly with one `read_file` call through the WASM plugin,
//! then with text. Measured per submitted input (one tool round, two model
//! turns), with a fresh session each time (its creation not timed).
//!
//! Run: `cargo bench -p sandcrab --bench agent_turn`.

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sandcrab::agent::{Profile, Session, SessionConfig, SessionParts};
use sandcrab::llm::scripted::{ScriptedClient, text, tool_calls};
use sandcrab::plugin::{PluginHost, PluginHostConfig, discovery};
use sandcrab::tools::ToolRegistry;
use serde_json::json;

fn turn(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let mut config = PluginHostConfig::new(ws.path());
    config.cache_dir = None;
    let mut host = PluginHost::new(config).unwrap();
    rt.block_on(host.load_all(&discovery::bundled()));
    let tools = ToolRegistry::from_plugins(host.plugins());
    let profile = Arc::new(rt.block_on(Profile::load(&host, "anthropic")).unwrap());
    let registry = profile.tools(&tools);
    let new_session = || {
        let client = Arc::new(ScriptedClient::new(vec![
            tool_calls(&[("c1", "read_file", json!({"file_path": "a.txt"}))]),
            text("It says alpha and beta."),
        ]));
        Session::new(SessionParts::new(
            client,
            profile.clone(),
            registry.clone().into(),
            SessionConfig::new("bench"),
            ws.path().to_path_buf(),
        ))
    };
    let check = new_session();
    rt.block_on(check.submit("read a.txt")).unwrap();
    assert_eq!(
        check.last_assistant_text().as_deref(),
        Some("It says alpha and beta.")
    );

    c.bench_function("agent_turn_with_one_wasm_tool_call", |b| {
        b.iter_batched(
            || {
                let s = new_session();
                let events = s.events();
                (s, events)
            },
            |(session, events)| {
                rt.block_on(session.submit("read a.txt")).unwrap();
                drop(events);
                session
            },
            BatchSize::PerIteration,
        )
    });
}

criterion_group!(benches, turn);
criterion_main!(benches);
