//! Programs started by plugins are confined: Landlock rules (workspace-write
//! and locked), no network unless allowed, confinement inherited by
//! children, and `off` really is off (so these tests can tell the
//! difference). Exercised through the real `shell` tool.

use sandcrab::plugin::Policy;
use sandcrab::plugin::policy::{PolicyMode, SandboxMode};
use sandcrab::process::support;
use sandcrab::tools::ToolRegistry;
use serde_json::json;

use crate::support::{Scene, coding_tools, confinable, run_tool};

fn policy(sandbox: SandboxMode, network: Option<bool>) -> Policy {
    Policy {
        sandbox: Some(sandbox),
        network,
        ..Policy::default()
    }
}

async fn shell(tools: &ToolRegistry, command: &str) -> String {
    let out = run_tool(
        tools,
        "shell",
        json!({ "command": command, "timeout_ms": 20000 }),
    )
    .await;
    assert!(
        !out.is_error(),
        "the shell tool itself failed: {}",
        out.content
    );
    out.content
}

fn exit_code(output: &str) -> i32 {
    let status = output
        .lines()
        .rev()
        .find(|l| l.starts_with("[exit code "))
        .unwrap_or_else(|| panic!("no status in {output}"));
    status["[exit code ".len()..]
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn workspace_write_allows_the_workspace_and_refuses_outside() {
    if !confinable() {
        return locked_mode_fails_closed_without_kernel_support().await;
    }
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, policy(SandboxMode::WorkspaceWrite, None)).await;
    let outside = scene.outside().join("escape.txt");

    let out = shell(&tools, "echo inside > made.txt && cat made.txt").await;
    assert_eq!(exit_code(&out), 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("made.txt")).unwrap(),
        "inside\n"
    );

    let out = shell(&tools, &format!("echo pwned > {}", outside.display())).await;
    assert_ne!(exit_code(&out), 0, "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        out.contains("[note: the sandbox (workspace-write mode) may have refused this"),
        "{out}"
    );
    assert!(!outside.exists(), "nothing was written outside");

    let out = shell(&tools, "cat /etc/hostname").await;
    assert_eq!(exit_code(&out), 0, "reading anywhere is allowed: {out}");
    let out = shell(
        &tools,
        "echo $TMPDIR; echo x > $TMPDIR/scratch && cat $TMPDIR/scratch",
    )
    .await;
    assert!(
        out.contains("sandcrab-") && out.contains("\nx\n"),
        "the private temp dir is writable: {out}"
    );
}

#[tokio::test]
async fn locked_mode_reads_only_the_workspace_and_has_no_network() {
    if !confinable() {
        return locked_mode_fails_closed_without_kernel_support().await;
    }
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("mine.txt"), "workspace data\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let locked = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    let (_h, tools) = coding_tools(&scene, locked).await;

    let out = shell(&tools, "echo ok").await;
    assert!(out.starts_with("ok\n") && exit_code(&out) == 0, "{out}");
    let out = shell(&tools, "cat mine.txt").await;
    assert!(out.starts_with("workspace data\n"), "{out}");
    let out = shell(&tools, "cat /etc/passwd").await;
    assert_ne!(exit_code(&out), 0, "{out}");
    assert!(!out.contains("root:"), "{out}");
    let out = shell(&tools, &format!("ls {}", scene.outside().display())).await;
    assert_ne!(exit_code(&out), 0, "{out}");
    let out = shell(
        &tools,
        "test \"$HOME\" = \"$TMPDIR\" && echo home-is-private",
    )
    .await;
    assert!(out.contains("home-is-private"), "{out}");

    let out = shell(&tools, &connect_command(port)).await;
    assert!(
        !out.contains("CONNECTED"),
        "locked mode reached the network: {out}"
    );
    assert!(
        out.contains("Network is unreachable"),
        "the probe ran and was cut off: {out}"
    );
}

#[tokio::test]
async fn network_is_cut_when_the_policy_says_so() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The default: the shell's programs have no network unless a call is
    // given it.
    let (_h, default) = coding_tools(&scene, policy(SandboxMode::WorkspaceWrite, None)).await;
    let out = shell(&default, &connect_command(port)).await;
    assert!(!out.contains("CONNECTED"), "{out}");
    assert!(out.contains("Network is unreachable"), "{out}");
    assert!(
        out.contains("network: true"),
        "it is told how to ask: {out}"
    );
    // Granted by name: every call has it (and the probe works).
    let mut granted = policy(SandboxMode::WorkspaceWrite, None);
    granted.plugins.insert(
        "coding-tools".into(),
        sandcrab::plugin::policy::PluginGrant {
            network: true,
            ..Default::default()
        },
    );
    let (_h, open) = coding_tools(&scene, granted.clone()).await;
    let out = shell(&open, &connect_command(port)).await;
    assert!(
        out.contains("CONNECTED"),
        "the grant gives the network: {out}"
    );
    // `[policy] network = false` takes even a grant away.
    granted.network = Some(false);
    let (_h, closed) = coding_tools(&scene, granted).await;
    let out = shell(&closed, &connect_command(port)).await;
    assert!(!out.contains("CONNECTED"), "{out}");
    assert!(out.contains("Network is unreachable"), "{out}");
}

/// A command that prints CONNECTED if it can open a TCP connection to the
/// port on 127.0.0.1.
fn connect_command(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\""
    )
}

#[tokio::test]
async fn children_and_background_processes_stay_confined() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, policy(SandboxMode::WorkspaceWrite, None)).await;
    let a = scene.outside().join("from-grandchild");
    let b = scene.outside().join("from-background");
    let out = shell(
        &tools,
        &format!(
            "sh -c 'sh -c \"echo x > {}\"'; (sleep 0.2; echo y > {}; echo bg-done > bg.txt) & wait",
            a.display(),
            b.display()
        ),
    )
    .await;
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        scene.workspace().join("bg.txt").exists(),
        "the background job ran: {out}"
    );
    assert!(
        !a.exists() && !b.exists(),
        "confinement is inherited across fork/exec"
    );
}

#[tokio::test]
async fn off_really_is_unconfined() {
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, policy(SandboxMode::Off, None)).await;
    let outside = scene.outside().join("escape.txt");
    let out = shell(&tools, &format!("echo written > {}", outside.display())).await;
    assert_eq!(exit_code(&out), 0, "{out}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "written\n");
}

/// Without kernel support, locked mode refuses to run anything.
async fn locked_mode_fails_closed_without_kernel_support() {
    let scene = Scene::new();
    let locked = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    let (_h, tools) = coding_tools(&scene, locked).await;
    let out = run_tool(&tools, "shell", json!({ "command": "echo should-not-run" })).await;
    assert!(
        out.is_error() && out.content.contains("process sandbox unavailable"),
        "{}",
        out.content
    );
}

#[test]
fn this_machine_can_confine() {
    // Documents the environment the suite expects; if this fails, the
    // confinement tests above only checked that locked mode fails closed.
    let s = support();
    assert!(s.landlock(), "Landlock is not available on this kernel");
    assert_eq!(
        s.missing(SandboxMode::Locked, false),
        Vec::<&str>::new(),
        "this kernel cannot enforce locked mode: {s:?}"
    );
}
