//! Precompiles the first-party plugins that the binary embeds, with the
//! engine configuration the host runs them with (`sandcrab-engine`), and
//! generates `precompiled.rs`: the native code of each, embedded beside its
//! component, so a first start compiles nothing.
//!
//! The code is compiled for this machine's CPU features. A binary run on a
//! CPU without them, or with other code settings, finds the embedded code
//! refused by wasmtime and compiles the component itself (once, through
//! the on-disk cache), saying so.

// Cargo reads a build script's instructions from its stdout.
#![allow(clippy::disallowed_macros)]

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let list = env::var("DEP_SANDCRAB_BUNDLED_PLUGINS_BUNDLED_LIST")
        .expect("sandcrab-bundled-plugins publishes the list of bundled components");
    println!("cargo::rerun-if-changed={list}");
    println!("cargo::rerun-if-changed=build.rs");
    let text = fs::read_to_string(&list).unwrap();
    let mut generated = String::from(
        "/// The first-party plugins' native code, compiled when the binary was built.\n\
         pub static PRECOMPILED: &[Precompiled] = &[\n",
    );
    for line in text.lines() {
        let (name, wasm_path) = line.split_once('\t').expect("name<TAB>path");
        println!("cargo::rerun-if-changed={wasm_path}");
        if let Some(code) = precompile(name, Path::new(wasm_path), &out_dir) {
            writeln!(
                generated,
                "    Precompiled {{ name: {name:?}, wasm_blake3: {:?}, code: include_bytes!({:?}) }},",
                code.wasm_blake3,
                code.path.display().to_string(),
            )
            .unwrap();
        }
    }
    generated.push_str("];\n");
    fs::write(out_dir.join("precompiled.rs"), generated).unwrap();
}

struct Compiled {
    wasm_blake3: String,
    path: PathBuf,
}

/// Compile one component; None (with a build warning) when it cannot be:
/// the binary then compiles it at run time.
fn precompile(name: &str, wasm_path: &Path, out_dir: &Path) -> Option<Compiled> {
    let wasm = fs::read(wasm_path).unwrap();
    let code = match sandcrab_engine::precompile(sandcrab_engine::CodeSettings::default(), &wasm) {
        Ok(code) => code,
        Err(err) => {
            println!(
                "cargo::warning=plugin {name} is not precompiled ({err:#}); the binary will compile it at run time"
            );
            return None;
        }
    };
    let path = out_dir.join(format!("{name}.cwasm"));
    fs::write(&path, code).unwrap();
    Some(Compiled {
        wasm_blake3: blake3::hash(&wasm).to_hex().to_string(),
        path,
    })
}
