//! What confinement costs per program: starting `true` unconfined (a new
//! session only), and confined — user, PID and mount namespaces, a
//! read-only protected path, rlimits, dropped capabilities, Landlock and
//! seccomp — with the network (workspace-write), without it (a network
//! namespace too), and locked.
//!
//! Run: `cargo bench -p sandcrab --bench process_sandbox`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::plugin::SandboxMode;
use sandcrab::process::{self, ChildEnv, Confinement, ConfinementSpec, ProcessRequest};

fn start_true(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let request = ProcessRequest {
        program: process::find_on_path("true", process::DEFAULT_PATH).expect("true is installed"),
        args: Vec::new(),
        cwd: workspace.path().to_path_buf(),
        env: ChildEnv::base(temp.path(), None, None),
        stdin: None,
        timeout: Duration::from_secs(10),
        output_cap: 1 << 20,
        kill_grace: process::KILL_GRACE,
    };
    std::fs::create_dir_all(workspace.path().join(".git/hooks")).unwrap();
    let spec = |mode, network| ConfinementSpec {
        mode,
        read_everywhere: mode == SandboxMode::WorkspaceWrite,
        read: Vec::new(),
        write: vec![workspace.path().to_path_buf(), temp.path().to_path_buf()],
        network,
        unix_sockets: false,
        protected: Some(process::ProtectedWorkspace {
            root: workspace.path().to_path_buf(),
            paths: sandcrab::kept::Protected::default(),
        }),
    };
    let cases: Vec<(&str, Confinement)> = vec![
        ("unconfined", Confinement::none()),
        (
            "workspace_write",
            Confinement::prepare(&spec(SandboxMode::WorkspaceWrite, true)).unwrap(),
        ),
        (
            "workspace_write_no_network",
            Confinement::prepare(&spec(SandboxMode::WorkspaceWrite, false)).unwrap(),
        ),
        (
            "locked",
            Confinement::prepare(&spec(SandboxMode::Locked, false)).unwrap(),
        ),
    ];
    let mut group = c.benchmark_group("start_true");
    for (name, confinement) in &cases {
        let out = rt
            .block_on(process::run(&request, confinement, None))
            .unwrap();
        assert_eq!(out.exit_code, Some(0), "{name}: {out:?}");
        group.bench_function(*name, |b| {
            b.to_async(&rt)
                .iter(|| async { process::run(&request, confinement, None).await.unwrap() })
        });
    }
    group.finish();
}

criterion_group!(benches, start_true);
criterion_main!(benches);
