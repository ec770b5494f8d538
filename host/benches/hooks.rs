//! What a hook costs per tool call. The peer is how Claude Code (and the
//! hosts that copied its contract) run a hook: `sh -c COMMAND` with the
//! call's JSON on stdin, unconfined. sandcrab's run of the same hook adds
//! the consent check (the files its command names scanned and hashed
//! again), the copy of the consented script, the confinement (namespaces,
//! Landlock, seccomp) and reading the answer.
//!
//! Run: `cargo bench -p sandcrab --bench hooks`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::consent::ConsentRecord;
use sandcrab::hooks::{Facts, HookEvent, Hooks, HooksToml};
use sandcrab::plugin::{PluginHost, PluginHostConfig};
use serde_json::{Map, json};

fn one_hook(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let workspace = ws.path().canonicalize().unwrap();
    let script = workspace.join("guard.sh");
    std::fs::write(&script, "cat > /dev/null\nexit 0\n").unwrap();
    let command = format!("bash {}", script.display());
    let table: HooksToml = toml::from_str(&format!(
        "[[PreToolUse]]\nmatcher = \"shell\"\nhooks = [{{ type = \"command\", command = \"{command}\" }}]\n"
    ))
    .unwrap();
    let host = PluginHost::new(PluginHostConfig::new(&workspace)).unwrap();
    let ctx = host.sandbox_context();
    // Consent to it as it is.
    let (found, _) = sandcrab::hooks::found(&table, None, &BTreeMap::new(), &workspace);
    let pinned = &found[0].pinned;
    let records = BTreeMap::from([(
        pinned.what.clone(),
        ConsentRecord {
            sha256: pinned.sha256.clone(),
            at: None,
            files: pinned
                .files
                .iter()
                .map(|f| (f.path.display().to_string(), f.sha256.clone()))
                .collect(),
        },
    )]);
    let (hooks, warnings) = Hooks::load(&table, None, &records, ctx);
    assert!(warnings.is_empty(), "{warnings:?}");
    let facts = Facts {
        session_id: "bench",
        cwd: &workspace,
        permission_mode: "default",
    };
    let fields = || {
        let mut m = Map::new();
        m.insert("tool_name".into(), "shell".into());
        m.insert("tool_input".into(), json!({"command": "ls"}));
        m
    };
    let fired = rt.block_on(hooks.fire(HookEvent::PreToolUse, Some("shell"), &facts, fields()));
    assert_eq!(
        fired.records[0].verdict,
        sandcrab::tools::HookVerdict::Pass,
        "{fired:?}"
    );
    let input = serde_json::to_vec(&json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}})).unwrap();

    let mut group = c.benchmark_group("pre_tool_use_hook");
    group.bench_function("peer_sh_c_unconfined", |b| {
        b.iter(|| {
            let mut child = Command::new("sh")
                .args(["-c", &command])
                .current_dir(&workspace)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&input).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
        })
    });
    group.bench_function("sandcrab_consented_confined", |b| {
        b.to_async(&rt).iter(|| async {
            let fired = hooks
                .fire(HookEvent::PreToolUse, Some("shell"), &facts, fields())
                .await;
            assert!(fired.answer.failure.is_none());
        })
    });
    group.finish();
}

criterion_group!(benches, one_hook);
criterion_main!(benches);
