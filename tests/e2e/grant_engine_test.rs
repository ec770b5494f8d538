//! One grant engine (issue #24): the sandbox mode means the same whichever
//! way it is given, a plugin call's time limit bounds the programs it
//! starts, and locked mode is quiet when nothing is wrong. Each test goes
//! through the binary or the library as an operator or attacker would.

use std::process::Output;

use serde_json::json;

use crate::mock_llm::MockLlm;
use crate::support::{Scene, sandcrab_cmd};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A loopback listener on the host; its port.
fn listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn connect_command(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\""
    )
}

fn shell(scene: &Scene, extra: &[&str], command: &str) -> Output {
    sandcrab_cmd(scene)
        .args(["tool", "call", "shell"])
        .args(extra)
        .arg("--workspace")
        .arg(scene.workspace())
        .args([
            "--args",
            &json!({"command": command, "network": true}).to_string(),
        ])
        .output()
        .unwrap()
}

/// The attack: `--sandbox locked` on the command line must close
/// the network exactly as `[policy] mode = "locked"` does.
#[test]
fn locked_means_no_network_however_it_is_spelled() {
    let scene = Scene::new();
    let (_listener, port) = listener();
    let flag = shell(&scene, &["--sandbox", "locked"], &connect_command(port));
    assert!(
        !text(&flag.stdout).contains("CONNECTED"),
        "--sandbox locked left the network open: {}",
        text(&flag.stdout)
    );
    scene.write_user_config("[policy]\nmode = \"locked\"\n");
    let config = shell(&scene, &[], &connect_command(port));
    assert!(!text(&config.stdout).contains("CONNECTED"));
    scene.write_user_config("[policy]\nsandbox = \"locked\"\n");
    let key = shell(&scene, &[], &connect_command(port));
    assert!(!text(&key.stdout).contains("CONNECTED"));
    // The default mode gives the first-party shell the network for a call
    // that asks for it, here the operator's own (control).
    scene.write_user_config("");
    let open = shell(&scene, &[], &connect_command(port));
    assert!(
        text(&open.stdout).contains("CONNECTED"),
        "{}{}",
        text(&open.stdout),
        text(&open.stderr)
    );
}

/// Locked mode prints no warning about the first-party tools' environment:
/// nothing there for the operator to act on.
#[test]
fn locked_mode_is_quiet_when_nothing_is_wrong() {
    let scene = Scene::new();
    let out = shell(&scene, &["--sandbox", "locked"], "echo hi");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().next(), Some("hi"));
    assert!(
        text(&out.stderr).trim().is_empty(),
        "warnings in locked mode: {}",
        text(&out.stderr)
    );
}

/// `sandcrab sandbox check` proves each mode by trying what it forbids,
/// says which door is open when one is, and `sandbox status` shows the
/// last check.
#[test]
fn sandbox_check_tries_every_door_and_reports_an_open_one() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let cache = scene.root.path().join("cache");
    let check = |args: &[&str]| {
        sandcrab_cmd(&scene)
            .env("XDG_CACHE_HOME", &cache)
            .args(["sandbox", "check", "--json"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = check(&[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["holds"], true);
    for c in report["checks"].as_array().unwrap() {
        for o in c["outcomes"].as_array().unwrap() {
            assert_eq!(o["ran"], true, "{o}");
            if o["promised"] == true {
                assert_eq!(o["open"], false, "{}: {o}", c["mode"]);
            }
        }
    }
    let status = sandcrab_cmd(&scene)
        .env("XDG_CACHE_HOME", &cache)
        .args(["sandbox", "status"])
        .output()
        .unwrap();
    assert!(
        text(&status.stdout).contains("every guarantee held"),
        "{}",
        text(&status.stdout)
    );

    // Weakened on purpose: the network row is reported OPEN, and fails.
    let out = check(&["--mode", "locked", "--weaken", "network"]);
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let network = report["checks"][0]["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["attempt"] == "network")
        .unwrap()
        .clone();
    assert_eq!(network["open"], true, "{network}");
}

/// Locked mode refuses to run when this boot's check found a door open.
#[test]
fn locked_mode_refuses_programs_when_a_guarantee_is_open() {
    let scene = Scene::new();
    let cache = scene.root.path().join("cache");
    std::fs::create_dir_all(cache.join("sandcrab")).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let outcome = |attempt: &str, open: bool| json!({"attempt": attempt, "ran": true, "open": open, "promised": true, "detail": ""});
    let kept = json!({
        "boot_id": boot.trim(),
        "checked_at": "2026-01-01T00:00:00Z",
        "checks": [{"mode": "locked", "unavailable": null, "outcomes": [
            outcome("write-outside", false),
            outcome("network", true),
        ]}]
    });
    std::fs::write(cache.join("sandcrab/sandbox-check.json"), kept.to_string()).unwrap();
    let out = sandcrab_cmd(&scene)
        .env("XDG_CACHE_HOME", &cache)
        .args([
            "tool",
            "call",
            "shell",
            "--sandbox",
            "locked",
            "--workspace",
        ])
        .arg(scene.workspace())
        .args(["--args", &json!({"command": "echo RAN"}).to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!text(&out.stdout).contains("RAN"));
    let err = text(&out.stderr);
    assert!(
        err.contains("locked mode refuses to run") && err.contains("loopback"),
        "{err}"
    );
}

/// Run `script` with `sh` under `confinement` in `cwd`; stdout and stderr.
async fn confined_sh(
    confinement: &sandcrab::process::Confinement,
    cwd: &std::path::Path,
    temp: &std::path::Path,
    script: &str,
) -> String {
    use sandcrab::process::{ChildEnv, ProcessRequest};
    let request = ProcessRequest {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        env: ChildEnv::base(temp, None, None),
        stdin: None,
        timeout: std::time::Duration::from_secs(20),
        output_cap: 1 << 16,
        kill_grace: std::time::Duration::from_millis(500),
    };
    let out = sandcrab::process::run(&request, confinement, None)
        .await
        .unwrap();
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// The table of the one grant-to-confinement translation, row by row,
/// with real programs: for each mode and principal (first-party plugin,
/// third-party plugin, MCP server), a program with a read-write workspace
/// and no network tries to write the workspace, write outside, write a
/// protected path, read outside and reach the network.
#[tokio::test]
async fn every_row_of_the_confinement_table_holds_with_real_programs() {
    use sandcrab::plugin::confinement::{Footprint, TABLE, spec};
    use sandcrab::plugin::manifest::Access;
    use sandcrab::plugin::policy::{Policy, PolicyMode, SandboxMode};
    if !crate::support::confinable() {
        return;
    }
    let (_listener, port) = listener();
    for row in TABLE {
        let scene = Scene::new();
        let ws = scene.workspace();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(scene.outside().join("secret"), "OUTSIDE-SECRET").unwrap();
        let policy = Policy {
            mode: if row.mode == SandboxMode::Locked {
                PolicyMode::Locked
            } else {
                PolicyMode::Default
            },
            sandbox: Some(row.mode),
            ..Policy::default()
        };
        let host = scene.host(policy);
        let ctx = host.sandbox_context();
        let temp = tempfile::tempdir().unwrap();
        let reach = Footprint {
            workspace: Access::ReadWrite,
            paths: &[],
            network: false,
        };
        let confinement =
            sandcrab::process::Confinement::prepare(&spec(row.principal, reach, ctx, temp.path()))
                .unwrap();
        let label = format!("{:?} in {}", row.principal, row.mode);
        let out = confined_sh(
            &confinement,
            &ws,
            temp.path(),
            &format!(
                "echo in > inside.txt && echo WROTE-INSIDE; \
                 echo out > {out}/escape.txt && echo WROTE-OUTSIDE; \
                 echo '[core] fsmonitor = x' >> .git/config && echo WROTE-PROTECTED; \
                 cat {out}/secret; \
                 {connect}",
                out = scene.outside().display(),
                connect = connect_command(port)
            ),
        )
        .await;
        assert!(out.contains("WROTE-INSIDE"), "{label}: {out}");
        assert!(!out.contains("WROTE-OUTSIDE"), "{label}: {out}");
        assert!(!out.contains("WROTE-PROTECTED"), "{label}: {out}");
        assert_eq!(
            out.contains("OUTSIDE-SECRET"),
            row.read_everywhere,
            "{label} ({}): {out}",
            row.why
        );
        assert!(!out.contains("CONNECTED"), "{label}: {out}");
    }
}

/// Every tool call leaves a receipt, stored with its result: a
/// third-party plugin's call with its program and the file and key that
/// granted it, an MCP tool's call, and a refused program; `sandcrab audit`
/// prints one line each; no secret value reaches the store or the events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_leaves_a_receipt_naming_the_rule_that_allowed_it() {
    use crate::llm_transcripts::{Answer, stream, tool};
    use crate::surfaces_test::{mcp_echo_server, toml_string};
    use sandcrab::llm::ProviderKind;
    let scene = Scene::new();
    crate::support::install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    crate::support::install_plugin(
        &scene.plugins(),
        "test-fixtures/hostile-tool",
        "hostile",
        |m| m,
    );
    scene.write_user_config(&format!(
        "[policy.plugins.hello-tool]\nprograms = [\"sort\"]\n\
         [policy.plugins.hostile-tool]\nprograms = [\"sh\"]\nenv = [\"SANDCRAB_TEST_API_KEY\"]\n\
         [mcp.servers.esc]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\nenv = [\"CANARY_TOKEN\"]\n\
         [policy.mcp.esc]\nworkspace = \"read\"\n",
        toml_string(&mcp_echo_server("hello from mcp"))
    ));
    let config = scene.user_config().display().to_string();
    let canary = "canary-secret-value-8c1f";
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![
            tool("c1", "sort_lines", json!({"text": "b\na\n"})),
            tool("c2", "esc__say", json!({})),
            tool(
                "c3",
                "run",
                json!({"program": "cat", "args": ["/etc/hostname"]}),
            ),
        ]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["Done."])));
    let out = crate::cli_support::sandcrab(&scene, kind, &server, "run")
        .arg("--plugins")
        .arg(scene.plugins())
        .arg("--json")
        .env("SANDCRAB_TEST_API_KEY", canary)
        .env("CANARY_TOKEN", canary)
        .arg("Use the tools.")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = crate::cli_support::events(&out.stdout);
    let ends: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "TOOL_CALL_END")
        .collect();
    assert_eq!(ends.len(), 3, "{events:?}");
    assert!(
        ends.iter().all(|e| e["data"]["receipt"].is_object()),
        "{ends:?}"
    );
    assert!(
        !text(&out.stdout).contains(canary),
        "a secret reached the events"
    );

    let id = crate::support::latest_session_id(&scene);
    let audit = sandcrab_cmd(&scene)
        .args(["audit", &id, "--json"])
        .output()
        .unwrap();
    assert!(audit.status.success(), "{}", text(&audit.stderr));
    let receipts: Vec<serde_json::Value> = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(receipts.len(), 3, "{receipts:?}");
    let by_call = |id: &str| {
        receipts
            .iter()
            .find(|r| r["call_id"] == id)
            .unwrap()
            .clone()
    };

    let sort = by_call("c1");
    assert_eq!(sort["principal"]["name"], "hello-tool");
    assert_eq!(sort["principal"]["version"], "0.2.0");
    let wasm = std::fs::read(scene.plugins().join("hello/hello_tool.wasm")).unwrap();
    assert_eq!(
        sort["principal"]["component_sha256"],
        sandcrab::plugin::integrity::sha256_hex(&wasm)
    );
    assert!(
        sort["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["capability"] == "programs"
                && g["value"] == "sort"
                && g["source"] == format!("{config}:policy.plugins.hello-tool.programs")),
        "{sort}"
    );
    let program = &sort["programs"][0];
    assert_eq!(program["program"], "sort");
    assert_eq!(program["exit_code"], 0);
    assert_eq!(program["confinement"]["mode"], "workspace-write");
    assert_eq!(program["confinement"]["network"], false);

    let mcp = by_call("c2");
    assert_eq!(mcp["principal"]["kind"], "mcp-server");
    assert!(
        mcp["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["value"] == "CANARY_TOKEN"
                && g["source"] == format!("{config}:mcp.servers.esc.env")),
        "{mcp}"
    );
    assert!(
        mcp["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["capability"] == "workspace"
                && g["source"] == format!("{config}:policy.mcp.esc.workspace")),
        "{mcp}"
    );

    let refused = by_call("c3");
    assert!(
        refused["programs"][0]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("may not run 'cat'")),
        "{refused}"
    );
    assert!(
        refused["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["value"] == "SANDCRAB_TEST_API_KEY"
                && g["source"] == format!("{config}:policy.plugins.hostile-tool.env")),
        "{refused}"
    );

    let lines = sandcrab_cmd(&scene).args(["audit", &id]).output().unwrap();
    let lines = text(&lines.stdout);
    assert_eq!(
        lines.lines().filter(|l| l.contains(" by ")).count(),
        3,
        "{lines}"
    );
    assert!(lines.contains("sort_lines by hello-tool 0.2.0"), "{lines}");
    assert!(lines.contains("cat REFUSED"), "{lines}");

    // The secret's value is nowhere in the store.
    let data = scene.root.path().join("data/sandcrab");
    for entry in std::fs::read_dir(&data).unwrap().flatten() {
        if !entry.path().is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        assert!(
            !crate::support::bytes_contain(&bytes, canary),
            "{} holds the secret",
            entry.path().display()
        );
    }
}

/// Consent is bound to the component: `plugins grant` records what the
/// plugin asks for now with its component's hash; a new version that asks
/// for the network keeps running without it after a reload, and the
/// difference is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_plugin_runs_with_what_was_granted_and_the_difference_is_shown() {
    use crate::cli_support::{collect, wait_for};
    use sandcrab::llm::ProviderKind;
    use std::io::Write;
    let scene = Scene::new();
    let dir =
        crate::support::install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    scene.write_user_config("");
    let grant = sandcrab_cmd(&scene)
        .args(["plugins", "grant", "hello-tool", "--plugins"])
        .arg(scene.plugins())
        .output()
        .unwrap();
    assert!(grant.status.success(), "{}", text(&grant.stderr));
    let config = std::fs::read_to_string(scene.user_config()).unwrap();
    let wasm = std::fs::read(dir.join("hello_tool.wasm")).unwrap();
    assert!(
        config.contains(&sandcrab::plugin::integrity::sha256_hex(&wasm))
            && config.contains("programs = [\"sort\"]"),
        "{config}"
    );

    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    let mut child = crate::cli_support::sandcrab(&scene, kind, &server, "chat")
        .arg("--plugins")
        .arg(scene.plugins())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    let limit = std::time::Duration::from_secs(60);
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "hello-tool 0.2.0", limit);
    assert!(
        !stderr.lock().unwrap().contains("warning"),
        "{}",
        stderr.lock().unwrap()
    );

    // A new version: another component, and it asks for the network.
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    let other = crate::support::artifact("test-fixtures/versioned-v1");
    std::fs::copy(other.wasm_path, dir.join("hello_tool.wasm")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        manifest.replace("[capabilities]", "[capabilities]\nnetwork = true"),
    )
    .unwrap();
    wait_for(&stderr, "changed since you granted it", limit);
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let _ = child.wait();
    let text = stderr.lock().unwrap().clone();
    assert!(text.contains("reloaded"), "{text}");
    assert!(text.contains("network"), "the difference is named: {text}");

    // And it runs without the network: what `plugins list` shows.
    let list = sandcrab_cmd(&scene)
        .args(["plugins", "list", "--json", "--plugins"])
        .arg(scene.plugins())
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let hello = list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hello-tool")
        .unwrap()
        .clone();
    assert_eq!(hello["granted"]["network"], false, "{hello}");
}

/// Locked mode given as a flag requires pins for third-party plugins, as
/// locked mode from the configuration does (the same decision).
#[test]
fn locked_by_flag_requires_pins_like_locked_by_config() {
    let scene = Scene::new();
    crate::support::install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let out = sandcrab_cmd(&scene)
        .args([
            "plugins",
            "list",
            "--json",
            "--sandbox",
            "locked",
            "--plugins",
        ])
        .arg(scene.plugins())
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "hello-tool"),
        "an unpinned third-party plugin loaded under --sandbox locked"
    );
    assert!(
        text(&out.stderr).contains("not pinned"),
        "{}",
        text(&out.stderr)
    );
}

/// A refusal names the file the operator actually edits: with
/// `XDG_CONFIG_HOME` set, that one, not `~/.config`.
#[test]
fn a_refusal_names_the_configuration_file_in_use() {
    let scene = Scene::new();
    crate::support::install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let out = sandcrab_cmd(&scene)
        .args(["plugins", "list", "--plugins"])
        .arg(scene.plugins())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "programs = [\"sort\"] in {}",
            scene.user_config().display()
        )),
        "{err}"
    );
}
