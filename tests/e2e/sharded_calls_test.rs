//! `sandcrab:shards`: one tool call spread over several instances. The
//! host runs every shard in the plugin's own sandbox under the call's
//! limits, orders the pieces by their keys, merges them in one more
//! instance, fails the call with the first shard that fails (stopping the
//! others), and never waits for extra
//! instance slots. The coding tools' `grep` answers the same sharded as
//! whole.

use sandcrab::plugin::manifest::Limits;
use sandcrab::plugin::{CallError, Policy, ToolCallError, ToolFailure};
use serde_json::json;

use crate::support::{
    Scene, assert_still_works, call, coding_tools_sharded, run_tool, with_limits,
};

/// What `shard_probe` merges from `count` shards of `pieces` each.
fn merged(count: u64, pieces: u64) -> String {
    let mut text = format!("merged {} pieces, stopped early true\n", count * pieces);
    for place in 0..count * pieces {
        let (k, index) = (place / count, place % count);
        text.push_str(&format!("shard {index}/{count} piece {k}\n"));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_call_runs_every_shard_and_merges_their_pieces_in_key_order() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile_sharded(Policy::default(), 3).await;
    let spec = plugin
        .tools
        .iter()
        .find(|t| t.name == "shard_probe")
        .unwrap();
    assert!(spec.traits.shardable);
    let echo = plugin.tools.iter().find(|t| t.name == "echo").unwrap();
    assert!(!echo.traits.shardable, "only the tools the export names");

    let out = call(&plugin, "shard_probe", json!({"pieces": 4}))
        .await
        .unwrap();
    assert_eq!(out, merged(3, 4));
    // Again: the slots the shards held are free again.
    let out = call(&plugin, "shard_probe", json!({"pieces": 1}))
        .await
        .unwrap();
    assert_eq!(out, merged(3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_sharded_only_over_free_instance_slots() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile_sharded(Policy::default(), 1).await;
    let out = call(&plugin, "shard_probe", json!({"pieces": 2}))
        .await
        .unwrap();
    assert_eq!(out, "called whole", "max_shards = 1 never shards");

    let slots = |n: u32| {
        with_limits(
            "hostile-tool",
            Limits {
                max_instances: Some(n),
                ..Limits::default()
            },
        )
    };
    let (_host, plugin) = scene.hostile_sharded(slots(1), 4).await;
    let out = call(&plugin, "shard_probe", json!({"pieces": 2}))
        .await
        .unwrap();
    assert_eq!(out, "called whole", "one slot: no shard beside it");

    let (_host, plugin) = scene.hostile_sharded(slots(2), 4).await;
    let out = call(&plugin, "shard_probe", json!({"pieces": 2}))
        .await
        .unwrap();
    assert_eq!(out, merged(2, 2), "two slots: two shards");
    // A call holding one slot leaves room for no second shard.
    let busy = call(&plugin, "sleep", json!({"seconds": 1}));
    let probe = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        call(&plugin, "shard_probe", json!({"pieces": 2})).await
    };
    let (busy, probe) = tokio::join!(busy, probe);
    busy.unwrap();
    assert_eq!(probe.unwrap(), "called whole");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_runs_in_a_slot_its_shards_held_not_behind_calls_queued_meanwhile() {
    let scene = Scene::new();
    let two_slots = with_limits(
        "hostile-tool",
        Limits {
            max_instances: Some(2),
            ..Limits::default()
        },
    );
    let (_host, plugin) = scene.hostile_sharded(two_slots, 4).await;
    let started = std::time::Instant::now();
    // Two shards hold both slots for 300 ms; two calls queue behind them
    // and then hold both slots for a second (the time limit is 1.5 s).
    let sharded = async {
        let out = call(
            &plugin,
            "shard_probe",
            json!({"pieces": 1, "sleep_ms": 300}),
        )
        .await;
        (out, started.elapsed())
    };
    let queued = || async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let out = call(&plugin, "sleep", json!({"seconds": 1})).await;
        (out, started.elapsed())
    };
    let ((sharded, merged_at), (first, first_at), (second, _)) =
        tokio::join!(sharded, queued(), queued());
    assert_eq!(sharded.unwrap(), merged(2, 1));
    first.unwrap();
    second.unwrap();
    assert!(
        merged_at < first_at,
        "the merge waited behind the queued calls: merged at {merged_at:?}, they ended at {first_at:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_too_many_to_merge_in_one_instance_make_the_call_run_whole() {
    let scene = Scene::new();
    let small = with_limits(
        "hostile-tool",
        Limits {
            memory_mb: Some(16),
            ..Limits::default()
        },
    );
    let (_host, plugin) = scene.hostile_sharded(small, 2).await;
    let out = call(&plugin, "shard_probe", json!({"pieces": 3}))
        .await
        .unwrap();
    assert_eq!(out, merged(2, 3));
    // 2 x 60,000 pieces of ~50 bytes: more than a quarter of 16 MiB.
    let out = call(&plugin, "shard_probe", json!({"pieces": 60_000}))
        .await
        .unwrap();
    assert!(out == "called whole", "{}", &out[..out.len().min(200)]);
    assert_still_works(&plugin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_trapping_or_spinning_shard_fails_the_call_and_the_plugin_keeps_working() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile_sharded(Policy::default(), 3).await;

    match call(&plugin, "shard_probe", json!({"pieces": 1, "fail": 1})).await {
        Err(ToolCallError::Tool(ToolFailure::Failed(m))) => assert_eq!(m, "shard 1 refused"),
        other => panic!("expected shard 1's failure, got {other:?}"),
    }
    match call(&plugin, "shard_probe", json!({"pieces": 1, "trap": 2})).await {
        Err(ToolCallError::Runtime(CallError::Trap { message, .. })) => {
            assert!(message.contains("unreachable"), "{message}")
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    // A failing shard does not wait for a spinning one: it is stopped.
    let started = std::time::Instant::now();
    match call(&plugin, "shard_probe", json!({"fail": 2, "spin": 0})).await {
        Err(ToolCallError::Tool(ToolFailure::Failed(m))) => assert_eq!(m, "shard 2 refused"),
        other => panic!("expected shard 2's failure, got {other:?}"),
    }
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    match call(&plugin, "shard_probe", json!({"pieces": 1, "spin": 0})).await {
        Err(ToolCallError::Runtime(CallError::Timeout { limit_ms, .. })) => {
            assert_eq!(limit_ms, 1500)
        }
        other => panic!("expected the time limit, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_still_works(&plugin).await;
    let out = call(&plugin, "shard_probe", json!({"pieces": 2}))
        .await
        .unwrap();
    assert_eq!(out, merged(3, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_runs_in_the_plugins_sandbox() {
    let scene = Scene::new();
    std::fs::write(scene.outside().join("secret.txt"), "top secret").unwrap();
    std::fs::write(scene.workspace().join("ok.txt"), "inside").unwrap();
    let (_host, plugin) = scene.hostile_sharded(Policy::default(), 3).await;

    let out = call(&plugin, "shard_probe", json!({"read": "/workspace/ok.txt"}))
        .await
        .unwrap();
    assert_eq!(
        out.matches("read /workspace/ok.txt: inside").count(),
        3,
        "{out}"
    );

    for path in [
        scene.outside().join("secret.txt").display().to_string(),
        "/workspace/../outside/secret.txt".to_string(),
        "/etc/passwd".to_string(),
    ] {
        let out = call(&plugin, "shard_probe", json!({"read": path}))
            .await
            .unwrap();
        assert_eq!(out.matches("cannot read").count(), 3, "{out}");
        assert!(
            !out.contains("top secret") && !out.contains("root:"),
            "{out}"
        );
    }
}

/// A tree with ignore rules, a binary file, CRLF lines and enough files
/// for every shard to have work.
fn grep_tree(scene: &Scene) {
    let ws = scene.workspace();
    let write = |path: &str, body: &str| {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    };
    write(".gitignore", "target/\n*.log\n");
    write("target/gen.rs", "fn needle() {}\n");
    write("trace.log", "needle\n");
    write("image.bin", "needle\0\x01\x02");
    write("windows.txt", "needle one\r\nnothing\r\nneedle two\r\n");
    write("lib/.gitignore", "secret_*.rs\n");
    write("lib/secret_1.rs", "needle\n");
    for i in 0..40 {
        let mut body = String::new();
        for line in 0..(i % 6) {
            body.push_str(&format!("let x{line} = {i};\n// needle {i}:{line}\n"));
        }
        write(&format!("lib/m{}/file{i:02}.rs", i % 5), &body);
        write(
            &format!("notes/n{i:02}.md", i = (i * 11) % 40),
            "Needle in notes\n",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_sharded_answers_exactly_what_grep_whole_answers() {
    let scene = Scene::new();
    grep_tree(&scene);
    let (whole_host, whole) = coding_tools_sharded(&scene, Policy::default(), 1).await;
    let (sharded_host, sharded) = coding_tools_sharded(&scene, Policy::default(), 3).await;
    let grep = sharded_host
        .plugins()
        .iter()
        .flat_map(|p| p.tools.iter())
        .find(|t| t.name == "grep")
        .unwrap();
    assert!(grep.traits.shardable, "grep is shardable");
    let sharded_calls = || {
        sharded_host
            .plugins()
            .iter()
            .map(|p| p.sharded_calls())
            .sum::<u64>()
    };

    let cases = [
        json!({"pattern": "needle"}),
        json!({"pattern": "needle", "max_results": 1}),
        json!({"pattern": "needle", "max_results": 9}),
        json!({"pattern": "needle", "max_results": 100000}),
        json!({"pattern": "needle", "case_insensitive": true, "max_results": 100000}),
        json!({"pattern": "needle \\d+:3$", "max_results": 100000}),
        json!({"pattern": "needle", "glob_filter": "lib/m3/*.rs"}),
        json!({"pattern": "needle", "path": "lib/m2"}),
        json!({"pattern": "needle", "path": "windows.txt"}),
        json!({"pattern": "not present anywhere"}),
        json!({"pattern": "needle", "path": "missing-dir"}),
        json!({"pattern": "(unclosed"}),
    ];
    for case in cases {
        let before = sharded_calls();
        let a = run_tool(&whole, "grep", case.clone()).await;
        let b = run_tool(&sharded, "grep", case.clone()).await;
        assert_eq!(
            (a.is_error(), &a.content),
            (b.is_error(), &b.content),
            "{case}"
        );
        assert_eq!(sharded_calls(), before + 1, "{case} ran as shards");
    }
    assert!(
        whole_host.plugins().iter().all(|p| p.sharded_calls() == 0),
        "max_shards = 1 runs calls whole"
    );
    let all = run_tool(
        &sharded,
        "grep",
        json!({"pattern": "needle", "max_results": 100000}),
    )
    .await;
    for absent in ["target/", "trace.log", "image.bin", "secret_1.rs", "notes/"] {
        assert!(!all.content.contains(absent), "{absent}: {}", all.content);
    }
    // 40 files with 0..=5 needles each, plus two CRLF lines.
    let expected: usize = (0..40).map(|i| i % 6).sum::<usize>() + 2;
    assert_eq!(all.content.lines().count(), expected, "{}", all.content);
    assert!(all.content.contains("windows.txt:3:needle two\n"));
}
