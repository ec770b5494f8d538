//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sandcrab::plugin::SandboxMode;
use sandcrab::plugin::manifest::Limits;
use sandcrab::plugin::policy::PluginGrant;
use sandcrab::plugin::{
    LoadedPlugin, PluginHost, PluginHostConfig, PluginSource, Policy, PolicyMode, ToolCallContext,
    ToolCallError,
};
use sandcrab::process::support as sandbox_support;
use sandcrab_bundled_plugins::Artifact;
use serde_json::Value;

/// A built plugin, by its path under `plugins/`.
pub fn artifact(name: &str) -> &'static Artifact {
    sandcrab_bundled_plugins::artifact(name).unwrap_or_else(|| panic!("no built plugin {name}"))
}

/// A component cache shared by the tests (so each component compiles once).
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// Copy a built plugin into `parent/<dir_name>` as a user would install
/// it: its `plugin.toml` (passed through `edit`) beside its `.wasm`.
pub fn install_plugin(
    parent: &Path,
    artifact_name: &str,
    dir_name: &str,
    edit: impl FnOnce(String) -> String,
) -> PathBuf {
    let a = artifact(artifact_name);
    let dir = parent.join(dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(a.source_dir).join("plugin.toml")).unwrap();
    std::fs::write(dir.join("plugin.toml"), edit(manifest)).unwrap();
    let wasm = Path::new(a.wasm_path);
    std::fs::copy(wasm, dir.join(wasm.file_name().unwrap())).unwrap();
    dir
}

thread_local! {
    /// The test on this thread runs the built-in plugins compiled by the
    /// host instead of from the code embedded in the binary.
    static COMPILED_CODE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `test` (a `#[tokio::test]`, which builds its runtime on this
/// thread) with the built-in plugins compiled by the host rather than
/// taken from the binary: both paths must behave the same.
pub fn with_compiled_code(test: fn()) {
    COMPILED_CODE.set(true);
    test();
}

/// A temp workspace and a scratch area outside it.
pub struct Scene {
    pub root: tempfile::TempDir,
}

impl Scene {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("workspace")).unwrap();
        std::fs::create_dir_all(root.path().join("outside")).unwrap();
        std::fs::create_dir_all(root.path().join("plugins")).unwrap();
        Scene { root }
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("workspace").canonicalize().unwrap()
    }

    pub fn outside(&self) -> PathBuf {
        self.root.path().join("outside").canonicalize().unwrap()
    }

    pub fn plugins(&self) -> PathBuf {
        self.root.path().join("plugins")
    }

    /// A plugin host for this workspace with `policy` (shared cache).
    pub fn host(&self, policy: Policy) -> PluginHost {
        self.host_sharded(policy, sandcrab::plugin::default_max_shards())
    }

    /// A host whose shardable tool calls use at most `max_shards` shards.
    pub fn host_sharded(&self, policy: Policy, max_shards: usize) -> PluginHost {
        let mut config = PluginHostConfig::new(self.workspace());
        config.policy = policy;
        config.cache_dir = Some(cache_dir());
        config.max_shards = max_shards;
        config.embedded_code = !COMPILED_CODE.get();
        PluginHost::new(config).unwrap()
    }

    /// Install the hostile fixture and load it under `policy` (pinned to
    /// its digest in locked mode, which loads only pinned third-party code).
    pub async fn hostile(&self, policy: Policy) -> (PluginHost, std::sync::Arc<LoadedPlugin>) {
        self.hostile_sharded(policy, sandcrab::plugin::default_max_shards())
            .await
    }

    /// The hostile fixture in a host using at most `max_shards` shards.
    pub async fn hostile_sharded(
        &self,
        mut policy: Policy,
        max_shards: usize,
    ) -> (PluginHost, std::sync::Arc<LoadedPlugin>) {
        let dir = install_plugin(
            &self.plugins(),
            "test-fixtures/hostile-tool",
            "hostile",
            |m| m,
        );
        if policy.mode == PolicyMode::Locked {
            let wasm = std::fs::read(dir.join("hostile_tool.wasm")).unwrap();
            let grant = policy.plugins.entry("hostile-tool".into()).or_default();
            grant
                .sha256
                .get_or_insert(sandcrab::plugin::integrity::sha256_hex(&wasm));
        }
        let mut host = self.host_sharded(policy, max_shards);
        let plugin = host.load(&PluginSource::Dir(dir)).await.unwrap();
        (host, plugin)
    }
}

/// A policy granting `grant` to the plugin `name`.
pub fn grant(name: &str, grant: PluginGrant) -> Policy {
    let mut policy = Policy::default();
    policy.plugins.insert(name.to_string(), grant);
    policy
}

/// A policy granting the plugin `name` nothing but `limits`.
pub fn with_limits(name: &str, limits: Limits) -> Policy {
    grant(
        name,
        PluginGrant {
            limits,
            ..PluginGrant::default()
        },
    )
}

/// Call `tool` of `plugin` with JSON `args`.
pub async fn call(plugin: &LoadedPlugin, tool: &str, args: Value) -> Result<String, ToolCallError> {
    let ctx = ToolCallContext {
        session_id: "test-session".into(),
        call_id: "call-1".into(),
        working_dir: None,
        detach: None,
        programs: None,
        background: false,
        network: false,
    };
    plugin
        .call_tool(tool, &args.to_string(), &ctx, None)
        .await
        .map(|o| o.text)
}

/// The plugin still answers after whatever happened before.
pub async fn assert_still_works(plugin: &LoadedPlugin) {
    let out = call(plugin, "echo", serde_json::json!({"text": "still here"})).await;
    assert_eq!(out.unwrap(), "still here");
}

/// The bundled coding-tools plugin on `scene`'s workspace, as a registry.
pub async fn coding_tools(
    scene: &Scene,
    policy: Policy,
) -> (PluginHost, sandcrab::tools::ToolRegistry) {
    coding_tools_sharded(scene, policy, sandcrab::plugin::default_max_shards()).await
}

/// The coding tools in a host using at most `max_shards` shards per call.
pub async fn coding_tools_sharded(
    scene: &Scene,
    policy: Policy,
    max_shards: usize,
) -> (PluginHost, sandcrab::tools::ToolRegistry) {
    let mut host = scene.host_sharded(policy, max_shards);
    let source = sandcrab::plugin::discovery::bundled()
        .into_iter()
        .find(|s| matches!(s, PluginSource::Bundled(b) if b.name == "coding-tools"))
        .expect("coding-tools is bundled");
    let plugin = host.load(&source).await.unwrap();
    assert_eq!(
        plugin.cache == sandcrab::plugin::CacheOutcome::Embedded,
        !COMPILED_CODE.get(),
        "coding-tools ran from the wrong code path ({:?})",
        plugin.cache
    );
    let registry = sandcrab::tools::ToolRegistry::from_plugins(host.plugins());
    (host, registry)
}

/// Dispatch `tool` with `args` through `registry`.
pub async fn run_tool(
    registry: &sandcrab::tools::ToolRegistry,
    tool: &str,
    args: Value,
) -> sandcrab::tools::ToolOutcome {
    let call = sandcrab::tools::ToolCallRequest {
        id: "call-1".into(),
        name: tool.into(),
        arguments: args,
    };
    let ctx = sandcrab::tools::ToolContext {
        session_id: "test".into(),
        call_id: "call-1".into(),
        ..Default::default()
    };
    sandcrab::tools::dispatch(registry, &call, &ctx).await
}

/// A top-level session on `scene`'s workspace with the bundled plugins,
/// the profile `profile_id` and its tools, answering with `client`.
pub async fn plugin_session(
    scene: &Scene,
    profile_id: &str,
    client: std::sync::Arc<dyn sandcrab::llm::LlmClient>,
) -> (PluginHost, std::sync::Arc<sandcrab::agent::Session>) {
    use sandcrab::agent::{Profile, Session, SessionConfig, SessionParts};
    let mut host = scene.host(Policy::default());
    host.load_all(&sandcrab::plugin::discovery::bundled()).await;
    let tools = sandcrab::tools::ToolRegistry::from_plugins(host.plugins());
    let profile = std::sync::Arc::new(Profile::load(&host, profile_id).await.unwrap());
    let session = Session::new(SessionParts::new(
        client,
        profile.clone(),
        profile.tools(&tools).into(),
        SessionConfig::new("m"),
        scene.workspace(),
    ));
    (host, session)
}

/// Whether a process with exactly this command line is running.
pub fn process_running(cmdline: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " ").trim() == cmdline)
            .unwrap_or(false)
    })
}

/// Wait (up to 3 s) until no process has this command line; false if one
/// still does. A killed process takes a moment to disappear from /proc.
pub fn gone_soon(cmdline: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while process_running(cmdline) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// The `sandcrab` binary with this scene's own user directories (config,
/// cache, data), no provider keys or base URLs from the caller's
/// environment, and default log output.
pub fn sandcrab_cmd(scene: &Scene) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sandcrab"));
    cmd.env(
        "XDG_CACHE_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache"),
    )
    .env("XDG_CONFIG_HOME", scene.root.path().join("config"))
    .env("XDG_DATA_HOME", scene.root.path().join("data"))
    .env_remove("RUST_LOG");
    for kind in sandcrab::llm::ProviderKind::ALL {
        for var in kind.key_vars() {
            cmd.env_remove(var);
        }
        cmd.env_remove(kind.base_url_var());
    }
    cmd
}

impl Scene {
    /// The user's (trusted) configuration file for binary runs.
    pub fn user_config(&self) -> PathBuf {
        self.root.path().join("config/sandcrab/config.toml")
    }

    /// Write the user's configuration file.
    pub fn write_user_config(&self, text: &str) {
        let path = self.user_config();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Set to skip the confinement tests knowingly on a kernel that cannot
/// confine (they fail otherwise: a machine that cannot confine must not
/// report green).
pub const ALLOW_NO_SANDBOX: &str = "SANDCRAB_TESTS_ALLOW_NO_SANDBOX";

/// Whether this kernel can enforce every mode, so a confinement test can
/// run. When it cannot, the test fails, naming what is missing, unless
/// [`ALLOW_NO_SANDBOX`] is set; then it says what it skips.
pub fn confinable() -> bool {
    let missing = sandbox_support().missing(SandboxMode::Locked, false);
    if missing.is_empty() {
        return true;
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    if std::env::var_os(ALLOW_NO_SANDBOX).is_some() {
        eprintln!(
            "SKIPPED {test}: this kernel cannot confine programs (missing: {}); {ALLOW_NO_SANDBOX} is set",
            missing.join(", ")
        );
        return false;
    }
    panic!(
        "{test}: this kernel cannot confine programs (missing: {}), so the confinement test cannot prove anything; run it where Landlock and user namespaces are available, or set {ALLOW_NO_SANDBOX}=1 to skip it knowingly",
        missing.join(", ")
    );
}

/// The id of the most recent saved session of any workspace (the first
/// word of `sandcrab sessions list --all`).
pub fn latest_session_id(scene: &Scene) -> String {
    let list = sandcrab_cmd(scene)
        .args(["sessions", "list", "--all"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&list.stdout)
        .split_whitespace()
        .next()
        .expect("a saved session")
        .to_string()
}

/// A receipt's approval entry in words, as `sandcrab` renders it (the
/// entry itself is a record: decision, what decided, the answer).
pub fn approval_line(entry: &serde_json::Value) -> String {
    serde_json::from_value::<sandcrab::approvals::Approval>(entry.clone())
        .unwrap_or_else(|e| panic!("not an approval entry ({e}): {entry}"))
        .line()
}

/// Wait until `done` holds, polling, for at most `limit`: the test fails
/// naming `what` when it never does.
pub async fn eventually(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Whether `needle` occurs in `haystack` (a file's or a request's bytes).
pub fn bytes_contain(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Run `cmd` with `input` on its stdin and wait for it. The input goes in
/// from a thread (the child's output fills its pipes while it is still
/// going in); a child that ended early takes no more, and what it said
/// before is what the caller reads.
pub fn with_stdin(mut cmd: std::process::Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}
