//! What the host keeps stays the host's (issue #43), attacked through the
//! binary as a prompt-injected model would: its file tools and its shell
//! in a workspace that holds the host's own files (the workspace is the
//! home directory, a common way to start an agent).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{Scene, install_plugin};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A home directory that is also the workspace: sandcrab's own folders
/// (configuration, data, cache) are inside it, where the model's tools
/// reach.
pub(crate) struct HomeWorkspace {
    pub scene: Scene,
    /// An agent's socket in the home (as ssh-agent's), which
    /// `$SSH_AUTH_SOCK` names for every command.
    _agent: std::os::unix::net::UnixListener,
}

impl HomeWorkspace {
    pub fn new() -> Self {
        let scene = Scene::new();
        let agent =
            std::os::unix::net::UnixListener::bind(scene.workspace().join(".agent.sock")).unwrap();
        HomeWorkspace {
            scene,
            _agent: agent,
        }
    }

    pub fn home(&self) -> PathBuf {
        self.scene.workspace()
    }

    /// `sandcrab ARGS` with this home (every XDG folder beneath it) and
    /// this workspace.
    pub fn sandcrab(&self, args: &[&str]) -> Command {
        let home = self.home();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandcrab"));
        cmd.env("HOME", &home)
            .env("SSH_AUTH_SOCK", home.join(".agent.sock"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("RUST_LOG");
        for kind in sandcrab::llm::ProviderKind::ALL {
            for var in kind.key_vars() {
                cmd.env_remove(var);
            }
        }
        cmd.args(args).arg("-w").arg(&home);
        cmd
    }

    /// `tool call NAME --args ARGS` in the home workspace, with `extra`
    /// options before the workspace.
    pub fn tool(&self, name: &str, args: Value, extra: &[&str]) -> Output {
        let args = args.to_string();
        let mut all = vec!["tool", "call", name, "--args", &args];
        all.extend_from_slice(extra);
        self.sandcrab(&all).output().unwrap()
    }

    /// What the model's shell prints for `command`.
    pub fn shell(&self, command: &str) -> String {
        let out = self.tool("shell", json!({ "command": command }), &[]);
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    }

    pub fn write(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.home().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }
}

/// The file tools and the shell read none of the host's secrets, even
/// when the workspace holds them; what is not kept, they read (control).
#[test]
fn the_models_tools_read_no_host_secret_inside_the_workspace() {
    if !crate::support::confinable() {
        return;
    }
    let home = HomeWorkspace::new();
    home.write(".config/sandcrab/tokens/serve.token", "TOKEN-CANARY-7731");
    home.write(".ssh/id_rsa", "SSH-CANARY-7731");
    home.write(".aws/credentials", "AWS-CANARY-7731");
    home.write("notes.txt", "CONTROL-CANARY-7731");
    // The first start makes the cache's key.
    let first = home.tool("read_file", json!({"file_path": "notes.txt"}), &[]);
    assert!(text(&first.stdout).contains("CONTROL-CANARY-7731"));

    for secret in [
        ".config/sandcrab/tokens/serve.token",
        ".ssh/id_rsa",
        ".aws/credentials",
        ".cache/sandcrab/components.key",
    ] {
        assert!(
            home.home().join(secret).exists(),
            "{secret} is there to be read"
        );
        let out = home.tool("read_file", json!({ "file_path": secret }), &[]);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "read_file {secret}: {said}");
        assert!(!said.contains("CANARY"), "read_file {secret}: {said}");
        assert!(said.contains("protected"), "the model is told why: {said}");
    }
    // A search of the whole workspace finds the control, not the secrets.
    let out = home.tool("grep", json!({"pattern": "CANARY-7731"}), &[]);
    let said = text(&out.stdout);
    assert!(said.contains("notes.txt"), "the control is found: {said}");
    for leaked in ["TOKEN-CANARY", "SSH-CANARY", "AWS-CANARY"] {
        assert!(!said.contains(leaked), "grep found {leaked}: {said}");
    }
    // Nor through a link the model makes to them.
    let out = home.tool(
        "shell",
        json!({"command": "ln -s .ssh/id_rsa innocent.txt; echo linked"}),
        &[],
    );
    assert!(text(&out.stdout).contains("linked"));
    let out = home.tool("read_file", json!({"file_path": "innocent.txt"}), &[]);
    assert!(!text(&out.stdout).contains("SSH-CANARY"));
    // The shell reads the control and none of the secrets.
    let said = home.shell(
        "cat notes.txt; cat .config/sandcrab/tokens/serve.token .ssh/id_rsa .aws/credentials; od -An -tx1 .cache/sandcrab/components.key | head -c 200",
    );
    assert!(said.contains("CONTROL-CANARY-7731"), "{said}");
    for leaked in ["TOKEN-CANARY", "SSH-CANARY", "AWS-CANARY"] {
        assert!(!said.contains(leaked), "the shell read {leaked}: {said}");
    }
    let key = std::fs::read(home.home().join(".cache/sandcrab/components.key")).unwrap();
    let hex: String = key[..4].iter().map(|b| format!(" {b:02x}")).collect();
    assert!(!said.contains(&hex), "the shell read the cache key: {said}");
    // Moving the folder that holds the configuration away, to make a new
    // one in its place, fails too.
    let said = home.shell(
        "mv .config .config.old; mkdir -p .config/sandcrab && echo 'provider = \"evil\"' > .config/sandcrab/config.toml; echo done",
    );
    assert!(said.contains("done"), "{said}");
    assert!(!home.home().join(".config.old").exists(), "{said}");
    assert!(!home.home().join(".config/sandcrab/config.toml").exists());
    assert_eq!(
        std::fs::read_to_string(home.home().join(".config/sandcrab/tokens/serve.token")).unwrap(),
        "TOKEN-CANARY-7731"
    );
}

/// The model cannot make the host run native code of its choosing: the
/// cache is not the model's to write, its key is not the model's to read,
/// and an entry swapped in anyway is compiled again, never run.
#[test]
fn cached_native_code_cannot_be_forged_or_swapped() {
    if !crate::support::confinable() {
        return;
    }
    let home = HomeWorkspace::new();
    let hello = install_plugin(&home.scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let hostile = install_plugin(
        &home.scene.plugins(),
        "test-fixtures/hostile-tool",
        "hostile",
        |m| m,
    );
    let plugins = [
        "--plugins",
        hello.to_str().unwrap(),
        "--plugins",
        hostile.to_str().unwrap(),
    ];
    let greet = |home: &HomeWorkspace| home.tool("hello", json!({"name": "x"}), &plugins);
    let out = greet(&home);
    assert_eq!(
        text(&out.stdout).trim(),
        "Hello, x!",
        "{}",
        text(&out.stderr)
    );
    let cache = home.home().join(".cache/sandcrab/components");
    let entry_of = |wasm: &Path| {
        let hash = blake3::hash(&std::fs::read(wasm).unwrap()).to_hex();
        std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|x| x == "cwasm")
                    && p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(&hash[..32])
            })
            .unwrap_or_else(|| panic!("no cache entry for {}", wasm.display()))
    };
    let hello_entry = entry_of(&hello.join("hello_tool.wasm"));
    let hostile_entry = entry_of(&hostile.join("hostile_tool.wasm"));
    let before = std::fs::read(&hello_entry).unwrap();
    let relative = |p: &Path| p.strip_prefix(home.home()).unwrap().display().to_string();

    // The model's shell swaps the entries; its file tools write one.
    let said = home.shell(&format!(
        "cp {} {}; echo tried",
        relative(&hostile_entry),
        relative(&hello_entry)
    ));
    assert!(said.contains("tried"), "{said}");
    let out = home.tool(
        "write_file",
        json!({"file_path": relative(&hello_entry), "content": "planted"}),
        &[],
    );
    assert!(!out.status.success());
    assert_eq!(std::fs::read(&hello_entry).unwrap(), before, "{said}");

    // Swapped by someone who could write the cache (a restored backup, a
    // copied home): the MAC names the component, so it is compiled again
    // with a note, and the plugin runs its own code.
    std::fs::copy(&hostile_entry, &hello_entry).unwrap();
    let out = greet(&home);
    assert_eq!(
        text(&out.stdout).trim(),
        "Hello, x!",
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("did not verify"),
        "the operator hears: {}",
        text(&out.stderr)
    );
    assert_ne!(
        std::fs::read(&hello_entry).unwrap(),
        std::fs::read(&hostile_entry).unwrap(),
        "the entry was written again"
    );
}

/// A session file's id is a name from outside: imported, it gets an id of
/// this host's, and a planted checkpoint folder named like a path is never
/// read (the reproduction: an id that leads into the workspace, where a
/// manifest puts back `.git/hooks/pre-commit`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_sessions_id_never_becomes_a_path() {
    // A real session, exported on the attacker's machine.
    let theirs = Scene::new();
    let id = crate::sessions_test::one_run(&theirs, "a session", "echo one").await;
    let export = crate::support::sandcrab_cmd(&theirs)
        .args(["sessions", "export", &id, "-w"])
        .arg(theirs.workspace())
        .output()
        .unwrap();
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(export.status.success(), "{}", text(&export.stderr));
    // The attacker's copy: its id is a path into the workspace, where the
    // repository ships a checkpoint manifest for a git hook.
    let evil_id = ws.join(".cp").display().to_string();
    let file_text = text(&export.stdout).replace(&id, &evil_id);
    std::fs::create_dir_all(ws.join(".cp/1")).unwrap();
    std::fs::write(
        ws.join(".cp/1/manifest.json"),
        r#"[{"path":".git/hooks/pre-commit","blob":"1","mode":493}]"#,
    )
    .unwrap();
    std::fs::write(ws.join(".cp/1/1"), "#!/bin/sh\ntouch PWNED\n").unwrap();
    let file = scene.root.path().join("evil.jsonl");
    std::fs::write(&file, &file_text).unwrap();

    let imported = crate::support::sandcrab_cmd(&scene)
        .args(["sessions", "import"])
        .arg(&file)
        .arg("-w")
        .arg(&ws)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&imported.stdout), text(&imported.stderr));
    assert!(imported.status.success(), "{said}");
    let local = crate::cli_support::imported_id(&said);
    assert!(sandcrab::store::is_session_id(&local), "{local}");
    // The file's id names no session here.
    let listed = crate::support::sandcrab_cmd(&scene)
        .args(["sessions", "show", &evil_id, "-w"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(!listed.status.success());
    // Resumed by its id here and undone: the planted manifest is not read.
    let server = crate::mock_llm::MockLlm::strict(sandcrab::llm::ProviderKind::Anthropic).await;
    let resume = format!("/resume {local}");
    let out = crate::cli_support::chat(
        &scene,
        sandcrab::llm::ProviderKind::Anthropic,
        &server,
        &[&resume, "/undo"],
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!ws.join(".git/hooks/pre-commit").exists(), "{said}");
    assert!(said.contains("nothing to undo"), "{said}");
}

/// The registry of what the host keeps, walked: every kind of entry is
/// named by some configuration (a new kind without one fails here), and
/// every entry the binary lists is kept from a real program, from the file
/// tools and from the host's own writer (`/undo` of a planted checkpoint),
/// as its kind says. What the host does not keep, each of them reaches
/// (controls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kept_entry_is_kept_from_programs_tools_and_host_writers() {
    if !crate::support::confinable() {
        return;
    }
    let home = HomeWorkspace::new();
    let h = home.home();
    let h = h.display();
    home.write(
        ".config/sandcrab/config.toml",
        &format!(
            r#"cache_dir = "{h}/mycache"
plugin_dirs = ["{h}/myplugins"]
[store]
path = "{h}/db/store.db"
password_file = "{h}/pg.pass"
ca_file = "{h}/ca.pem"
[approvals]
rules_file = "{h}/rules.toml"
[policy]
kept_paths = ["~/secret-notes"]
http_ca_files = ["{h}/ca.pem"]
"#
        ),
    );
    // A real certificate authority (the canary outside its PEM block) and
    // a rules file that parses (the canary in a comment).
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    home.write(
        "ca.pem",
        &format!("KEPT-CANARY\n{}", ca.self_signed(&ca_key).unwrap().pem()),
    );
    home.write("rules.toml", "# KEPT-CANARY\n");
    for file in [
        ".bashrc",
        ".gitconfig",
        "pg.pass",
        "secret-notes/plan.txt",
        "myplugins/README",
        ".ssh/id_rsa",
        ".config/sandcrab/tokens/serve.token",
        "db/placeholder",
    ] {
        home.write(file, "KEPT-CANARY\n");
    }
    home.write("free.txt", "FREE-CANARY\n");
    // A first session: it makes the data folder, the store, the cache and
    // its key, and a session whose checkpoints `/undo` reads.
    let server = crate::mock_llm::MockLlm::strict(sandcrab::llm::ProviderKind::Anthropic).await;
    server.push(crate::llm_transcripts::stream(
        sandcrab::llm::ProviderKind::Anthropic,
        &crate::llm_transcripts::Answer::Tools(vec![crate::llm_transcripts::tool(
            "w1",
            "write_file",
            json!({"file_path": "free.txt", "content": "FREE-CANARY\nchanged\n"}),
        )]),
    ));
    server.push(crate::llm_transcripts::stream(
        sandcrab::llm::ProviderKind::Anthropic,
        &crate::llm_transcripts::Answer::Text(vec!["done"]),
    ));
    let url = server.base_url();
    let run = home
        .sandcrab(&[
            "run",
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--base-url",
            &url,
        ])
        .env("ANTHROPIC_API_KEY", "sk-test")
        .arg("change free.txt")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));

    let listed = home
        .sandcrab(&["sandbox", "kept", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let entries = listed["entries"].as_array().unwrap().clone();
    for item in sandcrab::kept::Item::ALL {
        let name = serde_json::to_value(item).unwrap();
        assert!(
            entries.iter().any(|e| e["item"] == name),
            "nothing in this configuration is kept as {name}: {entries:#?}"
        );
    }

    // Each entry inside the workspace, with a canary where it can hold one.
    let mut targets: Vec<(PathBuf, bool, String)> = Vec::new();
    let mut host_owned = Vec::new();
    for entry in &entries {
        let path = PathBuf::from(entry["path"].as_str().unwrap());
        let Ok(relative) = path.strip_prefix(home.home()) else {
            continue;
        };
        let secret = entry["kind"] == "secret";
        let file = if path.is_dir() {
            let canary = path.join("canary.txt");
            std::fs::write(&canary, "KEPT-CANARY\n").unwrap();
            relative.join("canary.txt")
        } else if path.is_file() {
            relative.to_path_buf()
        } else {
            continue;
        };
        if entry["item"] == "session-database" {
            // The host itself writes it as it runs: compared by what
            // `/undo` says, not by its bytes.
            host_owned.push(file.display().to_string());
        }
        targets.push((home.home().join(&file), secret, file.display().to_string()));
    }
    assert!(targets.len() >= 12, "{targets:#?}");
    let before: Vec<Vec<u8>> = targets
        .iter()
        .map(|(p, _, _)| std::fs::read(p).unwrap())
        .collect();

    // 1. A real program: reads what is not secret, writes nothing kept.
    let mut script = String::from("cat free.txt; ");
    for (_, _, rel) in &targets {
        script.push_str(&format!(
            "echo \"== {rel}\"; cat '{rel}'; echo PWNED >> '{rel}'; "
        ));
    }
    script.push_str("echo PWNED >> free.txt; echo end");
    let said = home.shell(&script);
    assert!(
        said.contains("FREE-CANARY") && said.contains("end"),
        "{said}"
    );
    for (_, secret, rel) in &targets {
        let shown = said
            .split(&format!("== {rel}\n"))
            .nth(1)
            .unwrap_or("")
            .split("== ")
            .next()
            .unwrap_or("");
        assert_eq!(
            shown.contains("KEPT-CANARY"),
            !secret,
            "the program {} {rel}: {shown}",
            if *secret {
                "read the secret"
            } else {
                "could not read the root"
            }
        );
    }
    assert!(
        std::fs::read_to_string(home.home().join("free.txt"))
            .unwrap()
            .contains("PWNED"),
        "control: the program writes what is not kept"
    );

    // 2. The file tools.
    for (_, secret, rel) in &targets {
        let out = home.tool("read_file", json!({ "file_path": rel }), &[]);
        assert_eq!(
            text(&out.stdout).contains("KEPT-CANARY"),
            !secret,
            "read_file {rel}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let out = home.tool(
            "write_file",
            json!({ "file_path": rel, "content": "PWNED" }),
            &[],
        );
        assert!(!out.status.success(), "write_file {rel}");
        assert!(
            text(&out.stderr).contains("protected"),
            "{}",
            text(&out.stderr)
        );
    }

    // 3. The host's own writer: `/undo` of a checkpoint planted for every
    // entry (as a store another program wrote would hold).
    let listed = home.sandcrab(&["sessions", "list"]).output().unwrap();
    let session = text(&listed.stdout)
        .split_whitespace()
        .next()
        .expect("the run's session")
        .to_string();
    let checkpoints = home
        .home()
        .join(".local/share/sandcrab/checkpoints")
        .join(&session);
    let last = std::fs::read_dir(&checkpoints)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("the run kept a checkpoint");
    let planted = checkpoints.join((last + 1).to_string());
    std::fs::create_dir_all(&planted).unwrap();
    let mut manifest = vec![json!({"path": "free.txt", "blob": "1", "mode": 420})];
    std::fs::write(planted.join("1"), "FREE-RESTORED\n").unwrap();
    for (n, (_, _, rel)) in targets.iter().enumerate() {
        let blob = (n + 2).to_string();
        std::fs::write(planted.join(&blob), "PWNED").unwrap();
        manifest.push(json!({"path": rel, "blob": blob, "mode": 493}));
    }
    std::fs::write(
        planted.join("manifest.json"),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    let chat = home
        .sandcrab(&[
            "chat",
            "--json",
            "--approvals",
            "never",
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--base-url",
            &url,
        ])
        .env("ANTHROPIC_API_KEY", "sk-test")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut chat = chat;
    {
        use std::io::Write;
        let mut stdin = chat.stdin.take().unwrap();
        writeln!(stdin, "/resume {session}").unwrap();
        writeln!(stdin, "/undo force").unwrap();
    }
    let out = chat.wait_with_output().unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(home.home().join("free.txt")).unwrap(),
        "FREE-RESTORED\n",
        "control: /undo restores what is not kept: {said}"
    );
    for ((path, _, rel), was) in targets.iter().zip(&before) {
        if host_owned.contains(rel) {
            let refused = said
                .lines()
                .any(|l| l.contains(rel.as_str()) && l.contains("protected"));
            assert!(refused, "/undo did not refuse {rel}: {said}");
            continue;
        }
        assert_eq!(
            &std::fs::read(path).unwrap(),
            was,
            "{rel} was changed (by the program, a tool or /undo): {said}"
        );
    }
}

/// `tool call NAME` with `args` in `scene`'s workspace.
fn tool_in(scene: &Scene, name: &str, args: Value) -> Output {
    crate::support::sandcrab_cmd(scene)
        .args([
            "tool",
            "call",
            name,
            "--args",
            &args.to_string(),
            "--workspace",
        ])
        .arg(scene.workspace())
        .output()
        .unwrap()
}

/// The user's own `git status` in `dir`, unconfined, as they would run it.
fn users_git_status(dir: &Path) {
    let _ = Command::new("git")
        .args(["status", "--short"])
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_COUNT")
        .output()
        .expect("git is installed");
}

/// Reproduction 2: a `.git` file planted by the model sends the user's next
/// `git status` to a configuration whose file-system monitor is the
/// model's program. The file tools refuse to make it; a program that makes
/// it has it taken out when it ends; a `git init` stays; and a git the
/// model runs itself never runs the workspace's monitor.
#[test]
fn a_planted_git_file_never_runs_the_models_program_at_the_users_next_git() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let ws = scene.workspace();
    let marker = scene.outside().join("pwned");
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    // The model's writes: a git folder under another name (git finds one
    // as a bare repository) is refused at the piece that would complete
    // its layout; the `.git` that would point git at it is refused, at the
    // root and deeper.
    for (path, content) in [
        (".gitdata/config", config.as_str()),
        (".gitdata/HEAD", "ref: refs/heads/main\n"),
        (".gitdata/objects/.keep", ""),
    ] {
        let out = tool_in(
            &scene,
            "write_file",
            json!({"file_path": path, "content": content}),
        );
        assert!(out.status.success(), "{path}: {}", text(&out.stderr));
    }
    let out = tool_in(
        &scene,
        "write_file",
        json!({"file_path": ".gitdata/refs/heads/.keep", "content": ""}),
    );
    assert!(!out.status.success(), "the layout was completed");
    // Made by hand (as the repository might ship it), for what follows.
    std::fs::create_dir_all(ws.join(".gitdata/refs/heads")).unwrap();
    for path in [".git", "sub/.git", "sub/.git/config", ".gitdata/../.git"] {
        let out = tool_in(
            &scene,
            "write_file",
            json!({"file_path": path, "content": "gitdir: .gitdata\n"}),
        );
        assert!(!out.status.success(), "{path} was written");
        assert!(
            text(&out.stderr).contains("protected"),
            "{}",
            text(&out.stderr)
        );
    }
    assert!(!ws.join(".git").exists() && !ws.join("sub/.git").exists());

    // The model's shell makes it anyway: taken out when the program ends,
    // and the model is told.
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "printf 'gitdir: .gitdata\\n' > .git && git init -q inited && echo made"}),
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("made"), "{said}");
    assert!(said.contains("taken out of the workspace"), "{said}");
    assert!(!ws.join(".git").exists(), "{said}");
    assert!(
        ws.join("inited/.git/HEAD").exists(),
        "a git init stays: {said}"
    );

    users_git_status(&ws);
    assert!(!marker.exists(), "the user's git ran the model's program");

    // A repository deeper down, away from where the program starts: its
    // hooks and configuration are as read-only as the root's.
    let nested = ws.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&nested)
            .status()
            .unwrap()
            .success()
    );
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "echo '#!/bin/sh' > vendor/lib/.git/hooks/pre-commit; printf '[core]\\n\\tfsmonitor = x\\n' >> vendor/lib/.git/config; mv vendor/lib/.git vendor/lib/.git-moved; echo tried"}),
    );
    assert!(text(&out.stdout).contains("tried"), "{}", text(&out.stderr));
    assert!(!nested.join(".git/hooks/pre-commit").exists());
    assert!(nested.join(".git").is_dir() && !nested.join(".git-moved").exists());
    assert!(
        !std::fs::read_to_string(nested.join(".git/config"))
            .unwrap()
            .contains("fsmonitor")
    );

    // A git the model runs in a repository the workspace configured (here
    // planted by hand) runs none of its programs either.
    std::fs::write(ws.join(".git"), "gitdir: .gitdata\n").unwrap();
    let inside = ws.join("pwned-by-the-models-git");
    std::fs::write(
        ws.join(".gitdata/config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch {}; false\"\n",
            inside.display()
        ),
    )
    .unwrap();
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "git status --short; echo ran"}),
    );
    assert!(text(&out.stdout).contains("ran"), "{}", text(&out.stderr));
    assert!(
        !inside.exists(),
        "the model's git ran the workspace's monitor"
    );

    // Control: the same `.git`, in place, does make the user's git run it
    // (the attack is real; only sandcrab stood in its way).
    users_git_status(&ws);
    assert!(inside.exists(), "control: git runs a configured monitor");
}

/// The model's one shell call in `run` (approvals as in `extra`): what
/// the tool answered it.
async fn models_shell(scene: &Scene, home: &Path, args: Value, extra: &[&str]) -> String {
    use crate::llm_transcripts::{Answer, stream, tool};
    use sandcrab::llm::ProviderKind;
    let kind = ProviderKind::Anthropic;
    let server = crate::mock_llm::MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool("p1", "shell", args)]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["done"])));
    let out = crate::cli_support::sandcrab(scene, kind, &server, "run")
        .env("HOME", home)
        .args(extra)
        .arg("probe")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = server.requests();
    crate::cli_support::tool_result(kind, &requests[1], "p1", "shell")
}

/// Item 6 of the issue: nine probes through the model's own shell, in the
/// default mode (workspace-write, `run`'s approvals), the way they are
/// run against every agent host. All nine are shut; the control at the
/// end shows the script ran. Then the network, which a rule can give to a
/// command: refused without it (saying how to allow it), open with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nine_probes_are_shut_in_the_default_mode() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let ws = scene.workspace();
    let home = scene.root.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "SSH-CANARY\n").unwrap();
    scene.write_user_config("# the operator's\n");
    std::fs::write(ws.join("sandcrab.toml"), "# the project's\n").unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(git.success());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let marker = format!("{}", 3000 + rand_digits() % 1000);
    let linger = format!("3{marker}.5");
    let tmp_probe = format!("/tmp/sandcrab-probe-{marker}");
    let script = format!(
        r#"grep -q SSH-CANARY {home}/.ssh/id_rsa 2>/dev/null && echo OPEN-1-ssh
echo x > {home}/probe 2>/dev/null && echo OPEN-2-home
echo x > {tmp_probe} 2>/dev/null && echo OPEN-3-tmp
python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('OPEN-4-network')" 2>/dev/null
env | grep -q sk-test-secret && echo OPEN-5-key
grep -q sk-test-secret /proc/$PPID/environ 2>/dev/null && echo OPEN-5-key-proc
sleep {linger} &
echo x >> {config} 2>/dev/null && echo OPEN-7-own-config
echo x >> sandcrab.toml 2>/dev/null && echo OPEN-8-project-config
echo '#!/bin/sh' > .git/hooks/pre-commit 2>/dev/null && echo OPEN-9-hook
echo CONTROL > control.txt && echo RAN"#,
        home = home.display(),
        config = scene.user_config().display(),
    );
    let said = models_shell(&scene, &home, json!({ "command": script }), &[]).await;
    assert!(said.contains("RAN"), "the probes ran: {said}");
    assert!(!said.contains("OPEN"), "a probe got through: {said}");
    assert!(
        std::fs::read_to_string(ws.join("control.txt"))
            .unwrap()
            .contains("CONTROL")
    );
    assert!(!home.join("probe").exists() && !Path::new(&tmp_probe).exists());
    assert_eq!(
        std::fs::read_to_string(scene.user_config()).unwrap(),
        "# the operator's\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sandcrab.toml")).unwrap(),
        "# the project's\n"
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(
        crate::support::gone_soon(&format!("sleep {linger}")),
        "probe 6: a process outlived its call"
    );

    // The network asked for, no rule gives it: refused, saying how.
    // Prints CONNECTED only when it connects (the word is not in the
    // command, which a refusal quotes).
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONN' + 'ECTED')\""
    );
    let said = models_shell(
        &scene,
        &home,
        json!({ "command": connect, "network": true }),
        &[],
    )
    .await;
    assert!(!said.contains("CONNECTED"), "{said}");
    assert!(said.contains("network"), "{said}");
    // (quoted as one shell word: the command holds single quotes)
    assert!(
        said.contains("--approve \"net:command:python3"),
        "the refusal says how: {said}"
    );
    // Not asked for: the program runs without it, and hears how to ask.
    let said = models_shell(&scene, &home, json!({ "command": connect }), &[]).await;
    assert!(!said.contains("CONNECTED"), "{said}");
    assert!(said.contains("network: true"), "{said}");
    // A rule of the operator's gives it to that command (control).
    let said = models_shell(
        &scene,
        &home,
        json!({ "command": connect, "network": true }),
        &["--approve", "net:shell:python3"],
    )
    .await;
    assert!(
        said.contains("CONNECTED"),
        "the rule gave the network: {said}"
    );
}

/// A few digits that differ from run to run.
fn rand_digits() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
}

/// A loopback listener that counts the connections a proxy would get
/// (accepts, reads a little, answers nothing useful).
fn counting_proxy() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut conn = conn;
            let mut buf = [0u8; 1024];
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(200)));
            let _ = conn.read(&mut buf);
        }
    });
    (url, count)
}

/// The key meant for a plain-http loopback server never goes to a proxy
/// the environment names (it would travel in clear text to wherever that
/// is): only to one the operator names for sandcrab (`[llm] proxy`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_never_travels_through_a_proxy_the_operator_did_not_name() {
    use crate::llm_transcripts::{Answer, stream};
    use sandcrab::llm::ProviderKind;
    let kind = ProviderKind::OpenAiCompatible;
    let scene = Scene::new();
    let (proxy, count) = counting_proxy();
    let server = crate::mock_llm::MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["direct"])));
    let mut cmd = crate::cli_support::sandcrab(&scene, kind, &server, "run");
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env(var, &proxy);
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    let out = cmd.arg("hello").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("direct"));
    assert_eq!(
        server.requests().len(),
        1,
        "the request went straight to the server"
    );
    assert_eq!(
        count.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the proxy the environment named saw a connection"
    );
    // Named by the operator for sandcrab: used (control).
    scene.write_user_config(&format!("[llm]\nproxy = \"{proxy}\"\nmax_retries = 0\n"));
    let _ = crate::cli_support::sandcrab(&scene, kind, &server, "run")
        .arg("hello")
        .output()
        .unwrap();
    assert!(
        count.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the operator's proxy was used"
    );
}

/// Programs make no Unix-domain socket in the default mode: a socket
/// reaches whatever listens on it outside every sandbox (a terminal
/// multiplexer's session, docker, the session bus), so a program could
/// have it run anything. The operator allows them (`[policy] unix_sockets
/// = true`): the same program connects (control).
#[test]
fn programs_reach_no_unix_socket_unless_the_operator_allows_them() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let path = scene.outside().join("multiplexer.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            use std::io::Write;
            let mut conn = conn;
            let _ = conn.write_all(b"ran-outside\n");
        }
    });
    let command = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}'); print(s.recv(64).decode())\"",
        path.display()
    );
    let out = tool_in(&scene, "shell", json!({ "command": command }));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!said.contains("ran-outside"), "{said}");
    assert!(said.contains("Operation not permitted"), "{said}");
    scene.write_user_config("[policy]\nunix_sockets = true\n");
    let out = tool_in(&scene, "shell", json!({ "command": command }));
    assert!(
        text(&out.stdout).contains("ran-outside"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The provider of the tests whose model starts a background job.
const BACKGROUND_KIND: sandcrab::llm::ProviderKind = sandcrab::llm::ProviderKind::Anthropic;

/// A scene and a provider whose first answer starts `command` as the
/// model's background shell job (`b1`); None where programs cannot be
/// confined (the test then proves nothing and skips).
async fn scene_with_background_job(command: &str) -> Option<(Scene, crate::mock_llm::MockLlm)> {
    use crate::llm_transcripts::{Answer, stream, tool};
    if !crate::support::confinable() {
        return None;
    }
    let server = crate::mock_llm::MockLlm::strict(BACKGROUND_KIND).await;
    server.push(stream(
        BACKGROUND_KIND,
        &Answer::Tools(vec![tool(
            "b1",
            "shell",
            json!({"command": command, "run_in_background": true}),
        )]),
    ));
    Some((Scene::new(), server))
}

/// Stopped by a signal while a background program of the model's still
/// runs (it planted a `.git` whose monitor is the model's program, and
/// waits), `sandcrab run` kills it and takes the plant out before it exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_does_not_leave_what_a_running_program_planted() {
    use crate::llm_transcripts::{Answer, stream};
    let plant = "git init -q bgx && printf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' >> bgx/.git/config && touch planted && sleep 600";
    let Some((scene, server)) = scene_with_background_job(plant).await else {
        return;
    };
    let (kind, ws) = (BACKGROUND_KIND, scene.workspace());
    server.push(stream(kind, &Answer::Text(vec!["started"])));
    let child = crate::cli_support::sandcrab(&scene, kind, &server, "run")
        .args(["--wait-jobs", "600", "plant it"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ws.join("planted").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never planted"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        ws.join("bgx/.git/config").exists(),
        "control: it was planted"
    );
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    assert!(!ws.join("bgx/.git").exists(), "the plant outlived sandcrab");
    users_git_status(&ws.join("bgx"));
    assert!(!ws.join("pwned").exists() && !ws.join("bgx/pwned").exists());
}

/// Git finds a git folder in shapes other than a `.git`: a folder with a
/// `HEAD` and a `commondir` naming a store elsewhere, a `.git` file that
/// points into an old repository's data folders (where the configuration
/// is not looked for), a new repository whose configuration has a second
/// name (a hard link) a later program writes through. Each, made by the
/// model's programs, is taken out; the user's git runs nothing of the
/// model's; the same shapes made by hand do run it (control).
#[test]
fn git_folders_of_every_shape_a_program_makes_are_taken_out() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(
        Command::new("git")
            .args(["init", "-q", "old"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
    let marker = scene.outside().join("pwned");
    let monitor = format!(
        "[core]\\n\\tfsmonitor = \"touch {}; false\"\\n",
        marker.display()
    );
    let shapes = [
        // HEAD + commondir: a git folder with no `.git` in sight.
        format!(
            "mkdir -p .cache/c/objects .cache/c/refs src/deep && printf '{monitor}' > .cache/c/config && echo 'ref: refs/heads/main' > src/HEAD && echo ../.cache/c > src/commondir"
        ),
        // A `.git` file into the data folders, configured afterwards.
        "mkdir -p old/.git/objects/wt/objects old/.git/objects/wt/refs data && echo 'ref: refs/heads/main' > old/.git/objects/wt/HEAD && echo 'gitdir: ../old/.git/objects/wt' > data/.git".to_string(),
        format!("printf '{monitor}' > old/.git/objects/wt/config"),
        // A clean `git init` with a second name for its configuration,
        // written through in a later program.
        "git init -q linked && ln linked/.git/config notes.txt".to_string(),
        format!("printf '{monitor}' >> notes.txt"),
    ];
    for command in &shapes {
        let out = tool_in(&scene, "shell", json!({ "command": command }));
        assert!(out.status.success(), "{command}: {}", text(&out.stderr));
    }
    for dir in ["src/deep", "data", "linked"] {
        users_git_status(&ws.join(dir));
    }
    assert!(!marker.exists(), "the user's git ran the model's program");
    assert!(!ws.join("src/commondir").exists());
    assert!(!ws.join("data/.git").exists());
    assert!(!ws.join("linked/.git/config").exists());

    // Control: the commondir shape, made by hand, is a git folder whose
    // configuration (the store's) the user's git takes as its own.
    std::fs::write(ws.join("src/commondir"), "../.cache/c\n").unwrap();
    let read = Command::new("git")
        .args(["config", "--get", "core.fsmonitor"])
        .current_dir(ws.join("src/deep"))
        .env_remove("GIT_CONFIG_COUNT")
        .output()
        .unwrap();
    assert!(
        text(&read.stdout).contains("pwned"),
        "control: git reads the store's configuration: {}",
        text(&read.stderr)
    );
}

/// A background program plants a repository; a second program counted
/// while it runs waits until the plant was taken out, then puts it back.
/// Its own sweep takes it out again: what was there while another program
/// ran is not taken as the workspace's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plant_handed_from_one_program_to_another_is_taken_out() {
    use crate::llm_transcripts::{Answer, stream, tool};
    let plant = "mkdir -p e/.git/objects e/.git/refs && echo 'ref: refs/heads/main' > e/.git/HEAD && printf '[core]\\n\\tfsmonitor = \"touch ../pwned; false\"\\n' > e/.git/config";
    let Some((scene, server)) = scene_with_background_job(&format!("{plant} && sleep 3")).await
    else {
        return;
    };
    let (kind, ws) = (BACKGROUND_KIND, scene.workspace());
    let relay = format!(
        "[ -e e/.git/config ] && echo counted-with-the-plant; while [ -e e/.git/config ]; do sleep 0.05; done; {plant} && echo replanted"
    );
    // Answered a moment later: the plant is there when this one starts.
    server.push(
        stream(
            kind,
            &Answer::Tools(vec![tool(
                "f1",
                "shell",
                json!({"command": relay, "timeout_ms": 30000}),
            )]),
        )
        .delayed(std::time::Duration::from_millis(400)),
    );
    server.push(stream(kind, &Answer::Text(vec!["done"])));
    let out = crate::cli_support::sandcrab(&scene, kind, &server, "run")
        .args(["--wait-jobs", "60", "relay it"])
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("counted-with-the-plant") && said.contains("replanted"),
        "control: the relay ran: {said}"
    );
    assert!(!ws.join("e/.git/config").exists(), "{said}");
    users_git_status(&ws.join("e"));
    assert!(!ws.join("pwned").exists());
}

/// The kernel's out-of-memory killer picks the model's program before
/// sandcrab, which must live to sweep after it.
#[test]
fn programs_are_the_out_of_memory_killers_first_pick() {
    let scene = Scene::new();
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "cat /proc/self/oom_score_adj"}),
    );
    assert_eq!(
        text(&out.stdout).lines().next(),
        Some("1000"),
        "{}",
        text(&out.stderr)
    );
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    assert_ne!(own.trim(), "1000", "control: the test itself is not");
}

/// A git command stopped by the metadata kept read-only (`git config`
/// rewrites `.git/config`) fails with a note that says why and who can
/// run it; a git command that reads it succeeds without one (control).
#[test]
fn a_git_command_stopped_by_kept_metadata_says_why() {
    if !crate::support::confinable() {
        return;
    }
    let scene = Scene::new();
    let ws = scene.workspace();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "git config user.name Me"}),
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("read-only to programs"), "{said}");
    assert!(said.contains("ask the user"), "{said}");
    let out = tool_in(
        &scene,
        "shell",
        json!({"command": "git config --get core.bare"}),
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("false") && !said.contains("read-only to programs"),
        "{said}"
    );
}

/// Working in the home folder, the user's stores and start files are kept
/// wherever the user keeps them: dotfiles that are links into a dotfiles
/// folder (replaced by a program: put back), a configuration folder
/// `$XDG_CONFIG_HOME` moves, a store a tool's own variable names, and the
/// start files Debian's shell, Python and cargo read. What a program of
/// the model's plants there is taken out; the user's own shell, git and
/// Python run none of it; the same plants made by hand do run (control).
#[test]
fn the_users_start_files_and_stores_are_kept_wherever_they_are() {
    if !crate::support::confinable() {
        return;
    }
    let home = HomeWorkspace::new();
    let h = home.home();
    let marker = |name: &str| h.join(format!("pwned-{name}"));
    let bashrc = "# mine\n[ -f ~/.bash_aliases ] && . ~/.bash_aliases\n";
    home.write("dotfiles/bashrc", bashrc);
    home.write("dotfiles/gitconfig", "[user]\n\tname = me\n");
    std::os::unix::fs::symlink("dotfiles/bashrc", h.join(".bashrc")).unwrap();
    std::os::unix::fs::symlink("dotfiles/gitconfig", h.join(".gitconfig")).unwrap();
    home.write(".xdg/gh/hosts.yml", "XDG-CANARY\n");
    home.write("vault/kube", "KUBE-CANARY\n");
    // Where the user's Python looks for its user site.
    let site = Command::new("python3")
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .env("HOME", &h)
        .output()
        .unwrap();
    let site = PathBuf::from(text(&site.stdout).trim());
    assert!(site.starts_with(h.join(".local/lib")), "{}", site.display());
    let pth = format!(
        "import os; os.system('touch {}')\n",
        marker("pth").display()
    );
    let plant = format!(
        "rm .bashrc && echo 'touch {bashrc}' > .bashrc; \
         printf '[core]\\n\\tpager = \"touch {pager}; cat\"\\n' > .xdg-git-config; mkdir -p .xdg/git && cp .xdg-git-config .xdg/git/config; \
         echo 'touch {aliases}' > .bash_aliases; \
         mkdir -p '{site}' && printf \"{pth}\" > '{site}/zz.pth'; \
         cat .xdg/gh/hosts.yml vault/kube; echo planted",
        bashrc = marker("bashrc").display(),
        pager = marker("pager").display(),
        aliases = marker("aliases").display(),
        site = site.display(),
        pth = pth.trim_end(),
    );
    let out = home
        .sandcrab(&[
            "tool",
            "call",
            "shell",
            "--args",
            &json!({ "command": plant }).to_string(),
        ])
        .env("XDG_CONFIG_HOME", h.join(".xdg"))
        .env("KUBECONFIG", h.join("vault/kube"))
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("planted"), "control: the program ran: {said}");
    assert!(
        !said.contains("XDG-CANARY") && !said.contains("KUBE-CANARY"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_link(h.join(".bashrc")).unwrap(),
        PathBuf::from("dotfiles/bashrc"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(h.join(".bashrc")).unwrap(), bashrc);
    for gone in [".xdg/git", ".bash_aliases", ".local/lib"] {
        assert!(!h.join(gone).exists(), "{gone} stayed: {said}");
    }
    // The user, afterwards, unconfined.
    let users = |program: &str, args: &[&str]| {
        let _ = Command::new(program)
            .args(args)
            .current_dir(&h)
            .env("HOME", &h)
            .env("XDG_CONFIG_HOME", h.join(".xdg"))
            .output();
    };
    users("bash", &["-ic", "true"]);
    users("python3", &["-c", "pass"]);
    for name in ["bashrc", "pager", "aliases", "pth"] {
        assert!(
            !marker(name).exists(),
            "the user's {name} ran the model's program"
        );
    }
    // Control: the same Python plant, made by hand, runs.
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("zz.pth"), &pth).unwrap();
    users("python3", &["-c", "pass"]);
    assert!(
        marker("pth").exists(),
        "control: Python runs a user site .pth"
    );
}
