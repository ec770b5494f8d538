//! Builds the plugin workspace (`plugins/`) for wasm32-wasip2 and generates
//! `bundled.rs`, which embeds the first-party plugins and exposes the paths
//! of every built artifact (examples and test fixtures included).
//!
//! The inner cargo runs with a clean environment (the outer build's
//! `CARGO_*` and `RUSTFLAGS` variables would otherwise leak into it) and its
//! own target directory under the outer one, so unchanged plugins cost only
//! a no-op cargo invocation.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Plugins embedded in the `sandcrab` binary and loaded as first-party.
const BUNDLED: &[&str] = &[
    "coding-tools",
    "profile-anthropic",
    "profile-openai",
    "profile-gemini",
    "profile-local",
    "summarizer-default",
];

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest_dir.parent().unwrap().to_path_buf();
    let plugins = repo.join("plugins");
    for input in ["plugins", "sdk", "wit"] {
        watch(&repo.join(input));
    }

    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target_dir = outer_target_dir(&out_dir).join("wasm-plugins");
    build_plugins(&plugins, &target_dir);

    let artifacts = target_dir.join(TARGET).join("release");
    let mut found = Vec::new();
    for dir in plugin_dirs(&plugins) {
        let manifest = dir.join("plugin.toml");
        let text = fs::read_to_string(&manifest).unwrap();
        let wasm_name = wasm_field(&text)
            .unwrap_or_else(|| panic!("{}: missing `wasm = \"...\"`", manifest.display()));
        let wasm = artifacts.join(&wasm_name);
        if !wasm.exists() {
            panic!(
                "{} names {wasm_name}, but the plugin build produced no {}",
                manifest.display(),
                wasm.display()
            );
        }
        found.push((dir, manifest, wasm));
    }
    fs::write(
        out_dir.join("bundled.rs"),
        generate(&plugins, &out_dir, &found),
    )
    .unwrap();
    publish_bundled_list(&out_dir, &found);
}

/// Tell the crates that depend on this one (through `links`) where the
/// embedded plugins' components are: the host's build script precompiles
/// them. One `name<TAB>wasm path` line per plugin, in `bundled.list`.
fn publish_bundled_list(out_dir: &Path, found: &[(PathBuf, PathBuf, PathBuf)]) {
    let mut list = String::new();
    for (dir, _, _) in found {
        let name = dir.file_name().unwrap().to_string_lossy();
        if BUNDLED.contains(&name.as_ref()) {
            let wasm = embedded_copy(out_dir, &name);
            writeln!(list, "{name}\t{}", wasm.display()).unwrap();
        }
    }
    let path = out_dir.join("bundled.list");
    fs::write(&path, list).unwrap();
    println!("cargo::metadata=bundled_list={}", path.display());
}

/// Rerun when anything under `path` changes (cargo scans directories).
fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// `<target>/<profile>/build/<pkg>-<hash>/out` -> `<target>`.
fn outer_target_dir(out_dir: &Path) -> PathBuf {
    if let Ok(dir) = env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside the target directory")
        .to_path_buf()
}

fn build_plugins(plugins: &Path, target_dir: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(plugins)
        .args([
            "build",
            "--release",
            "--workspace",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(target_dir);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let inherited = key.starts_with("CARGO_")
            && !matches!(
                key.as_ref(),
                "CARGO_HOME" | "CARGO_NET_OFFLINE" | "CARGO_REGISTRIES_CRATES_IO_PROTOCOL"
            );
        if inherited
            || key.contains("RUSTFLAGS")
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
        {
            cmd.env_remove(key.as_ref());
        }
    }
    let output = cmd
        .output()
        .expect("failed to run cargo for the plugin workspace");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("may not be installed")
            || stderr.contains("can't find crate for `std`")
        {
            "\n\nThe wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`.\n"
        } else {
            ""
        };
        panic!(
            "building the plugins in {} failed:\n{stderr}{hint}",
            plugins.display()
        );
    }
}

/// Every Rust plugin under `plugins/` (one level, plus `test-fixtures/*`
/// and `examples/*`): a directory holding `plugin.toml` and `Cargo.toml`.
/// The Python and JavaScript examples are built by `scripts/build-examples`.
/// Sorted for a stable output.
fn plugin_dirs(plugins: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for parent in [
        plugins.to_path_buf(),
        plugins.join("test-fixtures"),
        plugins.join("examples"),
    ] {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if dir.join("plugin.toml").is_file() && dir.join("Cargo.toml").is_file() {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    dirs
}

/// The value of the top-level `wasm = "..."` line of a manifest.
fn wasm_field(manifest: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let rest = line
            .trim()
            .strip_prefix("wasm")?
            .trim_start()
            .strip_prefix('=')?;
        Some(rest.trim().trim_matches('"').to_string())
    })
}

/// Where the component of embedded plugin `name` is copied: the bytes
/// embedded, hashed and precompiled are this one file's, whatever later
/// happens to the plugin build's own artifact.
fn embedded_copy(out_dir: &Path, name: &str) -> PathBuf {
    out_dir.join(format!("{name}.wasm"))
}

fn generate(plugins: &Path, out_dir: &Path, found: &[(PathBuf, PathBuf, PathBuf)]) -> String {
    let mut out = String::new();
    out.push_str("/// The first-party plugins embedded in the binary.\npub static BUNDLED: &[BundledPlugin] = &[\n");
    for (dir, manifest, wasm) in found {
        let name = dir.file_name().unwrap().to_string_lossy();
        if BUNDLED.contains(&name.as_ref()) {
            let bytes = fs::read(wasm).expect("read a built bundled component");
            let wasm = embedded_copy(out_dir, &name);
            fs::write(&wasm, &bytes).expect("copy a bundled component into OUT_DIR");
            let sha256: String =
                sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(&bytes))
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
            writeln!(
                out,
                "    BundledPlugin {{ name: {name:?}, manifest: include_str!({:?}), wasm: include_bytes!({:?}), wasm_sha256: {sha256:?}, wasm_blake3: {:?} }},",
                manifest.display().to_string(),
                wasm.display().to_string(),
                blake3::hash(&bytes).to_hex().to_string()
            )
            .unwrap();
        }
    }
    out.push_str("];\n\n/// Every plugin built from `plugins/`, as a source directory (holding\n/// `plugin.toml`) and the path of its built `.wasm`.\npub static ARTIFACTS: &[Artifact] = &[\n");
    for (dir, _, wasm) in found {
        let rel = dir.strip_prefix(plugins).unwrap().display().to_string();
        writeln!(
            out,
            "    Artifact {{ name: {rel:?}, source_dir: {:?}, wasm_path: {:?} }},",
            dir.display().to_string(),
            wasm.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    out
}
