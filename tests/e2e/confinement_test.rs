//! Findings 2, 6, 7, 9, 10, 12 and 13 of the trust-boundary review, and
//! the protected paths: a program started for a plugin gets exactly that
//! plugin's capabilities, dies with its call, cannot reach the host's
//! secrets, and cannot plant configuration that makes other programs run
//! code later. Each test performs the attack for real.

use std::path::Path;
use std::process::Command;

use sandcrab::plugin::Policy;
use sandcrab::plugin::manifest::Access;
use sandcrab::plugin::policy::{PluginGrant, PolicyMode, SandboxMode};
use sandcrab::process::support;
use sandcrab::tools::ToolRegistry;
use serde_json::{Value, json};

use crate::support::{
    Scene, call, coding_tools, confinable, gone_soon, grant, run_tool, sandcrab_cmd,
};

async fn shell(tools: &ToolRegistry, command: &str) -> String {
    let out = run_tool(
        tools,
        "shell",
        json!({ "command": command, "timeout_ms": 20000 }),
    )
    .await;
    assert!(!out.is_error(), "the shell tool failed: {}", out.content);
    out.content
}

/// Run `sh -c script` through the hostile plugin; its JSON result.
async fn hostile_sh(plugin: &sandcrab::plugin::LoadedPlugin, script: &str) -> Value {
    let out = call(
        plugin,
        "run",
        json!({"program": "sh", "args": ["-c", script], "timeout_ms": 20000}),
    )
    .await
    .expect("the run tool itself works");
    serde_json::from_str(&out).unwrap()
}

fn sh_grant() -> PluginGrant {
    PluginGrant {
        programs: vec!["sh".into(), "cat".into()],
        ..PluginGrant::default()
    }
}

/// A TCP connection attempt to a listener on loopback, from a program.
fn connect_script(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\" 2>&1"
    )
}

#[tokio::test]
async fn a_read_only_plugins_programs_cannot_write_or_reach_the_network() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The plugin may read the workspace and run sh; it asked for the
    // network and was not given it.
    let (_host, plugin) = scene.hostile(grant("hostile-tool", sh_grant())).await;
    assert_eq!(plugin.decision.grants.workspace, Access::Read);
    assert!(!plugin.decision.grants.network);

    let out = hostile_sh(&plugin, "echo pwned > pwned.txt; echo rc=$?").await;
    assert!(!scene.workspace().join("pwned.txt").exists(), "{out}");
    let out = hostile_sh(&plugin, &connect_script(port)).await;
    assert!(
        !out["stdout"].as_str().unwrap().contains("CONNECTED"),
        "the child of a plugin without network reached the network: {out}"
    );
}

#[tokio::test]
async fn each_plugin_has_its_own_temp_dir_and_home() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let mut policy = grant("hostile-tool", sh_grant());
    policy.plugins.get_mut("hostile-tool").unwrap().workspace = Access::Read;
    let (mut host, plugin) = scene.hostile(policy).await;
    let planted = hostile_sh(
        &plugin,
        "printf '[alias]\\n\\tst = !touch PLANTED\\n' > \"$HOME/.gitconfig\"; echo \"$TMPDIR\"; touch \"$TMPDIR/planted\"",
    )
    .await;
    let hostile_tmp = planted["stdout"].as_str().unwrap().trim().to_string();
    assert!(!hostile_tmp.is_empty(), "{planted}");

    host.load_all(&sandcrab::plugin::discovery::bundled()).await;
    let tools = ToolRegistry::from_plugins(host.plugins());
    let out = shell(
        &tools,
        "echo \"tmp=$TMPDIR\"; test -e \"$TMPDIR/planted\" && echo SHARED-TMP; test -e \"$TMPDIR/.gitconfig\" && echo SHARED-HOME; true",
    )
    .await;
    assert!(!out.contains(&format!("tmp={hostile_tmp}\n")), "{out}");
    assert!(
        !out.contains("SHARED-TMP") && !out.contains("SHARED-HOME"),
        "{out}"
    );
}

#[tokio::test]
async fn locked_mode_pins_locked_confinement_and_passes_no_unnamed_variable() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = Policy {
        mode: PolicyMode::Locked,
        sandbox: Some(SandboxMode::Off),
        network: Some(true),
        ..Policy::default()
    };
    let (_h, tools) = coding_tools(&scene, policy).await;
    let out = shell(&tools, "cat /etc/hostname; echo rc=$?").await;
    assert!(
        out.contains("rc=1") || out.contains("Permission denied"),
        "{out}"
    );
    let out = shell(&tools, &connect_script(port)).await;
    assert!(!out.contains("CONNECTED"), "{out}");
    let out = shell(&tools, "env | sort").await;
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        // Besides the base: sandcrab's own git settings (no value of the
        // host's environment).
        let sandcrabs_git = name.starts_with("GIT_CONFIG_") || *name == "GIT_TERMINAL_PROMPT";
        assert!(
            ["PATH", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"].contains(name)
                || sandcrabs_git,
            "locked mode passed {name} unasked: {out}"
        );
    }
    assert!(names.contains(&"GIT_CONFIG_COUNT"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_off_from_a_config_file_is_a_warning_event() {
    let scene = Scene::new();
    let server = crate::mock_llm::MockLlm::start().await;
    scene.write_user_config(&format!(
        "provider = \"openai-compatible\"\n[providers.openai-compatible]\nbase_url = \"{}\"\nmodel = \"local\"\n[policy]\nsandbox = \"off\"\n",
        server.base_url()
    ));
    server.push(crate::llm_transcripts::stream(
        sandcrab::llm::ProviderKind::OpenAiCompatible,
        &crate::llm_transcripts::Answer::Text(vec!["ok"]),
    ));
    let out = sandcrab_cmd(&scene)
        .args(["run", "--json", "-w"])
        .arg(scene.workspace())
        .arg("hi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let warned = String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let e: Value = serde_json::from_str(l).unwrap();
        e["kind"] == "WARNING"
            && e["data"]["message"]
                .as_str()
                .unwrap()
                .contains("sandbox mode is off")
    });
    assert!(warned, "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test]
async fn a_child_that_calls_setsid_dies_with_the_call() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = shell(
        &tools,
        "setsid sleep 313.25 < /dev/null > /dev/null 2>&1 & sleep 0.3; echo started",
    )
    .await;
    assert!(out.contains("started"), "{out}");
    assert!(
        gone_soon("sleep 313.25"),
        "a setsid'd grandchild outlived the call"
    );
}

#[tokio::test]
async fn children_run_under_rlimits() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = shell(&tools, "echo core=$(ulimit -c) fsize=$(ulimit -f)").await;
    assert!(out.contains("core=0 "), "{out}");
    assert!(!out.contains("fsize=unlimited"), "{out}");
}

#[tokio::test]
async fn locked_children_reach_no_unix_socket() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let path = scene.outside().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("sandcrab-test-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    let policy = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    let (_h, tools) = coding_tools(&scene, policy).await;
    let script = format!(
        "python3 -c \"import socket\nfor a in ['{}', '\\0{abstract_name}']:\n  try:\n    s = socket.socket(socket.AF_UNIX); s.connect(a); print('CONNECTED', repr(a))\n  except Exception as e: print('refused', type(e).__name__)\"",
        path.display()
    );
    let out = shell(&tools, &script).await;
    assert!(!out.contains("CONNECTED"), "{out}");
    assert_eq!(out.matches("refused").count(), 2, "the probe ran: {out}");
    assert!(listener.accept().is_err() && abstract_listener.accept().is_err());
}

#[tokio::test]
async fn a_granted_program_is_no_trampoline_out_of_the_grants() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let secret = scene.outside().join("id_ed25519");
    std::fs::write(&secret, "PRIVATE KEY").unwrap();
    let (_host, plugin) = scene.hostile(grant("hostile-tool", sh_grant())).await;
    let out = call(
        &plugin,
        "run",
        json!({"program": "cat", "args": [secret.display().to_string()]}),
    )
    .await
    .unwrap();
    assert!(!out.contains("PRIVATE KEY"), "{out}");
    let out = hostile_sh(
        &plugin,
        &format!(
            "find {} 2>&1; cat {} 2>&1",
            scene.outside().display(),
            secret.display()
        ),
    )
    .await;
    assert!(!out.to_string().contains("PRIVATE KEY"), "{out}");
    // The workspace (granted read) and system runtime paths still work.
    std::fs::write(scene.workspace().join("notes.txt"), "fine").unwrap();
    let out = hostile_sh(&plugin, "cat notes.txt; ls /usr/bin/env").await;
    assert!(out["stdout"].as_str().unwrap().contains("fine"), "{out}");
}

#[tokio::test]
async fn children_cannot_read_the_hosts_environment() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let canary = "canary-5cf1e2d3";
    let probe = format!(
        "{{\"command\": \"for f in /proc/[0-9]*/environ; do tr '\\\\0' '\\\\n' < $f 2>/dev/null; done | grep -c {canary}; true\"}}"
    );
    let run = |sandbox: &str| {
        sandcrab_cmd(&scene)
            .env("SANDCRAB_PROBE_API_KEY", canary)
            .args(["tool", "call", "shell", "--sandbox", sandbox, "-w"])
            .arg(scene.workspace())
            .args(["--args", &probe])
            .output()
            .unwrap()
    };
    let confined = run("workspace-write");
    let text = String::from_utf8_lossy(&confined.stdout);
    assert!(confined.status.success(), "{text}");
    assert!(
        text.starts_with("0\n"),
        "a confined child read sandcrab's environment: {text}"
    );
    // The probe itself works: unconfined (as root here) it finds the key.
    let off = run("off");
    let text = String::from_utf8_lossy(&off.stdout);
    if unsafe { libc::geteuid() } == 0 {
        assert!(!text.starts_with("0\n"), "the probe is blind: {text}");
    }
}

/// `git` with the repository in `dir`.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn protected_paths_stay_read_only_for_programs_while_commits_work() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(git(&ws, &["init", "-q"]).status.success());
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join(".sandcrab")).unwrap();
    std::fs::write(ws.join("sandcrab.toml"), "model = \"m\"\n").unwrap();
    let config_before = std::fs::read(ws.join(".git/config")).unwrap();
    let hooks = || {
        let mut names: Vec<_> = std::fs::read_dir(ws.join(".git/hooks"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        names
    };
    let hooks_before = hooks();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let attacks = [
        "printf '[core]\\n\\tfsmonitor = touch /tmp/FSMON\\n' >> .git/config",
        "rm -f .git/config",
        "mv .git/config .git/config.old",
        "umount .git/config; echo x >> .git/config",
        "umount -l .git/config; echo x >> .git/config",
        "printf '#!/bin/sh\\ntouch /tmp/HOOKED\\n' > .git/hooks/pre-commit",
        "rm -rf .git/hooks",
        "echo '[policy]' >> sandcrab.toml",
        "mkdir -p .sandcrab/plugins/evil",
        "ln -sf /etc/passwd .sandcrab/link",
    ];
    for attack in attacks {
        shell(&tools, attack).await;
    }
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(hooks(), hooks_before);
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("sandcrab.toml")).unwrap(),
        "model = \"m\"\n"
    );
    assert!(
        std::fs::read_dir(ws.join(".sandcrab"))
            .unwrap()
            .next()
            .is_none()
    );

    // The rest of .git stays writable: committing works.
    std::fs::write(ws.join("file.txt"), "content").unwrap();
    let out = shell(
        &tools,
        "git add file.txt && git -c user.name=a -c user.email=a@b commit -q -m one && git log --oneline | wc -l",
    )
    .await;
    assert!(out.starts_with("1\n"), "{out}");
}

#[tokio::test]
async fn protection_can_be_lifted_by_the_operator() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("sandcrab.toml"), "").unwrap();
    let policy = Policy {
        protected_paths: Some(Vec::new()),
        ..Policy::default()
    };
    let (_h, tools) = coding_tools(&scene, policy).await;
    shell(&tools, "echo 'model = \"x\"' > sandcrab.toml").await;
    assert!(
        std::fs::read_to_string(scene.workspace().join("sandcrab.toml"))
            .unwrap()
            .contains("model")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_runs_no_repository_configuration() {
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(
        git(&ws, &["init", "-q", "-b", "feature-x"])
            .status
            .success()
    );
    let marker = scene.outside().join("FSMON");
    let hook = scene.outside().join("HOOK");
    let config = format!(
        "[core]\n\tfsmonitor = \"touch {m}\"\n\tpager = touch {m}\n\thooksPath = hooks\n[diff]\n\texternal = touch {m}\n",
        m = marker.display()
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".git/config"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, config.as_bytes()))
        .unwrap();
    std::fs::create_dir_all(ws.join("hooks")).unwrap();
    for name in ["post-checkout", "pre-commit", "post-index-change"] {
        let path = ws.join("hooks").join(name);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {}\n", hook.display())).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    std::fs::write(ws.join("a.txt"), "x").unwrap();
    let server = crate::mock_llm::MockLlm::start().await;
    server.push(crate::llm_transcripts::stream(
        sandcrab::llm::ProviderKind::OpenAiCompatible,
        &crate::llm_transcripts::Answer::Text(vec!["ok"]),
    ));
    let out = sandcrab_cmd(&scene)
        .args([
            "run",
            "--provider",
            "openai-compatible",
            "--model",
            "local",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("-w")
        .arg(&ws)
        .arg("hi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !marker.exists(),
        "the repository's fsmonitor/pager ran on the host"
    );
    assert!(!hook.exists(), "a repository hook ran on the host");
    let system = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    if confinable() {
        assert!(system.contains("Git branch: feature-x"), "{system}");
        assert!(system.contains("?? a.txt"), "{system}");
    }
}

#[tokio::test]
async fn the_file_tools_never_write_protected_paths_or_through_links() {
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(git(&ws, &["init", "-q"]).status.success());
    std::fs::write(ws.join("sandcrab.toml"), "model = \"m\"\n").unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(ws.join(".git"), ws.join("gitlink")).unwrap();
    std::os::unix::fs::symlink(ws.join(".git/config"), ws.join("config-link")).unwrap();
    std::fs::hard_link(ws.join(".git/config"), ws.join("config-hardlink")).unwrap();
    let config_before = std::fs::read(ws.join(".git/config")).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;

    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        "sandcrab.toml",
        ".sandcrab/plugins/evil/plugin.toml",
        "sub/../.git/config",
        "gitlink/config",
        "gitlink/hooks/post-checkout",
        "config-link",
        "config-hardlink",
    ] {
        let out = run_tool(
            &tools,
            "write_file",
            json!({"file_path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}),
        )
        .await;
        assert!(out.is_error(), "{path} was written: {}", out.content);
        // The refusal keeps its kind all the way out, not only as text.
        assert_eq!(out.status, sandcrab::tools::ToolStatus::Denied, "{path}");
        assert!(
            out.content.contains("protected")
                || out.content.contains("symbolic link")
                || out.content.contains("hard links"),
            "{path}: {}",
            out.content
        );
    }
    let out = run_tool(
        &tools,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Add File: ok.txt\n+fine\n*** Add File: .git/hooks/pre-push\n+#!/bin/sh\n*** End Patch"}),
    )
    .await;
    assert!(
        out.is_error() && out.content.contains("protected"),
        "{}",
        out.content
    );
    assert!(
        !ws.join("ok.txt").exists(),
        "a refused patch changed nothing"
    );
    let out = run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "sandcrab.toml", "old_string": "\"m\"", "new_string": "\"x\""}),
    )
    .await;
    assert!(out.is_error(), "{}", out.content);

    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sandcrab.toml")).unwrap(),
        "model = \"m\"\n"
    );
    assert!(!ws.join(".sandcrab").exists() && !ws.join(".git/hooks/pre-commit").exists());
    // Ordinary files, nested directories included, are still written.
    let out = run_tool(
        &tools,
        "write_file",
        json!({"file_path": "a/b/c.txt", "content": "x"}),
    )
    .await;
    assert!(!out.is_error(), "{}", out.content);
    assert_eq!(std::fs::read_to_string(ws.join("a/b/c.txt")).unwrap(), "x");
}

#[tokio::test]
async fn read_file_refuses_a_fifo_instead_of_hanging() {
    let scene = Scene::new();
    let fifo = scene.workspace().join("pipe");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo on a temp path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = run_tool(&tools, "read_file", json!({"file_path": "pipe"})).await;
    assert!(
        out.is_error() && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
}

#[test]
fn sandbox_status_reports_what_this_host_enforces() {
    let scene = Scene::new();
    let out = sandcrab_cmd(&scene)
        .args(["sandbox", "status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = support();
    assert_eq!(v["support"]["landlock_abi"], s.landlock_abi);
    assert_eq!(v["support"]["pid_ns"], s.pid_ns);
    assert_eq!(v["support"]["seccomp"], s.seccomp);
    for mode in v["modes"].as_array().unwrap() {
        let m: SandboxMode = mode["mode"].as_str().unwrap().parse().unwrap();
        assert_eq!(mode["enforced"], s.missing(m, false).is_empty(), "{mode}");
    }
    let human = sandcrab_cmd(&scene)
        .args(["sandbox", "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains(&format!("ABI {}", s.landlock_abi)) || s.landlock_abi == 0,
        "{text}"
    );
}

/// Another sandcrab's bridge token (in the default place), the operator's
/// configuration file and the session database hold what would let a
/// program answer permission requests, learn keys or read every
/// conversation: a confined program finds them empty or unreadable, even
/// where it may read the whole filesystem.
#[tokio::test]
async fn confined_programs_find_the_hosts_secrets_hidden() {
    if !confinable() {
        return;
    }
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let scene = Scene::new();
    let canary = "canary-token-8d2e61";
    let runtime = scene.root.path().join("run");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(runtime.join("sandcrab"))
        .unwrap();
    let token = runtime.join("sandcrab/serve.token");
    std::fs::write(&token, canary).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    scene.write_user_config(&format!("# {canary}\n"));
    let database = scene.root.path().join("data/sandcrab/sandcrab.db");
    std::fs::create_dir_all(database.parent().unwrap()).unwrap();
    std::fs::write(&database, canary).unwrap();
    let probe = json!({
        "command": format!(
            "cat {} {} {} 2>&1; ls {} 2>&1; true",
            token.display(),
            scene.user_config().display(),
            database.display(),
            runtime.join("sandcrab").display()
        )
    })
    .to_string();
    let run = |sandbox: &str| {
        let out = sandcrab_cmd(&scene)
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["tool", "call", "shell", "--sandbox", sandbox, "-w"])
            .arg(scene.workspace())
            .args(["--args", &probe])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let confined = run("workspace-write");
    assert!(
        !confined.contains(canary),
        "a confined program read a host secret: {confined}"
    );
    // The probe can see: unconfined, every canary is there.
    let off = run("off");
    assert_eq!(off.matches(canary).count(), 3, "{off}");
    assert!(off.contains("serve.token"), "{off}");
}

/// Secrets that appear after a program started — a bridge started later,
/// a token or configuration file replaced by rename (as sandcrab itself
/// saves them) — stay hidden from it: whole directories are covered, not
/// the files that happened to exist.
#[tokio::test]
async fn secrets_written_after_a_program_starts_stay_hidden() {
    if !confinable() {
        return;
    }
    let scene = Scene::new();
    let canary = "canary-late-51c0";
    let runtime = scene.root.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    scene.write_user_config("# nothing yet\n");
    let token = runtime.join("sandcrab/serve.token");
    let config = scene.user_config();
    let probe = json!({
        "command": format!(
            "for i in $(seq 60); do cat {} {} 2>/dev/null; sleep 0.1; done; true",
            token.display(),
            config.display()
        ),
        "timeout_ms": 30000
    })
    .to_string();
    let child = sandcrab_cmd(&scene)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "tool",
            "call",
            "shell",
            "--sandbox",
            "workspace-write",
            "-w",
        ])
        .arg(scene.workspace())
        .args(["--args", &probe])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // A bridge starting now, and the operator's file saved by rename.
    std::fs::create_dir_all(token.parent().unwrap()).unwrap();
    std::fs::write(&token, canary).unwrap();
    let fresh = config.with_extension("new");
    std::fs::write(&fresh, format!("# {canary}\n")).unwrap();
    std::fs::rename(&fresh, &config).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!said.contains(canary), "a late secret was read: {said}");
}
