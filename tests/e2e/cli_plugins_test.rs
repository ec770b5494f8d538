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
