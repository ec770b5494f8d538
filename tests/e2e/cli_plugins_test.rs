//! `sandcrab plugins list | inspect | check` and `--version`, run as the
//! real binary.

use std::process::Command;

use crate::support::{Scene, install_plugin};

fn sandcrab(scene: &Scene) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandcrab"));
    cmd.env("XDG_CACHE_HOME", scene.root.path().join("cache"))
        .env("XDG_CONFIG_HOME", scene.root.path().join("config"))
        .env_remove("RUST_LOG");
    cmd
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().expect("run sandcrab");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_is_printed() {
    let scene = Scene::new();
    let (ok, stdout, _) = run(sandcrab(&scene).arg("--version"));
    assert!(ok);
    assert_eq!(
        stdout.trim(),
        format!("sandcrab {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_dropped_in_plugin_is_listed_and_inspected() {
    let scene = Scene::new();
    install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let ws = scene.workspace();
    let (ok, stdout, stderr) = run(sandcrab(&scene)
        .args(["plugins", "list", "--plugins"])
        .arg(scene.plugins())
        .arg("-w")
        .arg(&ws));
    assert!(ok, "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("hello-tool"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("tool") && line.contains("hello") && line.contains("external"),
        "{line}"
    );

    let (ok, stdout, stderr) = run(sandcrab(&scene)
        .args(["plugins", "list", "--json", "--plugins"])
        .arg(scene.plugins())
        .arg("-w")
        .arg(&ws));
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let hello = json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hello-tool")
        .unwrap();
    assert_eq!(hello["tools"][0]["name"], "hello");
    assert_eq!(hello["granted"]["workspace"], "read");

    let (ok, stdout, stderr) = run(sandcrab(&scene)
        .args(["plugins", "inspect", "hello-tool", "--plugins"])
        .arg(scene.plugins())
        .arg("-w")
        .arg(&ws));
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(
            "tool hello (offered to the model with profile 'anthropic'): Greet someone by name."
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("\"required\": [\n    \"name\"\n  ]"),
        "{stdout}"
    );
    assert!(stdout.contains("granted:"), "{stdout}");
}

#[test]
fn check_validates_without_running_and_names_problems() {
    let scene = Scene::new();
    let good = install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let (ok, stdout, stderr) = run(sandcrab(&scene).args(["plugins", "check"]).arg(&good));
    assert!(ok, "{stderr}");
    assert!(
        stdout.starts_with(&format!("ok: {}", good.display())),
        "{stdout}"
    );

    let bad = install_plugin(&scene.plugins(), "examples/hello-tool", "bad", |m| {
        m.replace("kind = \"tool\"", "kind = \"summarizer\"")
    });
    let (ok, _, stderr) = run(sandcrab(&scene).args(["plugins", "check"]).arg(&bad));
    assert!(!ok);
    assert!(
        stderr.contains(&bad.join("hello_tool.wasm").display().to_string())
            && stderr.contains("wrong world"),
        "{stderr}"
    );

    let (ok, _, stderr) = run(sandcrab(&scene)
        .args(["plugins", "inspect", "nope", "-w"])
        .arg(scene.workspace()));
    assert!(!ok);
    assert!(stderr.contains("no plugin named 'nope'"), "{stderr}");
}

/// A plugin that panics tells its author (and the model) its own panic
/// message and where, not a screen of wasm frames; the frames come with -v.
#[test]
fn a_panicking_plugin_says_its_panic_message_first_and_frames_only_with_v() {
    let scene = Scene::new();
    install_plugin(
        &scene.plugins(),
        "test-fixtures/hostile-tool",
        "hostile",
        |m| m,
    );
    let ws = scene.workspace();
    let call = |verbose: bool| {
        let mut cmd = sandcrab(&scene);
        if verbose {
            cmd.arg("-v");
        }
        run(cmd
            .args(["tool", "call", "trap", "--args", "{}", "--plugins"])
            .arg(scene.plugins())
            .arg("-w")
            .arg(&ws))
    };
    let (ok, _, stderr) = call(false);
    assert!(!ok, "a crashed call fails: {stderr}");
    let error = stderr
        .lines()
        .find(|l| l.contains("crashed"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        error.contains("panicked at") && error.contains("hostile-tool panicked on purpose"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wasm backtrace") && !stderr.contains("panic_fmt"),
        "no frames without -v: {stderr}"
    );

    let (ok, _, stderr) = call(true);
    assert!(!ok);
    assert!(
        stderr.contains("wasm backtrace"),
        "-v shows the frames: {stderr}"
    );
}

/// A plugin that must be compiled first says so before the wait, once:
/// the next start takes it from the cache and says nothing.
#[test]
fn a_first_load_says_it_compiles_and_a_cached_one_does_not() {
    let scene = Scene::new();
    install_plugin(&scene.plugins(), "examples/hello-tool", "hello", |m| m);
    let list = || {
        run(sandcrab(&scene)
            .args(["plugins", "list", "--plugins"])
            .arg(scene.plugins())
            .arg("-w")
            .arg(scene.workspace()))
    };
    let (ok, _, stderr) = list();
    assert!(ok, "{stderr}");
    assert!(stderr.contains("plugins: compiling"), "{stderr}");
    let (ok, _, stderr) = list();
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("compiling"), "{stderr}");
}

/// A workspace the user cannot write is named as what it is (the file
/// system's permissions), in words, not blamed on the sandbox with a
/// debug dump of an error code.
#[test]
fn a_read_only_workspace_is_named_as_the_file_systems_refusal() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // Root writes anyway: run as nobody, with everything it needs where
    // nobody can reach it (a copy of the binary included).
    let root = tempfile::tempdir().unwrap();
    let dir = |name: &str| {
        let d = root.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    };
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir("bin").join("sandcrab");
    std::fs::copy(env!("CARGO_BIN_EXE_sandcrab"), &bin).unwrap();
    let ws = dir("ws");
    std::fs::write(ws.join("kept.txt"), "as it was\n").unwrap();
    let call = |mode: u32| {
        std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut cmd = Command::new(&bin);
        cmd.current_dir(&ws)
            .env("HOME", root.path())
            .env("XDG_CONFIG_HOME", dir("config"))
            .env("XDG_DATA_HOME", dir("data"))
            .env("XDG_CACHE_HOME", dir("cache"))
            .env_remove("RUST_LOG")
            .args(["tool", "call", "write_file", "--args"])
            .arg(r#"{"file_path": "new.txt", "content": "x"}"#);
        if unsafe { libc::geteuid() } == 0 {
            cmd.uid(65534).gid(65534);
        }
        run(&mut cmd)
    };
    let (ok, stdout, stderr) = call(0o555);
    let said = format!("{stdout}{stderr}");
    assert!(!ok, "{said}");
    assert!(
        said.contains("permission denied by the file system"),
        "{said}"
    );
    assert!(
        !said.contains("ErrorCode") && !said.contains("sandcrab sandbox"),
        "{said}"
    );
    // Control: writable, the same call writes.
    let (ok, stdout, stderr) = call(0o777);
    assert!(ok, "{stdout}{stderr}");
    assert!(ws.join("new.txt").exists());
}

/// A mistyped tool name is answered with the name it most likely meant
/// (the model reads the same answer); bad `--args` are a usage error.
#[test]
fn a_mistyped_tool_gets_a_did_you_mean_and_bad_args_exit_2() {
    let scene = Scene::new();
    let call = |name: &str, args: &str| {
        let out = sandcrab(&scene)
            .args(["tool", "call", name, "--args", args, "-w"])
            .arg(scene.workspace())
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (code, said) = call("read_fil", r#"{"file_path": "x"}"#);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("did you mean read_file?"), "{said}");
    // Control: a name nothing is close to gets no guess.
    let (_, said) = call("zzzzzzzzzz", "{}");
    assert!(
        said.contains("Unknown tool") && !said.contains("did you mean"),
        "{said}"
    );
    let (code, said) = call("read_file", "{bad");
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--args is not valid JSON"), "{said}");
}
