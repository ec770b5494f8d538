//! The coding tools against real native peers, in one run, as ratios:
//! - `grep` (one call, in process; in one instance vs `rg -j1`, sharded
//!   over one instance per core vs `rg`; ripgrep as a whole process) over `$CARGO_HOME/registry/src` with a pattern that matches
//!   nothing (both walk and read everything), and over a generated tree
//!   with many matches (match counts compared);
//! - `read_file` of 1 MB vs a native read that numbers the lines;
//! - `glob **/*.rs` and `list_dir` vs a native walk of the same tree.
//!
//! Run: `cargo bench -p sandcrab --bench tools_vs_native [-- ROW…]`
//! (ROW: `grep`, `read`, `glob`, `list`; all by default). ripgrep comes
//! from the `ripgrep` Debian package; without it the rg rows are skipped.
//!
//! `SANDCRAB_BENCH_CODING_TOOLS=path/to/coding_tools.wasm` measures that
//! build of the coding tools instead of the one embedded in the binary, so
//! a guest change is measured without relinking the host.

// A benchmark report and test diagnostics are our own text, not a peer's.
#![allow(clippy::disallowed_macros)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sandcrab::plugin::{PluginHost, PluginHostConfig, PluginSource, default_max_shards, discovery};
use sandcrab::tools::{ToolCallRequest, ToolContext, ToolRegistry, dispatch};
use sandcrab_bundled_plugins::BundledPlugin;
use serde_json::{Value, json};

#[path = "peers/native_read.rs"]
mod peers;
use peers::native_read;

/// Ours and a peer, run alternately `runs` times (so both see the same
/// machine noise): their median times and the median of the per-pair
/// ratios.
fn paired(
    runs: usize,
    mut ours: impl FnMut(),
    mut peer: impl FnMut(),
) -> (Duration, Duration, f64) {
    ours();
    peer();
    let mut a = Vec::with_capacity(runs);
    let mut b = Vec::with_capacity(runs);
    let mut ratios = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        ours();
        let t_ours = t.elapsed();
        let t = Instant::now();
        peer();
        let t_peer = t.elapsed();
        ratios.push(t_ours.as_secs_f64() / t_peer.as_secs_f64());
        a.push(t_ours);
        b.push(t_peer);
    }
    a.sort();
    b.sort();
    ratios.sort_by(f64::total_cmp);
    (a[runs / 2], b[runs / 2], ratios[runs / 2])
}

struct Tools {
    rt: tokio::runtime::Runtime,
    _host: PluginHost,
    registry: ToolRegistry,
}

impl Tools {
    /// The tools on `workspace`, a shardable call spread over at most
    /// `max_shards` instances.
    fn on(workspace: &Path, max_shards: usize) -> Tools {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut config = PluginHostConfig::new(workspace);
        config.max_shards = max_shards;
        let mut host = PluginHost::new(config).unwrap();
        rt.block_on(host.load_all(&plugins()));
        let registry = ToolRegistry::from_plugins(host.plugins());
        Tools {
            rt,
            _host: host,
            registry,
        }
    }

    fn call(&self, name: &str, args: Value) -> String {
        let call = ToolCallRequest {
            id: "b".into(),
            name: name.into(),
            arguments: args,
        };
        let out = self
            .rt
            .block_on(dispatch(&self.registry, &call, &ToolContext::default()));
        assert!(!out.is_error(), "{name}: {}", out.content);
        out.content
    }
}

/// The bundled plugins, with the coding tools replaced by the build named
/// in `SANDCRAB_BENCH_CODING_TOOLS` when it is set.
fn plugins() -> Vec<PluginSource> {
    let Some(path) = std::env::var_os("SANDCRAB_BENCH_CODING_TOOLS") else {
        return discovery::bundled();
    };
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("SANDCRAB_BENCH_CODING_TOOLS: {}: {e}", path.display()));
    discovery::bundled()
        .into_iter()
        .map(|source| match source {
            PluginSource::Bundled(b) if b.name == "coding-tools" => {
                PluginSource::Bundled(Box::leak(Box::new(BundledPlugin {
                    wasm: wasm.clone().leak(),
                    ..*b
                })))
            }
            other => other,
        })
        .collect()
}

/// Whether the row `name` was asked for (every row when none was named).
fn wanted(name: &str) -> bool {
    let rows: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    rows.is_empty() || rows.iter().any(|r| r == name)
}

fn rg(args: &[&str], dir: &Path) -> Option<String> {
    let out = Command::new("rg").args(args).arg(dir).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn report(name: &str, peer_name: &str, (ours, peer, ratio): (Duration, Duration, f64)) {
    println!(
        "{name}: sandcrab {:.1} ms, {peer_name} {:.1} ms, ratio {ratio:.2} (median of paired runs)",
        ours.as_secs_f64() * 1e3,
        peer.as_secs_f64() * 1e3,
    );
}

fn grep_rows(label: &str, dir: &Path, pattern: &str, runs: usize) {
    // One instance per call, and one per core (sandcrab:shards).
    let tools = Tools::on(dir, 1);
    let cores = default_max_shards();
    let sharded = Tools::on(dir, cores);
    let args = json!({"pattern": pattern, "max_results": 10_000_000});
    let ours = tools.call("grep", args.clone());
    assert_eq!(
        ours,
        sharded.call("grep", args.clone()),
        "sharded and whole answers differ"
    );
    let our_count = if ours.starts_with("No matches") {
        0
    } else {
        ours.lines().count()
    };
    let Some(counts) = rg(&["-j1", "-c", "--no-messages", pattern], dir) else {
        println!("{label}: {our_count} matches; ripgrep not installed (apt-get install ripgrep)",);
        return;
    };
    let rg_count: usize = counts
        .lines()
        .filter_map(|l| l.rsplit(':').next()?.parse::<usize>().ok())
        .sum();
    println!("{label}: matching lines: sandcrab {our_count}, ripgrep {rg_count}");
    // ripgrep prints what the tool returns: `path:line:text` per match.
    let ours = || {
        tools.call("grep", args.clone());
    };
    report(
        &format!("{label} (one thread)"),
        "rg -j1 -n",
        paired(runs, &ours, || {
            rg(
                &["-j1", "-n", "--no-heading", "--no-messages", pattern],
                dir,
            );
        }),
    );
    let ours_sharded = || {
        sharded.call("grep", args.clone());
    };
    report(
        &format!("{label} ({cores} shards)"),
        "rg -n",
        paired(runs, ours_sharded, || {
            rg(&["-n", "--no-heading", "--no-messages", pattern], dir);
        }),
    );
    // Where the time goes: the same walk with no file read (a glob filter
    // that matches nothing), against rg listing the files.
    let walk_only = json!({"pattern": pattern, "glob_filter": "*.zq9none"});
    report(
        &format!("{label}: the walk alone"),
        "rg -j1 --files",
        paired(
            runs,
            || {
                tools.call("grep", walk_only.clone());
            },
            || {
                rg(&["-j1", "--files"], dir);
            },
        ),
    );
}

/// A tree with many matches: 3,000 files, every tenth line matching.
fn many_matches_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in 0..30 {
        let sub = dir.path().join(format!("src/m{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            let mut text = String::new();
            for l in 0..100 {
                if l % 10 == 0 {
                    writeln!(text, "    // TODO({d}.{f}.{l}): handle the error").unwrap();
                } else {
                    writeln!(text, "    let value_{l} = compute({d}, {f}, {l});").unwrap();
                }
            }
            std::fs::write(sub.join(format!("f{f}.rs")), text).unwrap();
        }
    }
    dir
}

/// What `glob **/*.rs` does, natively: walk, match names, read each
/// match's modification time, newest first.
fn native_glob(dir: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<(std::time::SystemTime, PathBuf)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name();
            if kind.is_dir() {
                if name != ".git" {
                    walk(&e.path(), out);
                }
            } else if kind.is_file() && name.as_encoded_bytes().ends_with(b".rs") {
                let path = e.path();
                let modified = std::fs::symlink_metadata(&path)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                out.push((modified, path));
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    // The tool lists the first 1,000 and says how many more there are.
    let mut out: String = found
        .iter()
        .take(1000)
        .map(|(_, p)| format!("{}\n", p.strip_prefix(dir).unwrap().display()))
        .collect();
    if found.len() > 1000 {
        out.push_str(&format!("[{} more files not shown]\n", found.len() - 1000));
    }
    out
}

/// `glob **/*.rs` over `dir` against [`native_glob`].
fn glob_row(name: &str, tools: &Tools, dir: &Path) {
    let args = json!({"pattern": "**/*.rs"});
    let ours = tools.call("glob", args.clone());
    let native = native_glob(dir);
    assert_eq!(
        ours.lines().count(),
        native.lines().count(),
        "{name}: as many files"
    );
    report(
        name,
        "native walk + mtime + sort",
        paired(
            21,
            || {
                tools.call("glob", args.clone());
            },
            || {
                std::hint::black_box(native_glob(dir));
            },
        ),
    );
}

/// What `list_dir` does, natively: names sorted, directories marked,
/// nested entries indented, at most 2,000 entries.
fn native_list(dir: &Path, level: usize, depth: usize, out: &mut String, count: &mut usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(String, bool)> = entries
        .flatten()
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    entries.sort();
    for (name, is_dir) in entries {
        if *count >= 2000 {
            return;
        }
        *count += 1;
        for _ in 0..level {
            out.push_str("  ");
        }
        out.push_str(&name);
        out.push_str(if is_dir { "/\n" } else { "\n" });
        if is_dir && level < depth && name != ".git" {
            native_list(&dir.join(&name), level + 1, depth, out, count);
        }
    }
}

fn main() {
    let registry_src = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("registry/src"))
        .filter(|p| p.is_dir());
    let tree = many_matches_tree();
    if wanted("grep") {
        match &registry_src {
            Some(dir) => grep_rows("grep no match, registry/src", dir, "zq9_no_such_token_x", 9),
            None => {
                println!("grep over registry/src: skipped ($CARGO_HOME/registry/src is absent)")
            }
        }
        grep_rows("grep many matches, 3,000 files", tree.path(), "TODO\\(", 15);
    }

    let mut big = String::new();
    for i in 0..20_000 {
        writeln!(
            big,
            "line {i:06} of a one megabyte file, with some filler text"
        )
        .unwrap();
    }
    std::fs::write(tree.path().join("big.txt"), &big).unwrap();
    let tools = Tools::on(tree.path(), 1);
    if wanted("read") {
        let big = tree.path().join("big.txt");
        // The whole file, and the tool's default window (the first 2,000
        // lines numbered, the others counted), as an agent reads it.
        for (row, limit) in [
            ("read_file 1 MB, every line", 100_000),
            ("read_file 1 MB, first 2,000 lines", 2_000),
        ] {
            let read = json!({"file_path": "big.txt", "limit": limit});
            let ours = tools.call("read_file", read.clone());
            let native = native_read(&big, limit);
            assert_eq!(
                ours.lines().next(),
                native.lines().next(),
                "{row}: the same first line"
            );
            report(
                row,
                "native read + numbering",
                paired(
                    31,
                    || {
                        tools.call("read_file", read.clone());
                    },
                    || {
                        std::hint::black_box(native_read(&big, limit));
                    },
                ),
            );
        }
    }
    if wanted("glob") {
        glob_row("glob **/*.rs, 3,000 files", &tools, tree.path());
        match &registry_src {
            Some(dir) => glob_row("glob **/*.rs, registry/src", &Tools::on(dir, 1), dir),
            None => {
                println!("glob over registry/src: skipped ($CARGO_HOME/registry/src is absent)")
            }
        }
    }
    if wanted("list") {
        let listing = |out: &mut String| {
            let mut count = 0;
            native_list(tree.path(), 1, 10, out, &mut count);
        };
        let ours = tools.call("list_dir", json!({"path": ".", "depth": 10}));
        let mut native = String::new();
        listing(&mut native);
        assert!(ours.contains(&native), "list_dir: the same listing");
        report(
            "list_dir depth 10, 2,000 entries",
            "native listing",
            paired(
                21,
                || {
                    tools.call("list_dir", json!({"path": ".", "depth": 10}));
                },
                || {
                    let mut out = String::new();
                    listing(&mut out);
                    std::hint::black_box(out);
                },
            ),
        );
    }
}
