//! The MCP working group's conformance suite (`@modelcontextprotocol/
//! conformance`, installed by `scripts/setup-polyglot` with the Node.js
//! it needs) against `sandcrab mcp serve --http`. The suite cannot send a
//! bearer token, so a loopback proxy adds it and changes nothing else —
//! Host and Origin pass as the suite sends them, so its DNS-rebinding
//! checks meet the server's own guard. The scenarios that need the
//! suite's own fixture tools, resources or prompts do not apply.
//!
//! The client side: the suite's scenario servers against sandcrab as a
//! user runs it (`client_driver.py`: `mcp list`, `tool call`, a server's
//! question answered on stdin).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::Scene;

/// The server scenarios that apply to a server of sandboxed tools.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "logging-set-level",
    "tools-list",
    "completion-complete",
    "resources-list",
    "prompts-list",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp-conformance")
}

/// The loopback proxy that adds `token` to every request to `port`; it
/// stops when dropped.
struct Proxy {
    child: std::process::Child,
    port: u16,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn proxy(port: u16, token: &str) -> Proxy {
    let mut child = Command::new("python3")
        .arg(suite().join("token_proxy.py"))
        .arg(port.to_string())
        .arg(token)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("proxy said {line:?}"));
    Proxy { child, port }
}

/// The suite's command line: its Node.js running its CLI.
fn suite_command() -> Command {
    let node = suite().join("node_modules/.bin/node");
    let cli = suite().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "the conformance suite is not installed: run scripts/setup-polyglot"
    );
    let mut command = Command::new(node);
    command.arg(cli);
    command
}

#[test]
fn the_official_conformance_suite_passes_every_server_scenario_that_applies() {
    let scene = Scene::new();
    let server = crate::mcp_server_test::serve_http(&scene);
    let port: u16 = server
        .url
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {}", server.url));
    let proxy = proxy(port, &server.token);
    let url = format!("http://127.0.0.1:{}/mcp", proxy.port);
    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let out = suite_command()
            .args(["server", "--url", &url, "--scenario", scenario, "-o"])
            .arg(scene.root.path().join("conformance"))
            .output()
            .unwrap();
        if !out.status.success() {
            failed.push(format!(
                "{scenario}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The client scenarios: every one but the extensions (client
/// credentials, cross-app access), as a user runs them (the driver signs
/// in, lists, calls; a call refused for want of scope is a second `mcp
/// login`, which asks for the wider scope: step-up).
const CLIENT_SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
];

#[test]
fn the_official_conformance_suite_passes_every_client_scenario_but_the_extensions() {
    let scene = Scene::new();
    let driver = format!("python3 {}", suite().join("client_driver.py").display());
    let mut failed = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        let out = suite_command()
            .args(["client", "--command", &driver, "--scenario", scenario, "-o"])
            .arg(scene.root.path().join("conformance"))
            .env("SANDCRAB_BIN", env!("CARGO_BIN_EXE_sandcrab"))
            .env(
                "SANDCRAB_CONFORMANCE_ROOT",
                scene
                    .root
                    .path()
                    .join("users")
                    .join(scenario.replace('/', "-")),
            )
            .env(
                "XDG_CACHE_HOME",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache"),
            )
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The suite's own verdict (it exits 0 either way).
        if !out.status.success() || !said.contains("OVERALL: PASSED") {
            failed.push(format!("{scenario} ({}):\n{said}", out.status));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    signed_in_user_keeps_the_token_out_of_reach(
        &scene.root.path().join("users/auth-metadata-default"),
    );
}

/// After a sign-in: the token is kept owner-only in the data folder,
/// `mcp list` says signed in, no tool the model calls reads it, and
/// `mcp logout` removes it.
fn signed_in_user_keeps_the_token_out_of_reach(users: &Path) {
    let root = std::fs::read_dir(users)
        .unwrap()
        .next()
        .expect("the driver made its user")
        .unwrap()
        .path();
    let token = root.join("data/sandcrab/mcp-sign-in/conformance.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&token), 0o600, "{}", token.display());
    assert_eq!(mode(token.parent().unwrap()), 0o700);
    let kept = std::fs::read_to_string(&token).unwrap();
    assert!(kept.contains("access_token"), "{kept}");
    let sandcrab = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sandcrab"))
            .args(args)
            .arg("-w")
            .arg(root.join("workspace"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_DATA_HOME", root.join("data"))
            .env(
                "XDG_CACHE_HOME",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache"),
            )
            .output()
            .unwrap()
    };
    let listed = sandcrab(&["mcp", "list", "--no-connect"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("sign-in:  signed in"),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
    // The file tools and a shell command are refused it.
    let args = serde_json::json!({"file_path": token}).to_string();
    let read = sandcrab(&["tool", "call", "read_file", "--args", &args]);
    let said =
        String::from_utf8_lossy(&read.stdout).to_string() + &String::from_utf8_lossy(&read.stderr);
    assert!(
        !read.status.success() && !said.contains("access_token"),
        "{said}"
    );
    let args = serde_json::json!({"command": format!("cat {}", token.display())}).to_string();
    let cat = sandcrab(&["tool", "call", "shell", "--args", &args]);
    let said =
        String::from_utf8_lossy(&cat.stdout).to_string() + &String::from_utf8_lossy(&cat.stderr);
    assert!(!said.contains("access_token"), "{said}");
    // The controls: the same shell command reads a workspace file, and
    // the operator's own shell reads the token.
    std::fs::write(root.join("workspace/note.txt"), "readable-note").unwrap();
    let args = serde_json::json!({"command": "cat note.txt"}).to_string();
    let cat = sandcrab(&["tool", "call", "shell", "--args", &args]);
    assert!(
        String::from_utf8_lossy(&cat.stdout).contains("readable-note"),
        "{}",
        String::from_utf8_lossy(&cat.stderr)
    );
    assert!(std::fs::read_to_string(&token).is_ok());
    let out = sandcrab(&["mcp", "logout", "conformance"]);
    assert!(out.status.success());
    assert!(!token.exists());
    let listed = sandcrab(&["mcp", "list", "--no-connect"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("not signed in"));
}
