//! `sandcrab mcp serve` driven by a real MCP client: the official Python
//! SDK (installed by `scripts/setup-polyglot` into target/mcp-peers), over
//! stdio and over streamable HTTP. The tools keep their sandbox, the
//! operator's include/exclude, truncation, cancellation and progress.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Scene, gone_soon, install_plugin, sandcrab_cmd};

/// The Python of the MCP SDK's virtualenv.
pub fn mcp_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-peers/venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
    );
    python
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/client.py")
}

/// Run `steps` through the official client against `sandcrab mcp serve`
/// on stdio with `extra` arguments; the client's report.
pub fn over_stdio(scene: &Scene, extra: &[&str], steps: Value) -> Value {
    let serve = sandcrab_cmd(scene);
    let mut cmd = Command::new(mcp_python());
    cmd.arg(client_script())
        .arg("stdio")
        .arg(steps.to_string())
        .arg("--")
        .arg(serve.get_program())
        .args(["mcp", "serve", "--workspace"])
        .arg(scene.workspace())
        .args(extra);
    // The server inherits the client's environment: give it the scene's.
    for (k, v) in serve.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    report(cmd.output().unwrap())
}

fn report(out: std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed:\n{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_else(|| panic!("{stderr}"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

fn tools_of(step: &Value) -> Vec<String> {
    step["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_official_client_lists_and_calls_the_tools_and_the_sandbox_holds() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(scene.outside().join("secret.txt"), "TOP-SECRET").unwrap();
    let secret = scene.outside().join("secret.txt");
    let out = over_stdio(
        &scene,
        &[],
        json!([
            {"list": true},
            {"call": "read_file", "args": {"file_path": "notes.txt"}},
            {"call": "read_file", "args": {"file_path": secret}},
            {"call": "read_file", "args": {"file_path": "../outside/secret.txt"}},
            {"call": "read_file", "args": {"path": "notes.txt"}},
            {"call": "no_such_tool", "args": {}},
        ]),
    );
    assert_eq!(out["server"], "sandcrab");
    let steps = out["steps"].as_array().unwrap();
    let tools = tools_of(&steps[0]);
    for core in [
        "read_file",
        "write_file",
        "edit_file",
        "grep",
        "glob",
        "shell",
    ] {
        assert!(tools.contains(&core.to_string()), "{tools:?}");
    }
    assert_eq!(
        steps[0]["schemas"]["read_file"]["required"],
        json!(["file_path"])
    );
    assert_eq!(steps[1]["is_error"], false, "{}", steps[1]);
    assert!(steps[1]["text"].as_str().unwrap().contains("beta"));
    // A file outside the workspace stays out of reach through MCP too.
    for escape in &steps[2..4] {
        assert_eq!(escape["is_error"], true, "{escape}");
        assert!(!escape.to_string().contains("TOP-SECRET"), "{escape}");
    }
    // Bad arguments are a tool error the caller's model can read and fix…
    assert_eq!(steps[4]["is_error"], true);
    assert!(
        steps[4]["text"].as_str().unwrap().contains("file_path"),
        "{}",
        steps[4]
    );
    // …an unknown tool is a protocol error naming it.
    assert!(
        steps[5]["protocol_error"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{}",
        steps[5]
    );
}

#[test]
fn the_operator_chooses_what_mcp_serves() {
    let scene = Scene::new();
    scene.write_user_config("[agent.tools]\nexclude = [\"shell\", \"write_file\"]\n");
    let out = over_stdio(
        &scene,
        &[],
        json!([
            {"list": true},
            {"call": "shell", "args": {"command": "echo pwned > pwned.txt"}},
        ]),
    );
    let steps = out["steps"].as_array().unwrap();
    let tools = tools_of(&steps[0]);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(!tools.contains(&"shell".to_string()), "{tools:?}");
    assert!(!tools.contains(&"write_file".to_string()), "{tools:?}");
    assert!(steps[1]["protocol_error"].is_string(), "{}", steps[1]);
    assert!(!scene.workspace().join("pwned.txt").exists());
}

#[test]
fn long_output_is_cut_like_the_models_view_and_the_whole_rides_along() {
    let scene = Scene::new();
    scene.write_user_config("[truncation]\nshell = { chars = 200, mode = \"head_tail\" }\n");
    let out = over_stdio(
        &scene,
        &[],
        json!([{"call": "shell", "args": {"command": "seq 1 5000"}}]),
    );
    let step = &out["steps"][0];
    assert_eq!(step["is_error"], false, "{step}");
    let shown = step["text"].as_str().unwrap();
    assert!(shown.len() < 1000, "{shown}");
    assert!(!shown.contains("\n2500\n"));
    let full = step["structured"]["full_output"].as_str().unwrap();
    assert_eq!(step["structured"]["truncated"], true);
    assert!(
        full.contains("\n2500\n") && full.contains("\n5000"),
        "{full}"
    );
    // The call's receipt rides along in `_meta`: the first-party plugin
    // and the program it ran, confined.
    let receipt = &step["meta"]["sandcrab/receipt"];
    assert_eq!(receipt["principal"]["name"], "coding-tools", "{step}");
    assert_eq!(receipt["programs"][0]["program"], "sh", "{receipt}");
    assert_eq!(receipt["programs"][0]["exit_code"], 0, "{receipt}");
}

#[test]
fn a_cancelled_call_stops_its_program_and_long_calls_report_progress() {
    let scene = Scene::new();
    let out = over_stdio(
        &scene,
        &[],
        json!([
            {"call": "shell", "args": {"command": "echo first-line; sleep 2; echo done"}},
            {"cancel_after": 2, "call": "shell",
             "args": {"command": "sleep 47", "timeout_ms": 60000}},
            {"gone": "sleep 47"},
        ]),
    );
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(steps[0]["is_error"], false, "{}", steps[0]);
    let progress = steps[0]["progress"].to_string();
    assert!(progress.contains("first-line"), "{progress}");
    assert_eq!(steps[1]["cancelled"], true, "{}", steps[1]);
    assert!(
        steps[1]["progress"].to_string().contains("still running"),
        "{}",
        steps[1]
    );
    // Gone while the client is still connected: the cancellation, not the
    // end of the server, stopped it.
    assert_eq!(
        steps[2]["gone"], true,
        "the cancelled call's program runs on"
    );
    assert!(gone_soon("sleep 47"));
}

#[test]
fn clients_hear_when_the_tool_list_changes() {
    let scene = Scene::new();
    let plugins = scene.plugins();
    std::fs::create_dir_all(&plugins).unwrap();
    let serve = sandcrab_cmd(&scene);
    let listed = scene.root.path().join("first-list-done");
    let mut cmd = Command::new(mcp_python());
    cmd.arg(client_script())
        .arg("stdio")
        .arg(
            json!([
                {"list": true},
                {"touch": listed},
                {"wait_list_changed": 60},
                {"list": true},
            ])
            .to_string(),
        )
        .arg("--")
        .arg(serve.get_program())
        .args(["mcp", "serve", "--workspace"])
        .arg(scene.workspace())
        .arg("--plugins")
        .arg(&plugins)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in serve.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        } else {
            cmd.env_remove(k);
        }
    }
    let child = cmd.spawn().unwrap();
    // Once the server answered the first list (it is serving, and watching
    // the folder), add a plugin to the watched folder.
    let started = std::time::Instant::now();
    while !listed.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the client never finished its first list"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    install_plugin(&plugins, "examples/hello-tool", "hello", |m| m);
    let out = report(child.wait_with_output().unwrap());
    let steps = out["steps"].as_array().unwrap();
    assert!(!tools_of(&steps[0]).contains(&"hello".to_string()));
    assert_eq!(steps[1]["list_changed"], true, "{out}");
    assert!(tools_of(&steps[2]).contains(&"hello".to_string()), "{out}");
}

/// `sandcrab mcp serve --http 0`, its port, and its token.
pub struct HttpServer {
    child: std::process::Child,
    pub url: String,
    pub token: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn serve_http(scene: &Scene) -> HttpServer {
    serve_http_with(scene, &[])
}

/// [`serve_http`] with `extra` arguments.
fn serve_http_with(scene: &Scene, extra: &[&std::ffi::OsStr]) -> HttpServer {
    let token_file = scene.root.path().join("mcp-token");
    let mut child = sandcrab_cmd(scene)
        .args(["mcp", "serve", "--http", "0", "--workspace"])
        .arg(scene.workspace())
        .args(extra)
        .arg("--token-file")
        .arg(&token_file)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the server exits early").unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split(';').next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    HttpServer { child, url, token }
}

/// Each MCP client is a session of its own: a plugin instance kept warm
/// for one client's calls (`reuse = true`) is never handed to another, so
/// what one client left in it the next cannot read.
#[test]
fn one_mcp_client_never_reads_what_another_left_in_a_plugin() {
    let scene = Scene::new();
    let dir = crate::support::install_plugin(
        &scene.plugins(),
        "test-fixtures/stateful-tool",
        "stateful",
        |m| m,
    );
    let server = serve_http_with(&scene, &["--plugins".as_ref(), dir.as_os_str()]);
    let remember = |marker: &str| {
        let out = Command::new(mcp_python())
            .arg(client_script())
            .args(["http", &server.url, &server.token])
            .arg(
                json!([
                    {"call": "remember", "args": {"marker": marker}},
                    {"call": "remember", "args": {"marker": format!("{marker}-again")}}
                ])
                .to_string(),
            )
            .output()
            .unwrap();
        report(out)
    };
    let first = remember("left-by-one");
    // Within one client, the instance is reused (control).
    assert_eq!(
        first["steps"][1]["text"], "previous: left-by-one",
        "{first}"
    );
    let second = remember("two");
    assert_eq!(
        second["steps"][0]["text"], "previous: ",
        "the second client read the first's: {second}"
    );
}

#[test]
fn over_http_an_official_client_works_with_the_token() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("notes.txt"), "over http\n").unwrap();
    let server = serve_http(&scene);
    let out = Command::new(mcp_python())
        .arg(client_script())
        .args(["http", &server.url, &server.token])
        .arg(json!([{"call": "read_file", "args": {"file_path": "notes.txt"}}]).to_string())
        .output()
        .unwrap();
    let out = report(out);
    assert!(
        out["steps"][0]["text"]
            .as_str()
            .unwrap()
            .contains("over http")
    );
}

#[tokio::test]
async fn over_http_a_web_page_or_a_tokenless_caller_is_refused() {
    let scene = Scene::new();
    let server = serve_http(&scene);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "evil", "version": "1"}}
    });
    let http = reqwest::Client::new();
    let post = async |headers: &[(&str, &str)]| {
        let mut req = http
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap().status().as_u16()
    };
    let bearer = format!("Bearer {}", server.token);
    assert_eq!(post(&[]).await, 401, "no token");
    assert_eq!(post(&[("authorization", "Bearer wrong")]).await, 401);
    assert_eq!(
        post(&[
            ("authorization", &bearer),
            ("origin", "https://evil.example")
        ])
        .await,
        403,
        "a web page"
    );
    assert_eq!(
        post(&[("authorization", &bearer), ("host", "evil.example")]).await,
        403,
        "DNS rebinding"
    );
    assert_eq!(post(&[("authorization", &bearer)]).await, 200);
}

/// The official TypeScript SDK's client (`tests/mcp/client.mjs`).
fn ts_client() -> Command {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "the MCP TypeScript SDK is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
    );
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("client.mjs"));
    cmd
}

#[test]
fn the_typescript_sdk_client_works_over_stdio_and_http() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("notes.txt"), "from typescript\n").unwrap();
    let steps = json!([
        {"list": true},
        {"call": "read_file", "args": {"file_path": "notes.txt"}},
        {"call": "read_file", "args": {"wrong": 1}},
        {"call": "shell", "args": {"command": "echo early; sleep 1.5; echo late"}},
    ]);
    let serve = sandcrab_cmd(&scene);
    let mut cmd = ts_client();
    cmd.arg("stdio")
        .arg(steps.to_string())
        .arg("--")
        .arg(serve.get_program())
        .args(["mcp", "serve", "--workspace"])
        .arg(scene.workspace());
    for (k, v) in serve.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = report(cmd.output().unwrap());
    let s = out["steps"].as_array().unwrap();
    assert_eq!(out["server"], "sandcrab");
    assert!(tools_of(&s[0]).contains(&"grep".to_string()));
    assert!(s[1]["text"].as_str().unwrap().contains("from typescript"));
    assert_eq!(s[2]["is_error"], true, "{}", s[2]);
    assert!(s[3]["progress"].to_string().contains("early"), "{}", s[3]);

    let server = serve_http(&scene);
    let out = ts_client()
        .args(["http", &server.url, &server.token])
        .arg(json!([{"call": "read_file", "args": {"file_path": "notes.txt"}}]).to_string())
        .output()
        .unwrap();
    let out = report(out);
    assert!(
        out["steps"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from typescript")
    );
}

#[test]
fn the_operators_deny_rules_hold_for_mcp_clients_too() {
    let scene = Scene::new();
    scene.write_user_config("[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"deny\"\n");
    let out = over_stdio(
        &scene,
        &[],
        json!([
            {"call": "shell", "args": {"command": "touch via-mcp"}},
            {"call": "shell", "args": {"command": "echo fine"}},
        ]),
    );
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(steps[0]["is_error"], true, "{}", steps[0]);
    assert!(
        steps[0]["text"]
            .as_str()
            .unwrap()
            .contains("Denied by the operator's approval rule"),
        "{}",
        steps[0]
    );
    assert!(!scene.workspace().join("via-mcp").exists());
    // The refusal has a receipt, as an agent's refusal does: who would
    // have run it, and the rule that refused it.
    let receipt = &steps[0]["meta"]["sandcrab/receipt"];
    assert_eq!(receipt["status"], "denied", "{}", steps[0]);
    assert_eq!(receipt["principal"]["name"], "coding-tools", "{receipt}");
    assert!(
        receipt["programs"].as_array().unwrap().is_empty(),
        "{receipt}"
    );
    let approval = crate::support::approval_line(&receipt["approvals"][0]);
    assert!(
        approval.starts_with("deny by rule ") && approval.ends_with("(shell touch)"),
        "{receipt}"
    );
    assert_eq!(steps[1]["is_error"], false, "{}", steps[1]);
    assert_eq!(
        steps[1]["meta"]["sandcrab/receipt"]["status"], "ok",
        "{}",
        steps[1]
    );
}

/// With `--approvals on-risk`, the MCP client is asked (elicitation): a
/// yes runs the call and the receipt says the client answered, a no with
/// a note refuses it with the note, and a client that cannot answer gets
/// the refusal that names what would allow the call.
#[test]
fn the_mcp_client_is_asked_when_a_rule_says_ask() {
    let scene = Scene::new();
    let out = over_stdio(
        &scene,
        &["--approvals", "on-risk"],
        json!([
            {"answers": ["allow", "deny:use the Makefile"]},
            {"call": "shell", "args": {"command": "touch asked-yes"}},
            {"call": "shell", "args": {"command": "touch asked-no"}},
            {"asked": true},
        ]),
    );
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(steps[0]["is_error"], false, "{}", steps[0]);
    assert!(scene.workspace().join("asked-yes").exists());
    let receipt = &steps[0]["meta"]["sandcrab/receipt"];
    let line = crate::support::approval_line(&receipt["approvals"][0]);
    assert!(
        line.starts_with("ask by mode on-risk; allowed by the operator via mcp client at "),
        "{receipt}"
    );
    assert_eq!(steps[1]["is_error"], true, "{}", steps[1]);
    assert!(
        steps[1]["text"]
            .as_str()
            .unwrap()
            .contains("The operator denied this call: use the Makefile"),
        "{}",
        steps[1]
    );
    assert!(!scene.workspace().join("asked-no").exists());
    // Both answers are in the receipts, as the agent's would be.
    let denied =
        crate::support::approval_line(&steps[1]["meta"]["sandcrab/receipt"]["approvals"][0]);
    assert!(
        denied.starts_with("ask by mode on-risk; denied by the operator via mcp client at "),
        "{}",
        steps[1]
    );
    let asked = steps[2]["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2);
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        message.contains("shell: touch asked-yes") && message.contains("workspace-write sandbox"),
        "{message}"
    );
    // A client without elicitation cannot be asked: refused, not run.
    let out = over_stdio(
        &scene,
        &["--approvals", "on-risk"],
        json!([{"call": "shell", "args": {"command": "touch unasked"}}]),
    );
    let step = &out["steps"][0];
    assert_eq!(step["is_error"], true, "{step}");
    assert_eq!(
        crate::support::approval_line(&step["meta"]["sandcrab/receipt"]["approvals"][0]),
        "ask by mode on-risk; nobody to ask, refused",
        "{step}"
    );
    assert!(
        step["text"]
            .as_str()
            .unwrap()
            .contains("--approve 'command:touch unasked'"),
        "{step}"
    );
    assert!(!scene.workspace().join("unasked").exists());
}

/// The configured MCP servers' tools are served onward as `SERVER__tool`,
/// under the operator's selection and the server's grant, each call with
/// a receipt naming the server.
#[test]
fn configured_mcp_servers_are_served_onward_under_the_same_rules() {
    let scene = Scene::new();
    std::fs::write(scene.outside().join("secret.txt"), "TOP-SECRET").unwrap();
    crate::mcp_client_test::configure_probe(
        &scene,
        "",
        "[agent.tools]\nexclude = [\"probe__pid\"]\n",
    );
    let secret = scene.outside().join("secret.txt");
    let out = over_stdio(
        &scene,
        &[],
        json!([
            {"list": true},
            {"call": "probe__echo", "args": {"text": "onward"}},
            {"call": "probe__read_path", "args": {"path": secret}},
            {"call": "probe__pid", "args": {}},
        ]),
    );
    let steps = out["steps"].as_array().unwrap();
    let tools = tools_of(&steps[0]);
    for offered in ["read_file", "probe__echo", "probe__read_path"] {
        assert!(tools.contains(&offered.to_string()), "{tools:?}");
    }
    assert!(!tools.contains(&"probe__pid".to_string()), "{tools:?}");
    assert_eq!(steps[1]["is_error"], false, "{}", steps[1]);
    assert!(steps[1]["text"].as_str().unwrap().contains("echo: onward"));
    let receipt = &steps[1]["meta"]["sandcrab/receipt"];
    assert_eq!(receipt["principal"]["kind"], "mcp-server", "{receipt}");
    assert_eq!(receipt["principal"]["name"], "probe", "{receipt}");
    // The server's grant holds for the MCP client's calls too.
    assert!(!steps[2].to_string().contains("TOP-SECRET"), "{}", steps[2]);
    assert!(steps[2]["text"].as_str().unwrap().contains("denied"));
    // Excluded by the operator: not callable either.
    assert!(steps[3]["protocol_error"].is_string(), "{}", steps[3]);
}
