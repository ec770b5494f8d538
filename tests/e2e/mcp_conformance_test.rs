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

#[test]
fn the_official_conformance_suite_passes_every_server_scenario_that_applies() {
    let node = suite().join("node_modules/.bin/node");
    let cli = suite().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "the conformance suite is not installed: run scripts/setup-polyglot"
    );
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
        let out = Command::new(&node)
            .arg(&cli)
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

/// The client scenarios sandcrab passes (sign-in, `auth/*`, is not built).
const CLIENT_SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

#[test]
fn the_official_conformance_suite_passes_the_client_scenarios_sandcrab_takes() {
    let node = suite().join("node_modules/.bin/node");
    let cli = suite().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "the conformance suite is not installed: run scripts/setup-polyglot"
    );
    let scene = Scene::new();
    let driver = format!("python3 {}", suite().join("client_driver.py").display());
    let mut failed = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        let out = Command::new(&node)
            .arg(&cli)
            .args(["client", "--command", &driver, "--scenario", scenario, "-o"])
            .arg(scene.root.path().join("conformance"))
            .env("SANDCRAB_BIN", env!("CARGO_BIN_EXE_sandcrab"))
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
}
