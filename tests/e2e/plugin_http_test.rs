//! Plugins make HTTP requests through `wasi:http` without ever holding the
//! key: real servers on loopback (one on 127.0.0.1, "another host" on
//! 127.0.0.2), the http-tool fixture making the requests through the SDK's
//! helper, the operator's grants and credentials in the policy.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use sandcrab::plugin::policy::PluginGrant;
use sandcrab::plugin::{
    ActivityLog, LoadedPlugin, PluginHost, PluginSource, Policy, PolicyMode, ToolCallContext,
};
use serde_json::{Value, json};

use crate::support::{Scene, cache_dir, install_plugin, sandcrab_cmd};
use crate::third_party_tools_test::built_example;

const SECRET: &str = "tok-live-9f8e7d6c5b4a";

/// What a test server saw: each request's path and Authorization header.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Request>>>);

/// A request's path and its Authorization header.
type Request = (String, Option<String>);

impl Seen {
    fn all(&self) -> Vec<Request> {
        self.0.lock().unwrap().clone()
    }
}

/// A JSON API like an issue tracker's, with the endpoints the attacks need.
async fn serve(ip: [u8; 4]) -> (SocketAddr, Seen) {
    let seen = Seen::default();
    fn record(seen: &Seen, path: &str, headers: &HeaderMap) {
        seen.0.lock().unwrap().push((
            path.to_string(),
            headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string()),
        ));
    }
    let app = axum::Router::new()
        .route(
            "/issues",
            get(|State(seen): State<Seen>, headers: HeaderMap| async move {
                record(&seen, "/issues", &headers);
                axum::Json(
                    json!([{"id": 1, "title": "deploy key rotates monthly", "state": "open"}]),
                )
            })
            .post(
                |State(seen): State<Seen>, headers: HeaderMap, body: String| async move {
                    record(&seen, "/issues POST", &headers);
                    let sent: Value = serde_json::from_str(&body).unwrap_or_default();
                    (
                        StatusCode::CREATED,
                        axum::Json(json!({"id": 2, "title": sent["title"], "state": "open"})),
                    )
                },
            ),
        )
        .route(
            "/whoami",
            get(|State(seen): State<Seen>, headers: HeaderMap| async move {
                // A server that echoes the credential back, as some do.
                record(&seen, "/whoami", &headers);
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                ([("x-echo", auth.clone())], format!("you sent: {auth}"))
            }),
        )
        .route(
            "/echo-in-name",
            get(|headers: HeaderMap| async move {
                // The credential handed back as a header's name.
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let token = auth.trim_start_matches("Bearer ").to_ascii_lowercase();
                let mut out = HeaderMap::new();
                out.append(
                    axum::http::HeaderName::from_bytes(format!("x-{token}").as_bytes()).unwrap(),
                    "1".parse().unwrap(),
                );
                (out, "see the headers")
            }),
        )
        .route(
            "/echo-split",
            get(|headers: HeaderMap| async move {
                // The credential in two halves, each harmless alone.
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let token = auth.trim_start_matches("Bearer ").to_string();
                let (a, b) = token.split_at(token.len() / 2);
                let mut out = HeaderMap::new();
                out.append("x-part-one", a.parse().unwrap());
                out.append("etag", b.parse().unwrap());
                (out, "see the headers")
            }),
        )
        .route(
            "/redirect",
            get(
                |State(seen): State<Seen>,
                 headers: HeaderMap,
                 Query(q): Query<BTreeMap<String, String>>| async move {
                    record(&seen, "/redirect", &headers);
                    (
                        StatusCode::FOUND,
                        [("location", q.get("to").cloned().unwrap_or_default())],
                    )
                },
            ),
        )
        .route(
            "/notes.txt",
            get(|State(seen): State<Seen>, headers: HeaderMap| async move {
                record(&seen, "/notes.txt", &headers);
                "first\n# TODO: rotate the deploy key\nlast\n"
            }),
        )
        .route(
            "/data.json",
            get(|State(seen): State<Seen>, headers: HeaderMap| async move {
                record(&seen, "/data.json", &headers);
                axum::Json(json!({"name": "crab", "legs": 10}))
            }),
        )
        .route(
            "/headers",
            get(|headers: HeaderMap| async move {
                // The names of the request's headers, as a server that
                // echoes requests would show them.
                headers
                    .keys()
                    .map(|k| k.as_str().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }),
        )
        .route(
            "/sneaky-encoding",
            get(|| async {
                let mut headers = HeaderMap::new();
                headers.append("content-encoding", "identity".parse().unwrap());
                headers.append("content-encoding", "gzip".parse().unwrap());
                (headers, "compressed, it says")
            }),
        )
        .route(
            "/big",
            get(|| async { "x".repeat(3 << 20).into_response() }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(std::time::Duration::from_secs(20)).await;
                "late"
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((ip, 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, seen)
}

/// The http-tool fixture asking for `asked`, loaded under `policy`, with
/// `GITHUB_TOKEN`-like secret in the operator's environment.
async fn load(
    scene: &Scene,
    asked: &[impl AsRef<str>],
    policy: Policy,
) -> (PluginHost, Arc<LoadedPlugin>) {
    let (host, plugin) = try_load(scene, asked, policy).await;
    (host, plugin.unwrap())
}

async fn try_load(
    scene: &Scene,
    asked: &[impl AsRef<str>],
    policy: Policy,
) -> (
    PluginHost,
    Result<Arc<LoadedPlugin>, sandcrab::plugin::LoadError>,
) {
    let list = asked
        .iter()
        .map(|o| format!("\"{}\"", o.as_ref()))
        .collect::<Vec<_>>()
        .join(", ");
    let dir = install_plugin(&scene.plugins(), "test-fixtures/http-tool", "http", |m| {
        m.replace(
            "http = [\"https://api.example.com\"]",
            &format!("http = [{list}]"),
        )
    });
    let mut config = sandcrab::plugin::PluginHostConfig::new(scene.workspace());
    config.policy = policy;
    config.cache_dir = Some(cache_dir());
    config.host_env = Some(
        [
            ("TRACKER_TOKEN".to_string(), SECRET.to_string()),
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ]
        .into(),
    );
    let mut host = PluginHost::new(config).unwrap();
    let plugin = host.load(&PluginSource::Dir(dir)).await;
    (host, plugin)
}

/// The operator's grant: `origins`, and the tracker's token for `cred`.
fn policy(origins: &[impl AsRef<str>], cred: Option<&str>) -> Policy {
    let mut text = format!(
        "http = [{}]\n",
        origins
            .iter()
            .map(|o| format!("\"{}\"", o.as_ref()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(origin) = cred {
        text.push_str(&format!(
            "[credentials.\"{origin}\"]\nheader = \"Authorization\"\nvalue = \"Bearer ${{TRACKER_TOKEN}}\"\n"
        ));
    }
    let grant: PluginGrant = toml::from_str(&text).unwrap();
    let mut policy = Policy::default();
    policy.plugins.insert("http-tool".into(), grant);
    policy
}

/// Call `fetch`; the tool's answer and the call's HTTP receipts.
async fn fetch(plugin: &LoadedPlugin, args: Value) -> (Value, Vec<sandcrab::plugin::HttpExchange>) {
    let log = ActivityLog::default();
    let ctx = ToolCallContext {
        session_id: "s".into(),
        call_id: "c".into(),
        programs: Some(log.clone()),
        ..Default::default()
    };
    let out = plugin
        .call_tool("fetch", &args.to_string(), &ctx, None)
        .await
        .unwrap();
    let http = log.lock().unwrap().http.clone();
    (serde_json::from_str(&out.text).unwrap(), http)
}

fn xor_hex(secret: &str) -> String {
    secret
        .bytes()
        .map(|b| format!("{:02x}", b ^ 0x5a))
        .collect()
}

fn origin(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

#[tokio::test]
async fn a_granted_origin_gets_the_credential_the_plugin_never_sees() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let (host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;

    let (out, http) = fetch(
        &plugin,
        json!({"url": format!("{o}/issues"), "scan_for": xor_hex(SECRET)}),
    )
    .await;
    assert_eq!(out["answer"]["status"], 200, "{out}");
    assert!(
        out["answer"]["body"]
            .as_str()
            .unwrap()
            .contains("deploy key")
    );
    assert_eq!(
        seen.all(),
        [("/issues".to_string(), Some(format!("Bearer {SECRET}")))],
        "the server received the header the host added"
    );
    assert_eq!(
        out["secret_in_memory"], false,
        "the guest's memory never held it"
    );
    // The scan does find a secret the guest did hold (its own header).
    let (out, _) = fetch(
        &plugin,
        json!({"url": format!("{o}/issues"), "headers": [["x-note", SECRET]], "scan_for": xor_hex(SECRET)}),
    )
    .await;
    assert_eq!(
        out["secret_in_memory"], true,
        "the scan sees the guest's memory"
    );
    seen.0.lock().unwrap().clear();

    // The receipt names the credential, never its value.
    assert_eq!(http.len(), 1);
    assert_eq!(http[0].status, Some(200));
    assert_eq!(http[0].method, "GET");
    let receipt = serde_json::to_string(&http).unwrap();
    assert!(
        receipt.contains("authorization for") && receipt.contains("$TRACKER_TOKEN"),
        "{receipt}"
    );
    assert!(!receipt.contains(SECRET));

    // A server that echoes it back: withheld in the body and the headers,
    // so neither the guest's memory nor its log holds it.
    let (out, _) = fetch(
        &plugin,
        json!({"url": format!("{o}/whoami"), "scan_for": xor_hex(SECRET)}),
    )
    .await;
    let text = out.to_string();
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("withheld by sandcrab"), "{text}");
    assert_eq!(out["secret_in_memory"], false);

    // Nor handed back under a header's name, or in halves over two
    // headers (which the guest would put together).
    let (half_a, half_b) = SECRET.split_at(SECRET.len() / 2);
    for path in ["/echo-in-name", "/echo-split"] {
        let (out, _) = fetch(
            &plugin,
            json!({"url": format!("{o}{path}"), "scan_for": xor_hex(SECRET)}),
        )
        .await;
        let text = out.to_string().to_ascii_lowercase();
        assert!(!text.contains(SECRET), "{path}: {text}");
        assert!(
            !(text.contains(half_a) && text.contains(half_b)),
            "{path}: both halves reached the guest: {text}"
        );
        assert_eq!(out["secret_in_memory"], false, "{path}");
    }

    // Nor its environment.
    let env = plugin
        .call_tool("env", "{}", &ToolCallContext::default(), None)
        .await
        .unwrap()
        .text;
    assert!(!env.contains(SECRET), "{env}");
    drop(host);
}

#[tokio::test]
async fn the_guest_cannot_send_its_own_credential_header_to_a_credentialed_origin() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let (_host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;
    let (out, http) = fetch(
        &plugin,
        json!({"url": format!("{o}/issues"), "headers": [["Authorization", "Bearer forged"]]}),
    )
    .await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("carries its own 'authorization' header"),
        "{out}"
    );
    assert!(seen.all().is_empty(), "nothing reached the server");
    assert!(http[0].refused.is_some());
}

#[tokio::test]
async fn origins_outside_the_grant_are_refused_with_the_grant_to_add() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let (other, other_seen) = serve([127, 0, 0, 2]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let other_o = origin(other);
    // The manifest asks for both; the operator grants only the first.
    let (_host, plugin) = load(&scene, &[&o, &other_o], policy(&[&o], Some(&o))).await;

    // Another host: refused, naming the grant.
    let (out, _) = fetch(&plugin, json!({"url": format!("{other_o}/issues")})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains(&format!("http = [\"{other_o}\"]")),
        "{out}"
    );

    // A redirect from the granted origin to the other one: the first hop
    // is answered, the second refused; the credential never went there.
    let (out, http) = fetch(
        &plugin,
        json!({"url": format!("{o}/redirect?to={other_o}/issues")}),
    )
    .await;
    assert!(out["answer"]["refused"].as_str().is_some(), "{out}");
    assert_eq!(http.len(), 2, "{http:?}");
    assert_eq!(http[0].status, Some(302));
    assert!(http[1].refused.is_some());
    assert!(
        other_seen.all().is_empty(),
        "the other host was never reached"
    );
    assert_eq!(seen.all().len(), 1);

    // An origin the manifest does not even ask for.
    let (out, _) = fetch(&plugin, json!({"url": "http://127.0.0.3:9/x"})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("does not ask for"), "{out}");
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_needs_the_address_granted() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    // `localhost` is a name: granting it does not grant loopback.
    let by_name = format!("http://localhost:{}", addr.port());
    let (_host, plugin) = load(&scene, &[&by_name], policy(&[&by_name], None)).await;
    let (out, http) = fetch(&plugin, json!({"url": format!("{by_name}/issues")})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("(loopback)"), "{out}");
    assert!(
        refused.contains(&format!("\"http://127.0.0.1:{}\"", addr.port()))
            || refused.contains(&format!("\"http://[::1]:{}\"", addr.port())),
        "the refusal names the address to grant: {refused}"
    );
    assert!(http[0].address.is_none(), "no connection was made");
    assert!(seen.all().is_empty());
}

#[tokio::test]
async fn plain_http_needs_its_own_grant() {
    let scene = Scene::new();
    let tls = "https://127.0.0.1:9".to_string();
    let (_host, plugin) = load(&scene, &[&tls], policy(&[&tls], None)).await;
    let (out, _) = fetch(&plugin, json!({"url": "http://127.0.0.1:9/x"})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("plain http to 127.0.0.1 is not granted"),
        "{out}"
    );
}

#[tokio::test]
async fn an_oversized_response_is_refused_and_a_slow_one_cut_by_the_limit() {
    let (addr, _) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let mut p = policy(&[&o], None);
    let grant = p.plugins.get_mut("http-tool").unwrap();
    grant.limits.http_response_kb = Some(1024);
    grant.limits.http_timeout_ms = Some(500);
    let (_host, plugin) = load(&scene, &[&o], p).await;

    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/big")})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("larger than 1024 KiB"), "{out}");
    assert!(refused.contains("http_response_kb"), "{out}");

    let started = std::time::Instant::now();
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/slow")})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("no answer in time"), "{out}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    // And the plugin keeps working.
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/issues")})).await;
    assert_eq!(out["answer"]["status"], 200);
}

#[tokio::test]
async fn methods_are_granted_per_origin() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let grant: PluginGrant = toml::from_str(&format!(
        "http = [{{ origin = \"{o}\", methods = [\"GET\"] }}]"
    ))
    .unwrap();
    let mut p = Policy::default();
    p.plugins.insert("http-tool".into(), grant);
    let (_host, plugin) = load(&scene, &[&o], p).await;
    let (out, _) = fetch(
        &plugin,
        json!({"url": format!("{o}/issues"), "method": "POST", "body": "{}"}),
    )
    .await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("POST to") && refused.contains("methods = [\"POST\"]"),
        "{out}"
    );
    assert!(seen.all().is_empty());
}

#[tokio::test]
async fn locked_mode_refuses_http_to_an_unpinned_plugin() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let mut p = policy(&[&o], None);
    p.mode = PolicyMode::Locked;
    let (_host, unpinned) = try_load(&scene, &[&o], p.clone()).await;
    let Err(err) = unpinned else {
        panic!("locked mode loads no unpinned plugin")
    };
    let err = err.to_string();
    assert!(err.contains("pin"), "{err}");
    // Pinned and granted, it reaches exactly the granted origin.
    let wasm = std::fs::read(
        sandcrab_bundled_plugins::artifact("test-fixtures/http-tool")
            .unwrap()
            .wasm_path,
    )
    .unwrap();
    p.plugins.get_mut("http-tool").unwrap().sha256 =
        Some(sandcrab::plugin::integrity::sha256_hex(&wasm));
    let (_host, plugin) = load(&scene, &[&o], p.clone()).await;
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/issues")})).await;
    assert_eq!(out["answer"]["status"], 200, "{out}");
    assert_eq!(seen.all().len(), 1);
}

/// The example plugin, end to end through the binary as an operator runs
/// it: the grant and the credential in the user's configuration, the token
/// in sandcrab's environment, the tools called by `sandcrab tool call`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issue_tracker_example_calls_an_authenticated_api() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    install_plugin(
        &scene.plugins(),
        "examples/issue-tracker",
        "issue-tracker",
        |m| m.replace("https://tracker.example.com", &o),
    );
    scene.write_user_config(&format!(
        "plugin_dirs = [\"{}\"]\n\
         [policy.plugins.issue-tracker]\n\
         http = [{{ origin = \"{o}\", methods = [\"GET\", \"POST\"] }}]\n\
         env = [\"ISSUE_TRACKER_URL\"]\n\
         [policy.plugins.issue-tracker.credentials.\"{o}\"]\n\
         header = \"Authorization\"\n\
         value = \"Bearer ${{TRACKER_TOKEN}}\"\n",
        scene.plugins().display()
    ));
    let url = [("ISSUE_TRACKER_URL", o.as_str())];
    let run = |args: &[&str]| with_token(&scene, args, &url);

    let out = run(&["tool", "call", "list_issues"]).await;
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stdout).trim(),
        "#1 [open] deploy key rotates monthly"
    );
    let title = json!({"title": "rotate the key"}).to_string();
    let out = run(&["tool", "call", "open_issue", "--args", &title]).await;
    assert_eq!(
        text(&out.stdout).trim(),
        "Opened #2: rotate the key",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        seen.all(),
        [
            ("/issues".to_string(), Some(format!("Bearer {SECRET}"))),
            ("/issues POST".to_string(), Some(format!("Bearer {SECRET}"))),
        ]
    );

    // The operator sees the grant and the credential's name, not its value.
    let out = run(&["plugins", "inspect", "issue-tracker"]).await;
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!("http:      {o} (GET, POST)")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "credential: authorization for {o} from $TRACKER_TOKEN (set)"
        )),
        "{shown}"
    );
    assert!(!shown.contains(SECRET) && !text(&out.stderr).contains(SECRET));
}

/// The Python example (componentize-py, its own wasi:http bindings) and
/// the JavaScript one (`fetch` in componentize-js) make real requests
/// through the same gate: the granted origin answers (with the host's
/// credential), another host is refused before anything leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_and_javascript_examples_request_through_the_same_gate() {
    let (addr, seen) = serve([127, 0, 0, 1]).await;
    let (other, other_seen) = serve([127, 0, 0, 2]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let other_o = origin(other);
    for (example, asked) in [
        ("python-notes", "https://raw.githubusercontent.com"),
        ("js-json", "https://api.github.com"),
    ] {
        let from = built_example(example);
        let to = scene.plugins().join(example);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let text = std::fs::read(entry.path()).unwrap();
            let text = if entry.file_name() == "plugin.toml" {
                String::from_utf8(text)
                    .unwrap()
                    .replace(
                        &format!("http = [\"{asked}\"]"),
                        &format!("http = [\"{o}\", \"{other_o}\"]"),
                    )
                    .into_bytes()
            } else {
                text
            };
            std::fs::write(to.join(entry.file_name()), text).unwrap();
        }
    }
    let mut config = format!("plugin_dirs = [\"{}\"]\n", scene.plugins().display());
    for name in ["python-notes", "js-json"] {
        config.push_str(&format!(
            "[policy.plugins.{name}]\nhttp = [\"{o}\"]\n\
             [policy.plugins.{name}.credentials.\"{o}\"]\nheader = \"Authorization\"\nvalue = \"Bearer ${{TRACKER_TOKEN}}\"\n"
        ));
    }
    scene.write_user_config(&config);
    let call = |tool: &str, url: String| {
        let args = json!({ "url": url }).to_string();
        with_token(&scene, &["tool", "call", tool, "--args", &args], &[])
    };

    let py = call("url_todo_list", format!("{o}/notes.txt")).await;
    assert_eq!(
        text(&py.stdout).trim(),
        "2: # TODO: rotate the deploy key",
        "{}",
        text(&py.stderr)
    );
    let js = call("url_json_keys", format!("{o}/data.json")).await;
    assert_eq!(
        text(&js.stdout).trim(),
        "legs: number\nname: string",
        "{}",
        text(&js.stderr)
    );
    assert_eq!(
        seen.all(),
        [
            ("/notes.txt".to_string(), Some(format!("Bearer {SECRET}"))),
            ("/data.json".to_string(), Some(format!("Bearer {SECRET}"))),
        ],
        "both requests arrived with the credential the host added"
    );

    // Asked for in the manifest, not granted: refused before it leaves.
    let py = call("url_todo_list", format!("{other_o}/notes.txt")).await;
    assert!(!py.status.success());
    let shown = text(&py.stdout) + &text(&py.stderr);
    assert!(
        shown.contains(&format!("http = [\"{other_o}\"]")),
        "Python reads the refusal: {shown}"
    );
    let js = call("url_json_keys", format!("{other_o}/data.json")).await;
    assert!(!js.status.success(), "{}", text(&js.stdout));
    assert!(
        other_seen.all().is_empty(),
        "the other host was never reached"
    );
}

/// A bare HTTP/1.1 server that counts connections; it answers every
/// request with "ok", and closes each connection after one answer (without
/// saying so) when `drop_after_one`.
async fn counting_server(
    drop_after_one: bool,
) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .await;
                        if drop_after_one {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, count)
}

#[tokio::test]
async fn requests_reuse_a_kept_connection_and_survive_one_the_server_dropped() {
    let scene = Scene::new();
    for (drop_after_one, connections) in [(false, 1), (true, 3)] {
        let (addr, count) = counting_server(drop_after_one).await;
        let o = origin(addr);
        let (_host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;
        for _ in 0..3 {
            let (out, _) = fetch(&plugin, json!({"url": format!("{o}/ping")})).await;
            assert_eq!(out["answer"]["body"], "ok", "{out}");
        }
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst),
            connections,
            "drop_after_one = {drop_after_one}"
        );
    }
}

/// Call `tool` with `args`; its text and the call's activity.
async fn call_logged(
    plugin: &LoadedPlugin,
    tool: &str,
    args: Value,
) -> (String, sandcrab::plugin::CallActivity) {
    let log = ActivityLog::default();
    let ctx = ToolCallContext {
        session_id: "s".into(),
        call_id: "c".into(),
        programs: Some(log.clone()),
        ..Default::default()
    };
    let out = plugin.call_tool(tool, &args.to_string(), &ctx, None).await;
    let text = match out {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    };
    let activity = log.lock().unwrap().clone();
    (text, activity)
}

/// A request the guest abandons stays in the receipt, and requests past the
/// most a receipt lists are counted, not lost.
#[tokio::test]
async fn abandoned_and_excess_requests_still_show_in_the_receipt() {
    let (addr, _) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let (_host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;
    let (text, activity) = call_logged(
        &plugin,
        "fire_and_forget",
        json!({"url": format!("{o}/slow"), "count": 3}),
    )
    .await;
    assert_eq!(text, "3 started");
    assert_eq!(activity.http.len(), 3, "{activity:?}");
    for exchange in &activity.http {
        assert_eq!(exchange.method, "GET");
        assert!(exchange.refused.is_some(), "{exchange:?}");
    }
    let (text, activity) = call_logged(
        &plugin,
        "fire_and_forget",
        json!({"url": "http://127.0.0.9:9/x", "count": 300}),
    )
    .await;
    assert_eq!(text, "300 started");
    assert_eq!(activity.http.len(), 256);
    assert_eq!(activity.http_unlisted, 44);
}

/// A guest cannot blow up the host or its receipts with a huge method, and
/// cannot pile up unread responses past its memory limit.
#[tokio::test]
async fn a_huge_method_and_hoarded_responses_are_bounded() {
    let (addr, _) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let (_host, plugin) = load(&scene, &[&o], policy(&[&o], None)).await;
    let (out, http) = fetch(
        &plugin,
        json!({"url": format!("{o}/issues"), "method": "X".repeat(100_000)}),
    )
    .await;
    assert!(
        out["answer"]["refused"]
            .as_str()
            .unwrap_or_default()
            .contains("longer than 32"),
        "{out}"
    );
    assert!(http[0].method.len() < 40, "{}", http[0].method.len());

    // The fixture may use 64 MiB; each answer is 3 MiB and never read.
    let (text, _) = call_logged(
        &plugin,
        "hoard",
        json!({"url": format!("{o}/big"), "count": 30}),
    )
    .await;
    let hoard: Value = serde_json::from_str(&text).unwrap();
    let kept = hoard["kept"].as_u64().unwrap();
    assert!((15..=21).contains(&kept), "{hoard}");
    assert!(
        hoard["refused"][0]
            .as_str()
            .unwrap()
            .contains("has not read"),
        "{hoard}"
    );
    // Once the instance is gone, its budget is too.
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/big")})).await;
    assert_eq!(out["answer"]["status"], 200);
}

/// With a credential in play, nothing may ask for the answer in slices,
/// compressed or re-encoded, and an answer that says it is encoded is
/// withheld.
#[tokio::test]
async fn credentialed_answers_cannot_be_asked_for_in_another_shape() {
    let (addr, _) = serve([127, 0, 0, 1]).await;
    let scene = Scene::new();
    let o = origin(addr);
    let (_host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;
    let (out, _) = fetch(
        &plugin,
        json!({"url": format!("{o}/headers"), "headers": [
            ["range", "bytes=7-12"], ["te", "gzip"], ["accept-charset", "utf-16"],
            ["accept-encoding", "gzip"], ["if-range", "x"]
        ]}),
    )
    .await;
    let names = out["answer"]["body"].as_str().unwrap().to_string();
    for gone in ["range", "te", "accept-charset", "if-range"] {
        assert!(
            !names.split(',').any(|n| n == gone),
            "{gone} reached the server: {names}"
        );
    }
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/sneaky-encoding")})).await;
    let refused = out["answer"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("compressed"), "{out}");
}

/// A CA and a TLS server on loopback whose certificate it signed (for
/// 127.0.0.1 and localhost); what the server saw.
async fn tls_server(dir: &std::path::Path) -> (SocketAddr, std::path::PathBuf, Seen) {
    use hyper::service::service_fn;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
    let ca_file = dir.join("internal-ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let server_seen = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = server_seen.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        seen.0.lock().unwrap().push((
                            req.uri().path().to_string(),
                            req.headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_string()),
                        ));
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(
                                b"{\"over\":\"tls\"}",
                            )),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, ca_file, seen)
}

/// HTTPS: a server whose certificate no trusted CA signed is refused; with
/// the operator's internal CA in `[policy] http_ca_files` the request goes
/// through, the credential inside TLS; a CA file that is not one stops the
/// host with its name.
#[tokio::test]
async fn https_trusts_the_public_roots_and_the_operators_internal_ca() {
    let scene = Scene::new();
    let (addr, ca_file, seen) = tls_server(&scene.outside()).await;
    let o = format!("https://127.0.0.1:{}", addr.port());
    let (_host, plugin) = load(&scene, &[&o], policy(&[&o], Some(&o))).await;
    let (out, http) = fetch(&plugin, json!({"url": format!("{o}/tls")})).await;
    let error = out["answer"]["error"].as_str().unwrap_or_default();
    assert!(!error.is_empty(), "an unknown issuer must fail: {out}");
    assert!(
        http[0]
            .refused
            .as_deref()
            .unwrap_or_default()
            .contains("TLS"),
        "{http:?}"
    );
    assert!(seen.all().is_empty());

    let mut with_ca = policy(&[&o], Some(&o));
    with_ca.http_ca_files = vec![ca_file.clone()];
    let (_host, plugin) = load(&scene, &[&o], with_ca).await;
    let (out, _) = fetch(&plugin, json!({"url": format!("{o}/tls")})).await;
    assert_eq!(out["answer"]["status"], 200, "{out}");
    assert_eq!(
        seen.all(),
        [("/tls".to_string(), Some(format!("Bearer {SECRET}")))]
    );

    // By name, with the name checked against the certificate (private: the
    // name resolves to loopback).
    let by_name = format!("https://localhost:{}", addr.port());
    let grant: PluginGrant = toml::from_str(&format!(
        "http = [{{ origin = \"{by_name}\", private = true }}]"
    ))
    .unwrap();
    let mut p = Policy {
        http_ca_files: vec![ca_file.clone()],
        ..Policy::default()
    };
    p.plugins.insert("http-tool".into(), grant);
    let (_host, plugin) = load(&scene, &[&by_name], p).await;
    let (out, _) = fetch(&plugin, json!({"url": format!("{by_name}/tls")})).await;
    assert_eq!(out["answer"]["status"], 200, "{out}");

    let not_a_ca = scene.outside().join("not-a-ca.pem");
    std::fs::write(&not_a_ca, "hello").unwrap();
    let mut config = sandcrab::plugin::PluginHostConfig::new(scene.workspace());
    config.policy.http_ca_files = vec![not_a_ca];
    let err = PluginHost::new(config)
        .err()
        .expect("a bad CA file stops the host")
        .to_string();
    assert!(
        err.contains("not-a-ca.pem") && err.contains("no certificate"),
        "{err}"
    );
}

/// `sandcrab ARGS --workspace W` as the operator runs it: the tracker's
/// token (and `env`) in sandcrab's environment; run off the runtime so the
/// test's servers keep answering.
fn with_token(
    scene: &Scene,
    args: &[&str],
    env: &[(&str, &str)],
) -> impl std::future::Future<Output = std::process::Output> + use<> {
    let mut cmd = sandcrab_cmd(scene);
    cmd.args(args)
        .arg("--workspace")
        .arg(scene.workspace())
        .env("TRACKER_TOKEN", SECRET)
        .envs(env.iter().copied());
    let run = tokio::task::spawn_blocking(move || cmd.output().unwrap());
    async move { run.await.unwrap() }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
