//! `sandcrab plugins new NAME --lang rust|python|js` writes a plugin that
//! builds with the one command its README gives and loads with
//! `--plugins DIR`: built here with the toolchains the repository's setup
//! installs (`scripts/setup-polyglot`), then checked and called.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Scene, sandcrab_cmd};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Run `cmd`, failing the test with its output if it fails.
fn ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// Scaffold `name` in `lang`, build it with `build`, then check it and
/// call its tool on a workspace file.
fn scaffold_builds_and_loads(lang: &str, build: impl FnOnce(&Path)) {
    let scene = Scene::new();
    let name = format!("count-{lang}");
    let tool = name.replace('-', "_");
    let dir = scene.root.path().join(&name);
    ok(
        sandcrab_cmd(&scene)
            .args(["plugins", "new", &name, "--lang", lang, "--dir"])
            .arg(&dir),
        "plugins new",
    );
    build(&dir);

    let checked = ok(
        sandcrab_cmd(&scene).args(["plugins", "check"]).arg(&dir),
        "plugins check",
    );
    assert!(
        checked.starts_with(&format!("ok: {}", dir.display())),
        "{checked}"
    );

    std::fs::write(scene.workspace().join("poem.txt"), "sand crab\nscuttles\n").unwrap();
    let out = ok(
        sandcrab_cmd(&scene)
            .args([
                "tool",
                "call",
                &tool,
                "--args",
                r#"{"path": "poem.txt"}"#,
                "--plugins",
            ])
            .arg(&dir)
            .arg("-w")
            .arg(scene.workspace()),
        "tool call",
    );
    assert!(
        out.contains("poem.txt: 2 lines, 3 words, 19 bytes"),
        "{lang}: {out}"
    );
}

#[test]
fn a_new_rust_plugin_builds_and_loads() {
    scaffold_builds_and_loads("rust", |dir| {
        // One build directory for every run of this test: the scaffold's
        // `target/` is a link to it (its manifest names target/...).
        let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-rust");
        std::fs::create_dir_all(&shared).unwrap();
        std::os::unix::fs::symlink(&shared, dir.join("target")).unwrap();
        ok(
            Command::new(env!("CARGO"))
                .args(["build", "--release", "--quiet"])
                .current_dir(dir)
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("RUSTFLAGS"),
            "cargo build --release",
        );
    });
}

#[test]
fn a_new_python_plugin_builds_and_loads() {
    let venv_bin = repo().join("target/polyglot/venv/bin");
    assert!(
        venv_bin.join("componentize-py").is_file(),
        "componentize-py is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
    );
    scaffold_builds_and_loads("python", |dir| {
        let path = format!(
            "{}:{}",
            venv_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        ok(
            Command::new("./build.sh")
                .current_dir(dir)
                .env("PATH", path),
            "./build.sh",
        );
    });
}

#[test]
fn a_new_javascript_plugin_builds_and_loads() {
    let modules = repo().join("plugins/examples/js-json/node_modules");
    assert!(
        modules.join(".bin/componentize-js").exists(),
        "componentize-js is not installed: run ./scripts/setup-polyglot (./scripts/test does)"
    );
    scaffold_builds_and_loads("js", |dir| {
        // The same pinned packages `npm install` would fetch (a unit test
        // holds the scaffold's pins equal to the example's).
        std::os::unix::fs::symlink(&modules, dir.join("node_modules")).unwrap();
        ok(
            Command::new("npm")
                .args(["run", "--silent", "build"])
                .current_dir(dir),
            "npm run build",
        );
    });
}

/// A plugin whose tool would be shadowed (a built-in tool, or one of the
/// host's own) is refused before anything is written; a free name is not.
#[test]
fn a_new_plugin_may_not_take_a_tool_name_that_is_taken() {
    let scene = Scene::new();
    for (name, owner) in [
        ("read-file", "coding-tools"),
        ("list-jobs", "sandcrab's own"),
    ] {
        let dir = scene.root.path().join(name);
        let out = sandcrab_cmd(&scene)
            .args(["plugins", "new", name, "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {said}");
        assert!(
            said.contains(owner) && said.contains("choose another"),
            "{said}"
        );
        assert!(!dir.exists(), "nothing written for {name}");
    }
    // Control: a free name is made.
    let dir = scene.root.path().join("read-file-extra");
    ok(
        sandcrab_cmd(&scene)
            .args(["plugins", "new", "read-file-extra", "--dir"])
            .arg(&dir),
        "plugins new",
    );
    assert!(dir.join("plugin.toml").exists());
}
