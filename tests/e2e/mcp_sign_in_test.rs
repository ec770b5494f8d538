//! Signing in to remote MCP servers through the binary, against an
//! authorization server the test starts on loopback
//! (`tests/mcp/oauth_server.py`): the token goes to the server it was
//! issued for and nowhere else, a call refused for want of scope is
//! granted by the operator's next login, and hostile or broken
//! authorization servers are refused with a clear error and nothing kept.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

use crate::support::{Scene, sandcrab_cmd};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/oauth_server.py")
}

/// One `oauth_server.py` and the log of what it was sent.
struct AuthServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl AuthServer {
    /// A server in `mode`; `other` is the origin its hostile answers name.
    fn start(scene: &Scene, mode: &str, other: Option<&AuthServer>) -> Self {
        let log = scene.root.path().join(format!("{mode}-{}.log", uuid()));
        let mut cmd = Command::new("python3");
        cmd.arg(script()).arg(mode).arg(&log);
        if let Some(other) = other {
            cmd.arg(other.origin());
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        AuthServer { child, port, log }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.origin())
    }

    /// Every request it was sent.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The Authorization headers it was sent.
    fn bearers(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|r| r["authorization"].as_str().map(str::to_string))
            .collect()
    }

    /// The scopes its authorization requests asked for.
    fn asked_scopes(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r["path"] == "/authorize")
            .map(|r| r["scope"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// `[mcp.servers.NAME] url = …` for each of `servers`.
fn configure(scene: &Scene, servers: &[(&str, String)]) {
    let text: String = servers
        .iter()
        .map(|(name, url)| format!("[mcp.servers.{name}]\nurl = \"{url}\"\n"))
        .collect();
    scene.write_user_config(&text);
}

/// `sandcrab ARGS -w WORKSPACE -vvv`, the browser played by the script.
fn sandcrab(scene: &Scene, args: &[&str]) -> Output {
    sandcrab_cmd(scene)
        .args(args)
        .arg("-w")
        .arg(scene.workspace())
        .arg("-vvv")
        .env(
            "BROWSER",
            format!("python3 {} --browse", script().display()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn sign_in_file(scene: &Scene, name: &str) -> PathBuf {
    scene
        .root
        .path()
        .join(format!("data/sandcrab/mcp-sign-in/{name}.json"))
}

/// The access token kept for `name`.
fn kept_token(scene: &Scene, name: &str) -> String {
    let kept: Value =
        serde_json::from_slice(&std::fs::read(sign_in_file(scene, name)).unwrap()).unwrap();
    kept["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every file under `dir` but the sign-ins, with its bytes.
fn files_outside_sign_ins(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.ends_with("mcp-sign-in") {
            continue;
        }
        if path.is_dir() {
            found.extend(files_outside_sign_ins(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

#[test]
fn mcp_login_signs_in_and_only_that_server_ever_sees_the_token() {
    let scene = Scene::new();
    let signed = AuthServer::start(&scene, "good", None);
    let other = AuthServer::start(&scene, "open", None);
    configure(&scene, &[("a", signed.url()), ("b", other.url())]);

    let login = sandcrab(&scene, &["mcp", "login", "a"]);
    assert!(login.status.success(), "{}", said(&login));
    let token = kept_token(&scene, "a");
    // Control: the signed-in server is called with the token.
    let call = sandcrab(&scene, &["tool", "call", "a__whoami", "--args", "{}"]);
    assert!(said(&call).contains("whoami: done"), "{}", said(&call));
    assert!(
        signed
            .bearers()
            .iter()
            .any(|b| b == &format!("Bearer {token}")),
        "{:?}",
        signed.requests()
    );
    // The other server, in the same configuration, is called without it.
    let call = sandcrab(&scene, &["tool", "call", "b__whoami", "--args", "{}"]);
    assert!(said(&call).contains("whoami: done"), "{}", said(&call));
    assert!(
        !other.requests().is_empty() && other.bearers().is_empty(),
        "{:?}",
        other.requests()
    );
    // A server whose URL changed since is not sent the old one's token.
    configure(&scene, &[("a", other.url())]);
    let moved = sandcrab(&scene, &["tool", "call", "a__whoami", "--args", "{}"]);
    assert!(said(&moved).contains("whoami: done"), "{}", said(&moved));
    assert!(other.bearers().is_empty(), "{:?}", other.requests());
    let listed = sandcrab(&scene, &["mcp", "list", "--no-connect"]);
    assert!(said(&listed).contains("another URL"), "{}", said(&listed));
    // Not in any log line (traced at the most verbose), and in no file
    // of sandcrab's but its sign-in.
    for out in [&login, &call, &moved, &listed] {
        assert!(!said(out).contains(&token), "{}", said(out));
    }
    for (path, bytes) in files_outside_sign_ins(&scene.root.path().join("data")) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&token), "{}", path.display());
    }
}

#[test]
fn a_call_refused_for_want_of_scope_is_granted_by_the_operators_next_login() {
    let scene = Scene::new();
    let server = AuthServer::start(&scene, "good", None);
    configure(&scene, &[("a", server.url())]);
    let login = sandcrab(&scene, &["mcp", "login", "a"]);
    assert!(login.status.success(), "{}", said(&login));

    let refused = sandcrab(&scene, &["tool", "call", "a__write_note", "--args", "{}"]);
    assert!(!refused.status.success());
    let told = said(&refused);
    assert!(
        told.contains("the scope \"read write\"") && told.contains("sandcrab mcp login a"),
        "{told}"
    );
    // Nothing signed in again by itself: one authorization request so far.
    assert_eq!(server.asked_scopes(), ["read"], "{:?}", server.requests());

    let again = sandcrab(&scene, &["mcp", "login", "a"]);
    assert!(again.status.success(), "{}", said(&again));
    assert!(
        said(&again).contains("Also asking for what a refused call needed (step-up): read write"),
        "{}",
        said(&again)
    );
    let asked = server.asked_scopes();
    let second: Vec<&str> = asked[1].split_whitespace().collect();
    assert!(
        second.contains(&"read") && second.contains(&"write"),
        "{asked:?}"
    );
    let call = sandcrab(&scene, &["tool", "call", "a__write_note", "--args", "{}"]);
    assert!(said(&call).contains("write_note: done"), "{}", said(&call));
}

#[test]
fn hostile_authorization_servers_are_refused_clearly_and_nothing_is_kept() {
    let cases = [
        ("issuer-elsewhere", "issuer mismatch"),
        ("legacy-elsewhere", "issuer mismatch"),
        ("resource-mismatch", "resource"),
        ("token-garbage", "token"),
        ("bad-scheme", "only https"),
    ];
    for (mode, reason) in cases {
        let scene = Scene::new();
        let elsewhere = AuthServer::start(&scene, "open", None);
        let server = AuthServer::start(&scene, mode, Some(&elsewhere));
        configure(&scene, &[("a", server.url())]);
        let login = sandcrab(&scene, &["mcp", "login", "a"]);
        let told = said(&login);
        assert!(!login.status.success(), "{mode}: {told}");
        let line = told
            .lines()
            .find(|l| l.contains("signing in to"))
            .unwrap_or_else(|| panic!("{mode}: no error line in {told}"));
        assert!(
            line.to_ascii_lowercase().contains(reason) && line.contains(&server.url()),
            "{mode}: {line}"
        );
        assert!(!sign_in_file(&scene, "a").exists(), "{mode}");
        // The control: the server was asked (discovery ran).
        assert!(!server.requests().is_empty(), "{mode}");
        // What the hostile metadata named was never contacted.
        assert!(
            elsewhere.requests().is_empty(),
            "{mode}: {:?}",
            elsewhere.requests()
        );
    }
}

#[test]
fn metadata_that_redirects_to_another_origin_is_not_followed() {
    let scene = Scene::new();
    let elsewhere = AuthServer::start(&scene, "open", None);
    let server = AuthServer::start(&scene, "metadata-redirect", Some(&elsewhere));
    configure(&scene, &[("a", server.url())]);
    let login = sandcrab(&scene, &["mcp", "login", "a"]);
    let told = said(&login);
    assert!(
        !login.status.success() && told.contains("discovery failed"),
        "{told}"
    );
    assert!(!sign_in_file(&scene, "a").exists());
    // Control: discovery asked the server for its metadata, and was
    // redirected.
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r["path"].as_str().unwrap().starts_with("/.well-known/")),
        "{}",
        said(&login)
    );
    assert!(
        elsewhere.requests().is_empty(),
        "{}\n{:?}",
        said(&login),
        elsewhere.requests()
    );
}
