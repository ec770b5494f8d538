//! The newer surfaces attacked through the binary (issue #23): trust
//! through links, the bridge's workspace, hot reload, token files, the
//! token sent to a squatter, an MCP server's endless stderr, events across
//! workspaces, terminal escapes, and the smaller ones (database mode,
//! `?token=` on actions, Host parsing, resumes across workspaces, header
//! and idle timeouts). Each test performs the attack as an attacker would
//! and checks it fails.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::bridge_test::spawn_serve;
use crate::cli_support::sandcrab;
use crate::cli_support::{collect, wait_for};
use crate::llm_transcripts::{Answer, stream};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, install_plugin, sandcrab_cmd};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn trust(scene: &Scene, ws: &Path) {
    let out = sandcrab_cmd(scene).arg("trust").arg(ws).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `plugins list --json` of `ws`: (name, version) of each plugin, stderr.
fn plugins(scene: &Scene, ws: &Path) -> (Vec<(String, String)>, String) {
    let out = sandcrab_cmd(scene)
        .args(["plugins", "list", "--json", "-w"])
        .arg(ws)
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!({}));
    let found = list["plugins"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["version"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (found, text(&out.stderr))
}

fn tool_call(scene: &Scene, ws: &Path, name: &str, args: Value) -> Output {
    sandcrab_cmd(scene)
        .args([
            "tool",
            "call",
            name,
            "--args",
            &args.to_string(),
            "--workspace",
        ])
        .arg(ws)
        .output()
        .unwrap()
}

const EVIL_MANIFEST: &str = "name = \"hello-tool\"\nversion = \"9.9.9\"\nkind = \"tool\"\nwasm = \"hello_tool.wasm\"\n[capabilities]\nworkspace = \"read\"\n";

fn hello_version(list: &[(String, String)]) -> Option<String> {
    list.iter()
        .find(|(n, _)| n == "hello-tool")
        .map(|(_, v)| v.clone())
}

/// Finding 1: a trusted project's plugin, reached through a link, cannot
/// be changed by the model, and a change by anyone else makes it
/// untrusted; the same for a trusted plugin folder inside the workspace.
#[test]
fn a_trusted_plugin_behind_a_link_cannot_be_rewritten() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::create_dir_all(ws.join(".sandcrab/plugins")).unwrap();
    install_plugin(&ws.join("vendor"), "examples/hello-tool", "hello", |m| m);
    std::os::unix::fs::symlink("../../vendor/hello", ws.join(".sandcrab/plugins/hello")).unwrap();
    trust(&scene, &ws);
    let (list, err) = plugins(&scene, &ws);
    let trusted = hello_version(&list).unwrap_or_else(|| panic!("not loaded when trusted: {err}"));

    // The model writes the plugin's manifest through the link's target.
    let out = tool_call(
        &scene,
        &ws,
        "write_file",
        json!({"file_path": "vendor/hello/plugin.toml", "content": EVIL_MANIFEST}),
    );
    assert!(
        !out.status.success(),
        "the write went through: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("protected"),
        "{}",
        text(&out.stderr)
    );
    // Nor through a program.
    let out = tool_call(
        &scene,
        &ws,
        "shell",
        json!({"command": "printf 'x' >> vendor/hello/plugin.toml && echo WROTE"}),
    );
    assert!(
        !text(&out.stdout).contains("WROTE"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(hello_version(&plugins(&scene, &ws).0), Some(trusted));

    // Someone else changes it: the next start does not load it.
    std::fs::write(ws.join("vendor/hello/plugin.toml"), EVIL_MANIFEST).unwrap();
    let (list, err) = plugins(&scene, &ws);
    assert_eq!(
        hello_version(&list),
        None,
        "loaded after a change: {list:?}"
    );
    assert!(err.contains("changed since you trusted it"), "{err}");
}

/// Finding 1: the component behind a link, and `.sandcrab` itself a link.
#[test]
fn a_component_or_the_project_folder_behind_a_link_is_trusted_for_its_content() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let conf = ws.join("conf");
    let dir = install_plugin(&conf.join("plugins"), "examples/hello-tool", "hello", |m| m);
    std::fs::rename(dir.join("hello_tool.wasm"), ws.join("hello.wasm")).unwrap();
    std::os::unix::fs::symlink("../../../hello.wasm", dir.join("hello_tool.wasm")).unwrap();
    std::os::unix::fs::symlink("conf", ws.join(".sandcrab")).unwrap();
    trust(&scene, &ws);
    assert!(hello_version(&plugins(&scene, &ws).0).is_some());

    let out = tool_call(
        &scene,
        &ws,
        "write_file",
        json!({"file_path": "hello.wasm", "content": "not the trusted component"}),
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let out = tool_call(
        &scene,
        &ws,
        "write_file",
        json!({"file_path": "conf/plugins/hello/plugin.toml", "content": EVIL_MANIFEST}),
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));

    // Another component in its place (a real one): not loaded.
    let other = crate::support::artifact("test-fixtures/versioned-v1");
    std::fs::copy(other.wasm_path, ws.join("hello.wasm")).unwrap();
    let (list, err) = plugins(&scene, &ws);
    assert_eq!(hello_version(&list), None, "{list:?}");
    assert!(err.contains("changed since"), "{err}");
}

/// Finding 1: a plugin folder the operator configured inside the
/// workspace is protected from the model.
#[test]
fn a_configured_plugin_folder_inside_the_workspace_is_protected() {
    let scene = Scene::new();
    let ws = scene.workspace();
    install_plugin(&ws.join("tools"), "examples/hello-tool", "hello", |m| m);
    scene.write_user_config(&format!(
        "plugin_dirs = [\"{}\"]\n",
        ws.join("tools").display()
    ));
    let trusted = hello_version(&plugins(&scene, &ws).0).expect("loaded");
    let out = tool_call(
        &scene,
        &ws,
        "write_file",
        json!({"file_path": "tools/hello/plugin.toml", "content": EVIL_MANIFEST}),
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let out = tool_call(
        &scene,
        &ws,
        "shell",
        json!({"command": "mkdir tools/late && echo WROTE"}),
    );
    assert!(
        !text(&out.stdout).contains("WROTE"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(hello_version(&plugins(&scene, &ws).0), Some(trusted));
}

/// A running `sandcrab serve`.
struct Bridge {
    child: Child,
    url: String,
    token_file: PathBuf,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bridge {
    fn start(scene: &Scene, args: &[&str], token_file: &Path) -> Result<Bridge, String> {
        let mut cmd = sandcrab_cmd(scene);
        cmd.args(["serve", "--port", "0", "--token-file"])
            .arg(token_file)
            .args(args);
        let (child, url, stderr) = spawn_serve(cmd)?;
        Ok(Bridge {
            child,
            url,
            token_file: token_file.to_path_buf(),
            stderr,
        })
    }

    fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap()
            .trim()
            .to_string()
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let http = reqwest::Client::new();
        let url = format!("{}{path}", self.url);
        let request = match method {
            "GET" => http.get(url),
            _ => http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let response = request.bearer_auth(self.token()).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// Finding 2: a client cannot move a locked agent out of the workspace
/// the operator chose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_client_cannot_move_the_agent_out_of_its_workspace() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let inner = ws.join("sub");
    std::fs::create_dir(&inner).unwrap();
    std::os::unix::fs::symlink("/", ws.join("root-link")).unwrap();
    let token_file = scene.root.path().join("serve.token");
    let ws_arg = ws.display().to_string();
    let b = Bridge::start(&scene, &["-w", &ws_arg, "--sandbox", "locked"], &token_file).unwrap();
    for path in [
        "/".to_string(),
        scene.root.path().display().to_string(),
        ws.join("root-link").display().to_string(),
        scene.outside().display().to_string(),
        inner.display().to_string(),
    ] {
        let (code, body) = b
            .call("POST", "/workspace/initialize", Some(json!({"path": path})))
            .await;
        assert_eq!(code, 403, "{path}: {body}");
        assert_eq!(body["error"]["code"], "workspace_not_allowed", "{body}");
    }
    let (code, body) = b
        .call("POST", "/workspace/initialize", Some(json!({"path": ws})))
        .await;
    assert_eq!(code, 200, "{body}");

    // With --allow-workspace DIR: DIR and below, never above or beside.
    let token_file = scene.root.path().join("serve2.token");
    let b = Bridge::start(&scene, &["--allow-workspace", &ws_arg], &token_file).unwrap();
    let (code, _) = b
        .call(
            "POST",
            "/workspace/initialize",
            Some(json!({"path": inner})),
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = b
        .call("POST", "/workspace/initialize", Some(json!({"path": "/"})))
        .await;
    assert_eq!(code, 403);
    // Without either, a client may open nothing.
    let token_file = scene.root.path().join("serve3.token");
    let b = Bridge::start(&scene, &[], &token_file).unwrap();
    let (code, _) = b
        .call("POST", "/workspace/initialize", Some(json!({"path": ws})))
        .await;
    assert_eq!(code, 403);
}

/// Finding 3: a running chat's watcher applies the same trust check as a
/// fresh start: a plugin added to a trusted project, or a trusted plugin
/// changed, is not loaded, and the changed one is unloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_applies_the_trust_check_of_a_fresh_start() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let plugins_dir = ws.join(".sandcrab/plugins");
    let hello = install_plugin(&plugins_dir, "examples/hello-tool", "hello", |m| m);
    trust(&scene, &ws);
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    let mut child = sandcrab(&scene, kind, &server, "chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    let limit = Duration::from_secs(60);
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "hello-tool ", limit);

    install_plugin(&plugins_dir, "examples/hello-tool", "late", |m| {
        m.replace("name = \"hello-tool\"", "name = \"late-tool\"")
    });
    wait_for(&stderr, "late/plugin.toml: not loaded", limit);
    // As at a fresh start, none of the changed project's plugins stays.
    let before = stderr.lock().unwrap().len();
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "coding-tools", limit);
    std::thread::sleep(Duration::from_millis(300));
    let listing = stderr.lock().unwrap()[before..].to_string();
    assert!(!listing.contains("hello-tool"), "{listing}");
    let manifest: Vec<String> = std::fs::read_to_string(hello.join("plugin.toml"))
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("version = ") {
                "version = \"9.9.9\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(hello.join("plugin.toml"), manifest.join("\n")).unwrap();
    wait_for(&stderr, "hello/plugin.toml: not loaded", limit);
    let before = stderr.lock().unwrap().len();
    writeln!(stdin, "/plugins").unwrap();
    wait_for(&stderr, "coding-tools", limit);
    std::thread::sleep(Duration::from_millis(300));
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let _ = child.wait();
    let listing = stderr.lock().unwrap()[before..].to_string();
    assert!(
        !listing.contains("late-tool") && !listing.contains("hello-tool"),
        "{listing}"
    );
}

/// Give `path` to the unprivileged user `nobody` (a second local user).
fn as_nobody(path: &Path) {
    let nobody = 65534;
    std::os::unix::fs::chown(path, Some(nobody), Some(nobody)).unwrap();
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Finding 4: `serve` refuses a token file another user planted in a
/// shared runtime directory, and a token file in a directory others can
/// write.
#[test]
fn serve_refuses_a_token_file_someone_else_planted() {
    let scene = Scene::new();
    if running_as_root() {
        // A shared runtime directory, as XDG_RUNTIME_DIR=/tmp would be.
        let shared = scene.root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let planted_dir = shared.join("sandcrab");
        std::fs::create_dir(&planted_dir).unwrap();
        std::fs::set_permissions(&planted_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let planted = planted_dir.join("serve.token");
        std::fs::write(&planted, "attacker-known-token-attacker-known-token-xx\n").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
        as_nobody(&planted);
        as_nobody(&planted_dir);
        let child = sandcrab_cmd(&scene)
            .args(["serve", "--port", "0", "-w"])
            .arg(scene.workspace())
            .env("XDG_RUNTIME_DIR", &shared)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = exits_within(child, Duration::from_secs(30))
            .expect("served with a planted token (still running)");
        assert!(!out.status.success(), "served with a planted token");
        let err = text(&out.stderr);
        assert!(err.contains("not by you") && err.contains("65534"), "{err}");
    } else {
        eprintln!(
            "f4: the planted-by-another-user half needs root (to be that other user); ran the shared-directory half only"
        );
    }
    let shared = scene.root.path().join("tmp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = sandcrab_cmd(&scene)
        .args(["serve", "--port", "0", "--token-file"])
        .arg(shared.join("t"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("changed by other users"),
        "{}",
        text(&out.stderr)
    );
}

/// The output of `child` if it exits within `limit` (else it is killed).
fn exits_within(mut child: Child, limit: Duration) -> Option<Output> {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().unwrap())
}

/// A server that answers every request with `answer` and records what it
/// was sent.
fn squatter(answer: &'static str) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            stream
                .set_read_timeout(Some(Duration::from_millis(500)))
                .ok();
            let mut buf = [0u8; 65536];
            if let Ok(n) = stream.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            let body = answer;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, got)
}

/// Finding 5: the client sends the token only to a bridge that proves it
/// holds it; a squatter gets nothing and its answer is not printed raw;
/// the token rotates per start; no plain http beyond loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_goes_only_to_the_bridge_that_proves_it_holds_it() {
    let scene = Scene::new();
    let token_file = scene.root.path().join("serve.token");
    let ws_arg = scene.workspace().display().to_string();
    let b = Bridge::start(&scene, &["-w", &ws_arg], &token_file).unwrap();
    let first = b.token();
    let agent = |url: &str| {
        sandcrab_cmd(&scene)
            .args(["agent", "status", "--url", url, "--token-file"])
            .arg(&token_file)
            .output()
            .unwrap()
    };
    let out = agent(&b.url);
    assert!(out.status.success(), "{}", text(&out.stderr));
    drop(b);

    // The bridge is down; a squatter holds a port.
    let (port, got) =
        squatter("{\"proof\":\"x\",\"lifecycle\":\"\\u001b]52;c;cHduZWQ=\\u0007\\u001b[2J\"}");
    let out = agent(&format!("http://127.0.0.1:{port}"));
    assert!(!out.status.success());
    let seen = text(&got.lock().unwrap());
    assert!(!seen.contains(&first), "the squatter got the token: {seen}");
    assert!(
        !seen.to_ascii_lowercase().contains("authorization"),
        "{seen}"
    );
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));
    assert!(
        text(&out.stderr).contains("could not prove"),
        "{}",
        text(&out.stderr)
    );

    // A restarted bridge has a new token: one captured earlier is dead.
    let b = Bridge::start(&scene, &["-w", &ws_arg], &token_file).unwrap();
    assert_ne!(b.token(), first);
    let old = reqwest::Client::new()
        .get(format!("{}/agent/status", b.url))
        .bearer_auth(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 401);

    // Never to another host over plain http.
    let (_, got) = squatter("{}");
    let out = agent("http://evil.example:9990");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("loopback"),
        "{}",
        text(&out.stderr)
    );
    assert!(got.lock().unwrap().is_empty());
}

/// Peak resident memory of a running process, in MiB.
fn peak_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// Finding 6: an MCP server that writes one endless line to stderr does
/// not grow sandcrab's memory.
#[test]
fn an_mcp_servers_endless_stderr_line_does_not_grow_memory() {
    let scene = Scene::new();
    scene.write_user_config(
        "[mcp.servers.flood]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"yes | tr -d '\\\\n' >&2\"]\nstartup_timeout_ms = 6000\n",
    );
    let mut child = sandcrab_cmd(&scene)
        .args(["mcp", "list", "-w"])
        .arg(scene.workspace())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0;
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if let Some(now) = peak_mib(pid) {
            peak = peak.max(now);
        }
        assert!(start.elapsed() < Duration::from_secs(60), "mcp list hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(peak > 0, "memory was never measured");
    assert!(
        peak < 400,
        "sandcrab grew to {peak} MiB reading one stderr line"
    );
}

/// Read `/events` of `b` after `last` for a while; the events.
async fn events_after(b: &Bridge, last: &str) -> Vec<Value> {
    let response = reqwest::Client::new()
        .get(format!("{}/events", b.url))
        .bearer_auth(b.token())
        .header("Last-Event-ID", last)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        use futures::StreamExt;
        while let Some(Ok(chunk)) = body.next().await {
            raw.extend_from_slice(&chunk);
        }
    })
    .await;
    text(&raw)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// Finding 7: a bridge in one workspace never replays another
/// workspace's events, whatever Last-Event-ID says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_events_stay_with_their_workspace() {
    let scene = Scene::new();
    let a = scene.workspace();
    let b_ws = scene.outside();
    let secret = "SECRET-OF-WORKSPACE-A";
    let allow = scene.root.path().display().to_string();
    let token_file = scene.root.path().join("serve.token");
    {
        // Neither bridge is given --workspace: both open one by initialize.
        let bridge = Bridge::start(&scene, &["--allow-workspace", &allow], &token_file).unwrap();
        bridge
            .call("POST", "/workspace/initialize", Some(json!({"path": a})))
            .await;
        let (code, _) = bridge.call("POST", "/agent/start", None).await;
        assert_eq!(code, 200);
        bridge
            .call("POST", "/agent/messages", Some(json!({"message": secret})))
            .await;
        let start = Instant::now();
        loop {
            let events = events_after(&bridge, "0").await;
            if events.iter().any(|e| e.to_string().contains(secret)) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{events:?}");
        }
        bridge.call("POST", "/agent/stop", None).await;
        std::thread::sleep(Duration::from_millis(500));
    }
    let bridge = Bridge::start(&scene, &["--allow-workspace", &allow], &token_file).unwrap();
    bridge
        .call("POST", "/workspace/initialize", Some(json!({"path": b_ws})))
        .await;
    for last in ["0", "18446744073709551615"] {
        let events = events_after(&bridge, last).await;
        assert!(
            !events.iter().any(|e| e.to_string().contains(secret)),
            "Last-Event-ID {last}: {events:?}"
        );
    }
    // Its own workspace's events are still there for it.
    bridge
        .call("POST", "/workspace/initialize", Some(json!({"path": a})))
        .await;
    let events = events_after(&bridge, "0").await;
    assert!(
        events.iter().any(|e| e.to_string().contains(secret)),
        "{events:?}"
    );
}

const ESCAPES: &str = "m\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J";

/// Finding 8: values from an untrusted project file, stored sessions and
/// MCP tool output never reach the terminal with their escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_reaches_the_terminal_with_its_escape_sequences() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::write(
        ws.join("sandcrab.toml"),
        format!("model = {}\n", toml_string(ESCAPES)),
    )
    .unwrap();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Text(vec!["hi \u{1b}]52;c;eA==\u{7}there"]),
    ));
    let mut chat = sandcrab_cmd(&scene);
    chat.env(kind.key_vars()[0], "sk-test")
        .args(["chat", "--provider", kind.id(), "--base-url"])
        .arg(server.base_url())
        .arg("-w")
        .arg(&ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = chat.spawn().unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "hello").unwrap();
        writeln!(stdin, "/exit").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.stdout.contains(&0x1b), "{:?}", text(&out.stdout));
    assert!(!out.stderr.contains(&0x1b), "{:?}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("\\u{1b}]52"),
        "the banner shows the model, escaped: {}",
        text(&out.stderr)
    );

    let list = sandcrab_cmd(&scene)
        .args(["sessions", "list", "--all"])
        .output()
        .unwrap();
    let id = text(&list.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(!list.stdout.contains(&0x1b));
    let show = sandcrab_cmd(&scene)
        .args(["sessions", "show", &id])
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(!show.stdout.contains(&0x1b), "{:?}", text(&show.stdout));

    // An MCP tool's output through `tool call`.
    scene.write_user_config(&format!(
        "[mcp.servers.esc]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\n",
        toml_string(&mcp_echo_server(ESCAPES))
    ));
    let out = tool_call(&scene, &scene.outside(), "esc__say", json!({}));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("pwned"), "{}", text(&out.stdout));
    assert!(!out.stdout.contains(&0x1b), "{:?}", text(&out.stdout));
}

pub(crate) fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A shell MCP server with one tool, `say`, answering `said`.
pub(crate) fn mcp_echo_server(said: &str) -> String {
    let tool_result = json!({"content": [{"type": "text", "text": said}]}).to_string();
    format!(
        r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":"2025-03-26","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"esc","version":"1"}}}}}}\n' "$id" ;;
    *'"tools/list"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"tools":[{{"name":"say","description":"says","inputSchema":{{"type":"object"}}}}]}}}}\n' "$id" ;;
    *'"tools/call"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":%s}}\n' "$id" '{}' ;;
  esac
done"#,
        tool_result.replace('\'', "'\\''")
    )
}

/// Finding 9: the smaller ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_private_tokens_stay_off_action_urls_and_host_is_exact() {
    let scene = Scene::new();
    // The data directory exists, readable by all (as ~/.local/share is).
    let data = scene.root.path().join("data/sandcrab");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let db = data.join("sandcrab.db");
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);
    // An older, readable one is made private on open.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    sandcrab_cmd(&scene)
        .args(["sessions", "list"])
        .output()
        .unwrap();
    assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o077, 0);

    let token_file = scene.root.path().join("serve.token");
    let ws_arg = scene.workspace().display().to_string();
    let b = Bridge::start(&scene, &["-w", &ws_arg], &token_file).unwrap();
    let http = reqwest::Client::new();
    let token = b.token();
    let post = http
        .post(format!("{}/agent/start?token={token}", b.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status().as_u16(), 401, "?token= accepted on an action");
    let get = http
        .get(format!("{}/agent/status?token={token}", b.url))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 401);
    for host in ["[::1]evil.example", "[::1]:1evil", "localhost:80:80"] {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", b.port())).unwrap();
        write!(
            s,
            "GET /agent/status HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 403"), "{host}: {answer}");
    }
}

/// Finding 9: `--resume` of another workspace's session is refused,
/// naming both workspaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_of_another_workspaces_session_is_refused() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["noted"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .arg("remember SECRET-A")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = crate::support::latest_session_id(&scene);
    let other = scene.outside();
    let out = sandcrab_cmd(&scene)
        .env(kind.key_vars()[0], "sk-test")
        .args(["run", "--provider", kind.id(), "--model", "m", "--base-url"])
        .arg(server.base_url())
        .arg("-w")
        .arg(&other)
        .args(["--resume", &id, "go on"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains(&scene.workspace().display().to_string())
            && err.contains(&other.display().to_string()),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1, "A's content went to the model");
}

/// Finding 9: connections that never finish their headers, or sit silent,
/// are closed.
#[test]
fn half_open_connections_are_closed() {
    let scene = Scene::new();
    let token_file = scene.root.path().join("serve.token");
    let ws_arg = scene.workspace().display().to_string();
    let b = Bridge::start(
        &scene,
        &[
            "-w",
            &ws_arg,
            "--header-timeout-ms",
            "1000",
            "--idle-timeout-ms",
            "2000",
        ],
        &token_file,
    )
    .unwrap();
    let mut conns = Vec::new();
    for i in 0..200 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", b.port())).unwrap();
        if i % 2 == 0 {
            // Slowloris: half a request line, then nothing.
            let _ = s.write_all(b"GET /agent/status HTTP/1.1\r\nHost: local");
        }
        conns.push(s);
    }
    std::thread::sleep(Duration::from_secs(4));
    let mut open = 0;
    for mut s in conns {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(_) => open += 1,
        }
    }
    assert_eq!(
        open,
        0,
        "connections still open: {}",
        b.stderr.lock().unwrap()
    );
}
