//! Third-party tools are first-class: the example plugins in Rust, Python
//! and JavaScript reach the model on every wire format and run; the
//! operator chooses which tools the model sees; a colliding name is
//! refused unless overridden; pins refuse a changed component.
//!
//! The Python and JavaScript examples are built by `./scripts/build-examples`
//! (which `./scripts/test` runs first) into `target/examples/`.

use std::path::{Path, PathBuf};
use std::process::Output;

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{offered_tools, sandcrab, tool_result};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, install_plugin, sandcrab_cmd};

/// A built example plugin directory under `target/examples/`.
pub fn built_example(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/examples")
        .join(name);
    assert!(
        dir.join("plugin.toml").is_file(),
        "the {name} example plugin is not built ({} is missing): run ./scripts/build-examples (./scripts/test runs it before the tests)",
        dir.display()
    );
    dir
}

/// Copy a built example into `parent/dir_name`.
fn install_example(parent: &Path, name: &str, dir_name: &str) -> PathBuf {
    let from = built_example(name);
    let to = parent.join(dir_name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    to
}

/// The three examples in one plugins folder, with the programs they ask
/// for granted in the user's configuration.
fn three_examples(scene: &Scene) {
    let p = scene.plugins();
    install_plugin(&p, "examples/hello-tool", "hello", |m| m);
    install_example(&p, "python-notes", "python");
    install_example(&p, "js-json", "js");
    scene.write_user_config(
        "[policy.plugins.hello-tool]\nprograms = [\"sort\"]\n\
         [policy.plugins.python-notes]\nprograms = [\"tr\"]\n\
         [policy.plugins.js-json]\nprograms = [\"wc\"]\n",
    );
    std::fs::write(
        scene.workspace().join("notes.txt"),
        "first\n# TODO: ship it\nlast\n",
    )
    .unwrap();
    std::fs::write(
        scene.workspace().join("data.json"),
        r#"{"name": "crab", "legs": 10, "claws": [1, 2]}"#,
    )
    .unwrap();
}

/// The example tools, each called once: (call id, tool, arguments, what its
/// output must contain).
fn example_calls() -> Vec<(&'static str, &'static str, Value, &'static str)> {
    vec![
        (
            "c_lines",
            "line_count",
            json!({"path": "notes.txt"}),
            "notes.txt: 3 lines",
        ),
        (
            "c_sort",
            "sort_lines",
            json!({"text": "pear\napple\n"}),
            "apple\npear",
        ),
        (
            "c_todo",
            "todo_list",
            json!({"path": "notes.txt"}),
            "2: # TODO: ship it",
        ),
        (
            "c_shout",
            "shout",
            json!({"text": "quiet crab"}),
            "QUIET CRAB",
        ),
        (
            "c_keys",
            "json_keys",
            json!({"path": "data.json"}),
            "name: string\nlegs: number\nclaws: array",
        ),
        (
            "c_words",
            "word_total",
            json!({"text": "one two three"}),
            "3 words",
        ),
    ]
}

fn run_with_plugins(scene: &Scene, kind: ProviderKind, server: &MockLlm, prompt: &str) -> Output {
    sandcrab(scene, kind, server, "run")
        .arg(prompt)
        .arg("--plugins")
        .arg(scene.plugins())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_tools_of_every_language_are_offered_to_and_called_by_the_model() {
    let scene = Scene::new();
    three_examples(&scene);
    for kind in ProviderKind::ALL {
        // A server that rejects what the real API rejects (tool names,
        // schemas, unanswered calls).
        let server = MockLlm::strict(kind).await;
        let calls = example_calls();
        server.push(stream(
            kind,
            &Answer::Tools(
                calls
                    .iter()
                    .map(|(id, name, args, _)| tool(id, name, args.clone()))
                    .collect(),
            ),
        ));
        server.push(stream(kind, &Answer::Text(vec!["All six tools ran."])));

        let out = run_with_plugins(&scene, kind, &server, "Use every example tool once.");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: {stderr}");
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "{kind}: {stderr}");

        let offered = offered_tools(kind, &reqs[0]);
        for (_, name, _, _) in &calls {
            assert!(
                offered.iter().any(|o| o == name),
                "{kind}: {name} not in {offered:?}"
            );
        }
        assert!(
            offered.iter().any(|o| o == "read_file"),
            "{kind}: {offered:?}"
        );
        let mut unique = offered.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), offered.len(), "{kind}: a name offered twice");

        for (id, name, _, expected) in &calls {
            let result = tool_result(kind, &reqs[1], id, name);
            assert!(
                result.contains(expected),
                "{kind}: {name} answered {result:?}, expected {expected:?}"
            );
        }
    }
}

#[test]
fn tool_call_runs_each_example_from_the_command_line() {
    let scene = Scene::new();
    three_examples(&scene);
    for (_, name, args, expected) in example_calls() {
        let out = sandcrab_cmd(&scene)
            .args([
                "tool",
                "call",
                name,
                "--args",
                &args.to_string(),
                "--plugins",
            ])
            .arg(scene.plugins())
            .arg("-w")
            .arg(scene.workspace())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(expected),
            "{name}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Without the grant, the model reads what to add and where.
    scene.write_user_config("");
    let out = sandcrab_cmd(&scene)
        .args([
            "tool",
            "call",
            "shout",
            "--args",
            r#"{"text": "x"}"#,
            "--plugins",
        ])
        .arg(scene.plugins())
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("[policy.plugins.python-notes]") && text.contains("programs = [\"tr\"]"),
        "{text}"
    );
}

/// What `sandcrab plugins list --json` says about each tool of `plugin`.
fn offers(scene: &Scene, plugin: &str) -> Value {
    let out = sandcrab_cmd(scene)
        .args(["plugins", "list", "--json", "--plugins"])
        .arg(scene.plugins())
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == plugin)
        .unwrap_or_else(|| panic!("{plugin} is not listed: {json:#}"))["offered"]
        .clone()
}

/// The tools offered in the first request of a `run` with the scene's
/// plugins, and the run's stderr.
async fn offered_in_a_run(scene: &Scene) -> (Vec<String>, String) {
    let kind = ProviderKind::Anthropic;
    let server = MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["ok"])));
    let out = run_with_plugins(scene, kind, &server, "hi");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    (offered_tools(kind, &server.requests()[0]), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_chooses_which_plugin_tools_the_model_sees() {
    let scene = Scene::new();
    install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);

    // Every third-party tool by default, with the profile's core set.
    let (offered, _) = offered_in_a_run(&scene).await;
    for name in ["hello", "line_count", "sort_lines", "read_file", "shell"] {
        assert!(offered.iter().any(|o| o == name), "{name}: {offered:?}");
    }

    // Excluded by tool name (a plugin tool and a core tool).
    scene.write_user_config("[agent.tools]\nexclude = [\"sort_lines\", \"shell\"]\n");
    let (offered, _) = offered_in_a_run(&scene).await;
    assert!(offered.iter().any(|o| o == "hello"), "{offered:?}");
    assert!(
        !offered.iter().any(|o| o == "sort_lines" || o == "shell"),
        "{offered:?}"
    );
    let listed = offers(&scene, "hello-tool");
    assert_eq!(listed["sort_lines"], "excluded", "{listed}");
    assert_eq!(listed["hello"], "offered", "{listed}");

    // Only what `include` names (by plugin name, or by tool name).
    scene.write_user_config("[agent.tools]\ninclude = [\"hello-tool\", \"read_file\"]\n");
    let (offered, _) = offered_in_a_run(&scene).await;
    for name in ["hello", "line_count", "sort_lines", "read_file"] {
        assert!(offered.iter().any(|o| o == name), "{name}: {offered:?}");
    }
    for name in ["shell", "grep", "write_file"] {
        assert!(!offered.iter().any(|o| o == name), "{name}: {offered:?}");
    }

    // A repository cannot widen the operator's choice: its `include` is
    // ignored (with a warning) and its `exclude = []` undoes nothing.
    scene.write_user_config("[agent.tools]\nexclude = [\"sort_lines\"]\n");
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        "[agent.tools]\ninclude = [\"sort_lines\"]\nexclude = []\n",
    )
    .unwrap();
    let (offered, stderr) = offered_in_a_run(&scene).await;
    assert!(!offered.iter().any(|o| o == "sort_lines"), "{offered:?}");
    assert!(offered.iter().any(|o| o == "read_file"), "{offered:?}");
    assert!(stderr.contains("ignored `agent.tools.include`"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_colliding_tool_is_refused_unless_the_operator_overrides_it() {
    let scene = Scene::new();
    let p = scene.plugins();
    install_plugin(&p, "examples/hello-tool", "hello", |m| m);
    install_plugin(&p, "examples/hello-tool", "hello-again", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-again\"")
    });
    // A third-party copy of the coding tools: every name collides with a
    // core tool.
    install_plugin(&p, "coding-tools", "mine", |m| {
        m.replace("name = \"coding-tools\"", "name = \"my-tools\"")
    });

    let (offered, stderr) = offered_in_a_run(&scene).await;
    let mut unique = offered.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        offered.len(),
        "a name offered twice: {offered:?}"
    );
    assert!(
        stderr.contains("tool 'hello' is not loaded: plugin 'hello-tool' already provides it")
            && stderr.contains("override_tools = [\"hello\"] to [policy.plugins.hello-again]"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("tool 'read_file' is not loaded: plugin 'coding-tools' already provides it"),
        "{stderr}"
    );
    assert_eq!(offers(&scene, "hello-tool")["hello"], "offered");
    assert_eq!(offers(&scene, "hello-again")["hello"], "shadowed");
    assert_eq!(offers(&scene, "my-tools")["read_file"], "shadowed");

    // The operator names the override: that plugin's tool replaces the
    // other, with a notice, and still only one is offered.
    scene.write_user_config(
        "[policy.plugins.my-tools]\noverride_tools = [\"read_file\"]\nworkspace = \"read\"\n",
    );
    let (offered, stderr) = offered_in_a_run(&scene).await;
    assert_eq!(offered.iter().filter(|o| *o == "read_file").count(), 1);
    assert!(
        stderr.contains("tool 'read_file' replaces the one of plugin 'coding-tools'"),
        "{stderr}"
    );
    assert_eq!(offers(&scene, "my-tools")["read_file"], "offered");
    assert_eq!(offers(&scene, "coding-tools")["read_file"], "shadowed");
    // Its other tools are still refused.
    assert_eq!(offers(&scene, "my-tools")["grep"], "shadowed");
}

#[test]
fn pins_refuse_a_changed_component_and_locked_mode_requires_them() {
    let scene = Scene::new();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let list = |scene: &Scene| {
        let out = sandcrab_cmd(scene)
            .args(["plugins", "list", "--plugins"])
            .arg(scene.plugins())
            .arg("-w")
            .arg(scene.workspace())
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };

    // `plugins pin` writes the pin into the user's configuration.
    scene.write_user_config("# mine\n[policy]\nmode = \"default\"\n");
    let out = sandcrab_cmd(&scene)
        .args(["plugins", "pin", "hello-tool", "--plugins"])
        .arg(scene.plugins())
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = dir.join("hello_tool.wasm");
    let pinned = sandcrab::plugin::integrity::sha256_hex(&std::fs::read(&wasm).unwrap());
    let config = std::fs::read_to_string(scene.user_config()).unwrap();
    assert!(
        config.starts_with("# mine\n"),
        "the user's file was rewritten: {config}"
    );
    assert!(
        config.contains(&format!("sha256 = \"{pinned}\"")),
        "{config}"
    );
    let (stdout, stderr) = list(&scene);
    assert!(stdout.contains("hello-tool"), "{stdout}{stderr}");

    // The component changes under the pin: refused, both hashes named.
    let other = crate::support::artifact("test-fixtures/hostile-tool");
    std::fs::copy(other.wasm_path, &wasm).unwrap();
    let changed = sandcrab::plugin::integrity::sha256_hex(&std::fs::read(&wasm).unwrap());
    let (stdout, stderr) = list(&scene);
    assert!(!stdout.contains("hello-tool"), "{stdout}");
    assert!(
        stderr.contains(&pinned) && stderr.contains(&changed) && stderr.contains("hello-tool"),
        "{stderr}"
    );

    // Locked mode loads third-party plugins only when pinned.
    std::fs::copy(
        crate::support::artifact("examples/hello-tool").wasm_path,
        &wasm,
    )
    .unwrap();
    scene.write_user_config("[policy]\nmode = \"locked\"\n");
    let (stdout, stderr) = list(&scene);
    assert!(!stdout.contains("hello-tool"), "{stdout}");
    assert!(
        stderr.contains("not pinned") && stderr.contains("sandcrab plugins pin hello-tool"),
        "{stderr}"
    );
    scene.write_user_config(&format!(
        "[policy]\nmode = \"locked\"\n[policy.plugins.hello-tool]\nsha256 = \"{pinned}\"\n"
    ));
    let (stdout, stderr) = list(&scene);
    assert!(stdout.contains("hello-tool"), "{stdout}{stderr}");
}

#[test]
fn a_plugin_that_runs_programs_without_a_directory_gets_a_scratch_cwd() {
    let scene = Scene::new();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| {
        m.replace("workspace = \"read\"", "workspace = \"none\"")
    });
    scene.write_user_config("[policy.plugins.hello-tool]\nprograms = [\"sort\"]\n");
    let out = sandcrab_cmd(&scene)
        .args([
            "tool",
            "call",
            "sort_lines",
            "--args",
            r#"{"text": "b\na\n"}"#,
            "--plugins",
        ])
        .arg(scene.plugins())
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("a\nb"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `plugins check` says so before anything runs.
    let out = sandcrab_cmd(&scene)
        .args(["plugins", "check"])
        .arg(&dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("scratch directory"), "{text}");
}

#[test]
fn plugins_check_takes_the_component_from_the_cache_the_second_time() {
    let scene = Scene::new();
    let dir = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let cache = tempfile::tempdir().unwrap();
    scene.write_user_config(&format!("cache_dir = \"{}\"\n", cache.path().display()));
    let check = || {
        let out = sandcrab_cmd(&scene)
            .args(["plugins", "check"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let first = check();
    assert!(
        first.contains("native code: compiled and cached"),
        "{first}"
    );
    let second = check();
    assert!(
        second.contains("native code: taken from the cache"),
        "{second}"
    );
}

#[test]
fn two_processes_loading_a_new_plugin_compile_it_once() {
    let scene = Scene::new();
    let dir = install_example(&scene.plugins(), "python-notes", "python");
    let cache = tempfile::tempdir().unwrap();
    scene.write_user_config(&format!("cache_dir = \"{}\"\n", cache.path().display()));
    let check = || {
        sandcrab_cmd(&scene)
            .args(["plugins", "check"])
            .arg(&dir)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (check(), check());
    let mut outcomes: Vec<String> = [a, b]
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("native code: "))
                .unwrap_or_else(|| panic!("{stdout}"))
                .to_string()
        })
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["compiled and cached", "taken from the cache"]);
}
