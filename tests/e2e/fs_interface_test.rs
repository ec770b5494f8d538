//! `sandcrab:fs/directories`, the fast directory and file reads, driven by
//! a hostile guest: it reads the plugin's own mounts and nothing else — not
//! by `..`, not through a link (to a file or a directory), not by a name
//! with a `/` — and a FIFO never blocks it.

use std::time::{Duration, Instant};

use sandcrab::plugin::{Policy, ToolCallError, ToolFailure};
use serde_json::json;

use crate::support::{Scene, assert_still_works, call};

fn outcome(result: Result<String, ToolCallError>) -> String {
    match result {
        Ok(text) => format!("ok: {text}"),
        Err(ToolCallError::Tool(ToolFailure::Failed(m)))
        | Err(ToolCallError::Tool(ToolFailure::Denied(m))) => format!("err: {m}"),
        other => panic!("expected a tool result, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fs_interface_reads_the_mounts_and_nothing_outside_them() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let outside = scene.outside();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    std::fs::create_dir_all(outside.join("vault")).unwrap();
    std::fs::write(outside.join("vault/key.txt"), "top secret key").unwrap();
    std::fs::write(ws.join("ok.txt"), "inside").unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/inner.txt"), "inner").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("secretlink")).unwrap();
    std::os::unix::fs::symlink(outside.join("vault"), ws.join("vaultlink")).unwrap();
    std::os::unix::fs::symlink("../..", ws.join("sub/up")).unwrap();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let probe = |dir: &str, op: &str, name: &str| {
        let args = json!({"dir": dir, "op": op, "name": name});
        let plugin = plugin.clone();
        async move { outcome(call(&plugin, "fs_probe", args).await) }
    };

    // What the plugin was granted, it reads.
    let listed = probe("/workspace", "list", "").await;
    assert!(
        listed.contains("ok.txt") && listed.contains("sub"),
        "{listed}"
    );
    let read = probe("/workspace", "read", "ok.txt").await;
    assert!(read.contains("6 bytes, complete true: inside"), "{read}");
    let sub = probe("/workspace", "open-dir", "sub").await;
    assert!(sub.contains("inner.txt"), "{sub}");
    let inner = probe("/workspace/sub", "read", "inner.txt").await;
    assert!(inner.contains("inner"), "{inner}");

    // Everything else is refused.
    let host_outside = outside.display().to_string();
    let attempts: Vec<(String, &str, &str)> = vec![
        ("/workspace/..".into(), "list", ""),
        ("/workspace/../outside".into(), "list", ""),
        (host_outside.clone(), "list", ""),
        ("/etc".into(), "read", "passwd"),
        ("/".into(), "list", ""),
        ("/workspace/vaultlink".into(), "read", "key.txt"),
        ("/workspace/sub/up".into(), "list", ""),
        ("/workspace".into(), "open-dir", ".."),
        ("/workspace".into(), "open-dir", "vaultlink"),
        ("/workspace".into(), "open-dir", "sub/up"),
        ("/workspace/sub".into(), "open-dir", "up"),
        ("/workspace".into(), "read", "secretlink"),
        ("/workspace".into(), "read-follow", "secretlink"),
        ("/workspace".into(), "read", "../outside/secret.txt"),
        ("/workspace".into(), "read", "vaultlink/key.txt"),
        ("/workspace".into(), "read", ""),
        ("/workspace".into(), "read", "."),
    ];
    for (dir, op, name) in &attempts {
        let got = probe(dir, op, name).await;
        assert!(got.starts_with("err: "), "{dir} {op} {name}: {got}");
        assert!(!got.contains("top secret"), "{dir} {op} {name}: {got}");
    }
    let times = probe("/workspace", "modified", "../outside/secret.txt").await;
    assert_eq!(times, "ok: [None]");
    let times = probe("/workspace", "modified", "secretlink").await;
    assert!(
        times.starts_with("ok: [Some("),
        "the link itself, not its target: {times}"
    );
    assert_still_works(&plugin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_at_once_and_a_big_file_comes_in_bounded_parts() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let fifo = ws.join("pipe");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo on a temp path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::write(ws.join("big.bin"), vec![b'x'; 20 << 20]).unwrap();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    let started = Instant::now();
    for op in ["read", "read-follow"] {
        let got = outcome(
            call(
                &plugin,
                "fs_probe",
                json!({"dir": "/workspace", "op": op, "name": "pipe"}),
            )
            .await,
        );
        assert!(got.contains("not a regular file"), "{got}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The host reads at most 16 MiB per call, whatever the guest asks.
    let got = outcome(
        call(
            &plugin,
            "fs_probe",
            json!({"dir": "/workspace", "op": "read", "name": "big.bin"}),
        )
        .await,
    );
    assert!(
        got.contains(&format!("{} bytes, complete false", 16 << 20)),
        "{}",
        &got[..got.len().min(80)]
    );
}

/// Every open directory is a host file descriptor: a guest that hoards
/// them is refused at a bound, and its next call starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_hoard_host_file_descriptors() {
    let scene = Scene::new();
    let (_host, plugin) = scene.hostile(Policy::default()).await;
    for _ in 0..2 {
        let got = outcome(
            call(
                &plugin,
                "fs_probe",
                json!({"dir": "/workspace", "op": "hoard"}),
            )
            .await,
        );
        assert!(got.starts_with("ok: refused after 256:"), "{got}");
        assert!(got.contains("too many open directories"), "{got}");
    }
    // Files opened through WASI's filesystem are descriptors too: a call
    // that never closes them is stopped at the store's bound (it traps),
    // long before the host runs out, and the plugin keeps working.
    std::fs::write(scene.workspace().join("f.txt"), "x").unwrap();
    for _ in 0..2 {
        let got = call(
            &plugin,
            "fs_probe",
            json!({"dir": "/workspace", "op": "hoard-wasi", "name": "f.txt"}),
        )
        .await;
        let err = got.expect_err("hoarding without end");
        assert!(
            err.to_string()
                .contains("held more than 1024 open resources"),
            "{err}"
        );
    }
    assert_still_works(&plugin).await;
}
