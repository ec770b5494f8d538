//! `sandcrab plugins new NAME [--lang rust|python|js] [--dir DIR]`: write a
//! plugin project that builds with one command and loads with
//! `--plugins DIR`. The templates are beside this file; the sandcrab WIT
//! and, for Rust, the SDK itself are written into the project, so it builds
//! without anything but the language's own toolchain.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

/// componentize-py version the Python template pins (the repository's
/// examples pin the same one).
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// componentize-js version the JavaScript template pins.
pub const COMPONENTIZE_JS: &str = "0.23.0";
/// jco version the JavaScript template pins (for the WASI WIT it carries).
pub const JCO: &str = "1.35.0";
/// preview2-shim version the JavaScript template pins: componentize-js
/// imports it without declaring it.
pub const PREVIEW2_SHIM: &str = "0.25.0";

/// The plugin ABI new plugins are written against.
const ABI: &str = "0.3.0";
const PLUGIN_WIT: &str = include_str!("../../../../../wit/since_v0.3.0/plugin.wit");

/// Options of `sandcrab plugins new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// Plugin name: lower case letters, digits and dashes (`word-count`);
    /// its tool is named the same with underscores.
    name: String,
    /// Language of the plugin.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Directory to create (default: ./NAME); it must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Js,
}

/// One file of a template: its path in the project and its text.
type File = (&'static str, &'static str);

const RUST: &[File] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
    (
        ".cargo/config.toml",
        include_str!("templates/rust/cargo-config.toml"),
    ),
    (".gitignore", include_str!("templates/rust/gitignore")),
    ("src/lib.rs", include_str!("templates/rust/lib.rs")),
    ("README.md", include_str!("templates/rust/README.md")),
];

/// The SDK, vendored into Rust projects (until it is on crates.io).
const SDK: &[File] = &[
    ("Cargo.toml", include_str!("../../../../../sdk/Cargo.toml")),
    ("README.md", include_str!("../../../../../sdk/README.md")),
    (
        "wit/plugin.wit",
        include_str!("../../../../../sdk/wit/plugin.wit"),
    ),
    (
        "wit-shards/shards.wit",
        include_str!("../../../../../sdk/wit-shards/shards.wit"),
    ),
    ("src/lib.rs", include_str!("../../../../../sdk/src/lib.rs")),
    (
        "src/bindings.rs",
        include_str!("../../../../../sdk/src/bindings.rs"),
    ),
    (
        "src/http.rs",
        include_str!("../../../../../sdk/src/http.rs"),
    ),
    ("src/log.rs", include_str!("../../../../../sdk/src/log.rs")),
    (
        "src/paths.rs",
        include_str!("../../../../../sdk/src/paths.rs"),
    ),
    (
        "src/process.rs",
        include_str!("../../../../../sdk/src/process.rs"),
    ),
    (
        "src/profile.rs",
        include_str!("../../../../../sdk/src/profile.rs"),
    ),
    (
        "src/schema.rs",
        include_str!("../../../../../sdk/src/schema.rs"),
    ),
    (
        "src/sharded.rs",
        include_str!("../../../../../sdk/src/sharded.rs"),
    ),
    (
        "src/summarizer.rs",
        include_str!("../../../../../sdk/src/summarizer.rs"),
    ),
    (
        "src/tool.rs",
        include_str!("../../../../../sdk/src/tool.rs"),
    ),
];

const PYTHON: &[File] = &[
    ("app.py", include_str!("templates/python/app.py")),
    (
        "sandcrab_paths.py",
        include_str!("../../../../../plugins/examples/python-notes/sandcrab_paths.py"),
    ),
    ("build.sh", include_str!("templates/python/build.sh")),
    (
        "requirements.txt",
        include_str!("templates/python/requirements.txt"),
    ),
    (".gitignore", include_str!("templates/python/gitignore")),
    ("README.md", include_str!("templates/python/README.md")),
    ("wit/plugin.wit", PLUGIN_WIT),
];

const JS: &[File] = &[
    ("app.js", include_str!("templates/js/app.js")),
    (
        "fs.js",
        include_str!("../../../../../plugins/examples/js-json/fs.js"),
    ),
    ("package.json", include_str!("templates/js/package.json")),
    ("wit/world.wit", include_str!("templates/js/world.wit")),
    ("wit/deps/sandcrab-plugin/plugin.wit", PLUGIN_WIT),
    (".gitignore", include_str!("templates/js/gitignore")),
    ("README.md", include_str!("templates/js/README.md")),
];

pub async fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    let names = Names::new(&args.name)?;
    taken(&names.tool).await?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let occupied = std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        bail!(
            "{} exists and is not empty: choose another --dir",
            dir.display()
        );
    }
    let (files, build): (&[File], &str) = match args.lang {
        Lang::Rust => (RUST, "cargo build --release"),
        Lang::Python => (PYTHON, "pip install -r requirements.txt && ./build.sh"),
        Lang::Js => (JS, "npm install && npm run build"),
    };
    for (path, text) in files {
        write(&dir.join(path), &names.render(text))?;
    }
    write(&dir.join("plugin.toml"), &names.manifest(args.lang))?;
    if args.lang == Lang::Rust {
        for (path, text) in SDK {
            write(&dir.join("vendor/sandcrab-sdk").join(path), text)?;
        }
    }
    if args.lang == Lang::Python {
        make_executable(&dir.join("build.sh"))?;
    }
    outln!(
        "created {} ({} tool plugin '{}', tool {})",
        dir.display(),
        match args.lang {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        },
        names.plugin,
        names.tool
    );
    outln!("build it:  cd {} && {build}", dir.display());
    outln!(
        "try it:    sandcrab tool call {} --args '{{\"path\": \"README.md\"}}' --plugins {}",
        names.tool,
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Refuse a tool name the host or a plugin it loads already has: the new
/// plugin's tool would never be called (the built-in one would).
async fn taken(tool: &str) -> anyhow::Result<()> {
    if crate::agent::host_tool_names().any(|name| name == tool) {
        bail!(
            "the tool name '{tool}' is sandcrab's own (a tool every session has): choose another plugin name"
        );
    }
    let host = super::super::setup::HostArgs::default().setup().await?.host;
    if let Some(owner) = host.tool_owner(tool) {
        bail!(
            "the tool name '{tool}' is taken by the plugin '{}' ({}): a second would never be called; choose another plugin name (e.g. {}-2)",
            owner.name(),
            owner.origin.label(),
            tool.replace('_', "-")
        );
    }
    Ok(())
}

/// The names a template is filled with.
struct Names {
    /// The plugin's name (`word-count`).
    plugin: String,
    /// Its tool's name, also the component's file stem (`word_count`).
    tool: String,
}

impl Names {
    fn new(name: &str) -> anyhow::Result<Names> {
        let valid = name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            bail!(
                "plugin name '{name}' must start with a letter and hold only lower case letters, digits and dashes (like word-count)"
            );
        }
        Ok(Names {
            plugin: name.to_string(),
            tool: name.replace('-', "_"),
        })
    }

    fn render(&self, template: &str) -> String {
        template
            .replace("{{name}}", &self.plugin)
            .replace("{{tool}}", &self.tool)
            .replace("{{crate}}", &self.tool)
            .replace("{{abi}}", ABI)
            .replace("{{sdk_version}}", sdk_version())
            .replace("{{componentize_py}}", COMPONENTIZE_PY)
            .replace("{{componentize_js}}", COMPONENTIZE_JS)
            .replace("{{jco}}", JCO)
            .replace("{{preview2_shim}}", PREVIEW2_SHIM)
    }

    /// `plugin.toml`: the component the build produces, read access to the
    /// workspace.
    fn manifest(&self, lang: Lang) -> String {
        let wasm = match lang {
            Lang::Rust => format!("target/wasm32-wasip2/release/{}.wasm", self.tool),
            Lang::Python | Lang::Js => format!("{}.wasm", self.tool),
        };
        format!(
            r#"# What this plugin is and what it asks the host for. The operator grants
# anything beyond reading the workspace in ~/.config/sandcrab/config.toml
# under [policy.plugins.{name}].
name = "{name}"
version = "0.1.0"
kind = "tool"
wasm = "{wasm}"
description = "Counts the lines, words and bytes of a file."

[capabilities]
workspace = "read"
# programs = ["git"]   # programs the plugin may run through `process`
"#,
            name = self.plugin
        )
    }
}

/// The vendored SDK's version (from its Cargo.toml).
fn sdk_version() -> &'static str {
    SDK[0]
        .1
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or("?")
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_turned_into_tool_names() {
        assert_eq!(Names::new("word-count").unwrap().tool, "word_count");
        for bad in ["Word", "-x", "9lives", "a b", "a_b", ""] {
            assert!(Names::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        let names = Names::new("demo").unwrap();
        for (path, text) in RUST.iter().chain(PYTHON).chain(JS) {
            let out = names.render(text);
            assert!(!out.contains("{{"), "{path} keeps a placeholder: {out}");
        }
        assert!(sdk_version().starts_with("0."), "{}", sdk_version());
    }

    /// The toolchain a new plugin pins is the one the repository's examples
    /// are built and tested with.
    #[test]
    fn scaffold_pins_match_the_examples() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/examples");
        let requirements =
            std::fs::read_to_string(examples.join("python-notes/requirements.txt")).unwrap();
        assert!(
            requirements.contains(&format!("componentize-py=={COMPONENTIZE_PY}")),
            "{requirements}"
        );
        let package: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(examples.join("js-json/package.json")).unwrap(),
        )
        .unwrap();
        let dev = &package["devDependencies"];
        assert_eq!(dev["@bytecodealliance/componentize-js"], COMPONENTIZE_JS);
        assert_eq!(dev["@bytecodealliance/jco"], JCO);
        assert_eq!(dev["@bytecodealliance/preview2-shim"], PREVIEW2_SHIM);
    }

    #[test]
    fn the_vendored_sdk_is_the_whole_sdk() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        let mut on_disk: Vec<String> = std::fs::read_dir(sdk.join("src"))
            .unwrap()
            .map(|e| format!("src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let mut vendored: Vec<String> = SDK
            .iter()
            .map(|(p, _)| p.to_string())
            .filter(|p| p.starts_with("src/"))
            .collect();
        vendored.sort();
        assert_eq!(vendored, on_disk, "list every SDK source file in SDK");
    }

    /// The SDK carries the frozen ABI its version names, byte for byte.
    #[test]
    fn the_sdk_wit_is_the_frozen_abi() {
        let sdk_wit = SDK.iter().find(|(p, _)| *p == "wit/plugin.wit").unwrap().1;
        assert_eq!(
            sdk_wit, PLUGIN_WIT,
            "copy wit/since_v0.3.0/plugin.wit to sdk/wit/"
        );
        // The SDK's minor version follows the ABI it carries.
        let abi_minor = ABI.rsplit_once('.').map(|(m, _)| m).unwrap();
        assert!(
            sdk_version().starts_with(&format!("{abi_minor}.")),
            "{}",
            sdk_version()
        );
        let shards_wit = SDK
            .iter()
            .find(|(p, _)| *p == "wit-shards/shards.wit")
            .unwrap()
            .1;
        assert_eq!(
            shards_wit,
            include_str!("../../../../../wit/shards/since_v0.1.0/shards.wit"),
            "copy wit/shards/since_v0.1.0/shards.wit to sdk/wit-shards/"
        );
    }
}
