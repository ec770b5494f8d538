//! A guest that loops forever, exhausts its memory or traps fails only
//! that call, with a clear error; the host stays responsive meanwhile and
//! the next call to the same plugin works.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sandcrab::plugin::{CallError, Policy, ToolCallError};
use serde_json::json;

use crate::support::{Scene, assert_still_works, call};

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_the_deadline_and_the_host_stays_responsive() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let limit = plugin.decision.grants.limits.timeout_ms;
    assert_eq!(limit, 1500, "the fixture's manifest asks for 1.5 s");

    // A task on the same (single-threaded) runtime keeps ticking while the
    // guest spins: the engine yields to the executor.
    let ticks = Arc::new(AtomicU32::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let started = Instant::now();
    let result = call(&plugin, "spin", json!({})).await;
    let elapsed = started.elapsed();
    ticker.abort();

    match result {
        Err(ToolCallError::Runtime(err @ CallError::Timeout { .. })) => {
            assert!(err.to_string().contains("time limit of 1500 ms"), "{err}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(1400) && elapsed < Duration::from_secs(6),
        "{elapsed:?}"
    );
    let ticked = ticks.load(Ordering::Relaxed);
    assert!(
        ticked >= 10,
        "the runtime was starved while the guest spun ({ticked} ticks)"
    );
    assert_still_works(&plugin).await;
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_by_the_cap() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let result = call(&plugin, "memory_bomb", json!({})).await;
    match result {
        Err(ToolCallError::Runtime(err @ CallError::OutOfMemory { .. })) => {
            assert!(err.to_string().contains("memory limit of 64 MiB"), "{err}");
        }
        other => panic!("expected out-of-memory, got {other:?}"),
    }
    assert_still_works(&plugin).await;
}

#[tokio::test]
async fn a_trap_fails_only_that_call() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    match call(&plugin, "trap", json!({})).await {
        Err(ToolCallError::Runtime(err @ CallError::Trap { .. })) => {
            assert!(
                err.to_string().contains("plugin 'hostile-tool' crashed"),
                "{err}"
            );
            // What the plugin author and the model need first: the guest's
            // own panic message and where it panicked; the wasm frames only
            // in the log (-v), never the host's Rust backtrace.
            let text = err.to_string();
            assert!(
                text.contains("panicked at") && text.contains("hostile-tool panicked on purpose"),
                "{text}"
            );
            assert!(text.contains("lib.rs:165"), "{text}");
            assert!(!text.contains("wasm backtrace"), "{text}");
            assert!(
                !text.contains("Stack backtrace") && !text.contains("sandcrab::"),
                "{text}"
            );
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_still_works(&plugin).await;
}

#[tokio::test]
async fn misbehaving_calls_do_not_disturb_concurrent_good_ones() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let bad = {
        let plugin = plugin.clone();
        tokio::spawn(async move { call(&plugin, "spin", json!({})).await })
    };
    for i in 0..20 {
        let text = format!("call {i}");
        assert_eq!(
            call(&plugin, "echo", json!({ "text": text }))
                .await
                .unwrap(),
            text
        );
    }
    assert!(matches!(
        bad.await.unwrap(),
        Err(ToolCallError::Runtime(CallError::Timeout { .. }))
    ));
}
