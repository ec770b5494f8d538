//! The coding tools against real native peers, in one run, as ratios:
//! - `grep` (one call, in process) vs ripgrep (`rg -j1` and `rg`, whole
//!   process) over `$CARGO_HOME/registry/src` with a pattern that matches
//!   nothing (both walk and read everything), and over a generated tree
//!   with many matches (match counts compared);
//! - `read_file` of 1 MB vs a native read that numbers the lines;
//! - `glob **/*.rs` and `list_dir` vs a native walk of the same tree.
//!
//! Run: `cargo bench -p sandcrab --bench tools_vs_native` (ripgrep from
//! the `ripgrep` Debian package; without it the rg rows are skipped).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sandcrab::plugin::{PluginHost, PluginHostConfig, discovery};
use sandcrab::tools::{ToolCallRequest, ToolContext, ToolRegistry, dispatch};
use serde_json::{Value, json};

/// Median wall time of `runs` runs of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm caches
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

struct Tools {
    rt: tokio::runtime::Runtime,
    _host: PluginHost,
    registry: ToolRegistry,
}

impl Tools {
    fn on(workspace: &Path) -> Tools {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut host = PluginHost::new(PluginHostConfig::new(workspace)).unwrap();
        rt.block_on(host.load_all(&discovery::bundled()));
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
        assert!(!out.is_error, "{name}: {}", out.content);
        out.content
    }
}

fn rg(args: &[&str], dir: &Path) -> Option<String> {
    let out = Command::new("rg").args(args).arg(dir).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn report(name: &str, ours: Duration, peer_name: &str, peer: Duration) {
    println!(
        "{name}: sandcrab {:.1} ms, {peer_name} {:.1} ms, ratio {:.2}",
        ours.as_secs_f64() * 1e3,
        peer.as_secs_f64() * 1e3,
        ours.as_secs_f64() / peer.as_secs_f64()
    );
}

fn grep_rows(label: &str, dir: &Path, pattern: &str, runs: usize) {
    let tools = Tools::on(dir);
    let args = json!({"pattern": pattern, "max_results": 10_000_000});
    let ours = tools.call("grep", args.clone());
    let our_count = if ours.starts_with("No matches") {
        0
    } else {
        ours.lines().count()
    };
    let t_ours = median(runs, || {
        tools.call("grep", args.clone());
    });
    let Some(counts) = rg(&["-j1", "-c", "--no-messages", pattern], dir) else {
        println!(
            "{label}: sandcrab {:.1} ms ({our_count} matches); ripgrep not installed (apt-get install ripgrep)",
            t_ours.as_secs_f64() * 1e3
        );
        return;
    };
    let rg_count: usize = counts
        .lines()
        .filter_map(|l| l.rsplit(':').next()?.parse::<usize>().ok())
        .sum();
    println!("{label}: matching lines: sandcrab {our_count}, ripgrep {rg_count}");
    let t_rg1 = median(runs, || {
        rg(&["-j1", "-c", "--no-messages", pattern], dir);
    });
    let t_rg = median(runs, || {
        rg(&["-c", "--no-messages", pattern], dir);
    });
    report(&format!("{label} (one thread)"), t_ours, "rg -j1", t_rg1);
    report(&format!("{label} (all cores)"), t_ours, "rg", t_rg);
    // Where the time goes: the same walk with no file read (a glob filter
    // that matches nothing), against rg listing the files.
    let walk_only = json!({"pattern": pattern, "glob_filter": "*.zq9none"});
    let t_walk = median(runs, || {
        tools.call("grep", walk_only.clone());
    });
    let t_rg_files = median(runs, || {
        rg(&["-j1", "--files"], dir);
    });
    report(
        &format!("{label}: the walk alone"),
        t_walk,
        "rg -j1 --files",
        t_rg_files,
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

fn native_walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            if e.file_name() != ".git" {
                native_walk(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let registry_src = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("registry/src"))
        .filter(|p| p.is_dir());
    match &registry_src {
        Some(dir) => grep_rows("grep no match, registry/src", dir, "zq9_no_such_token_x", 5),
        None => println!("grep over registry/src: skipped ($CARGO_HOME/registry/src is absent)"),
    }
    let tree = many_matches_tree();
    grep_rows("grep many matches, 3,000 files", tree.path(), "TODO\\(", 7);

    // read_file 1 MB.
    let mut big = String::new();
    for i in 0..20_000 {
        writeln!(
            big,
            "line {i:06} of a one megabyte file, with some filler text"
        )
        .unwrap();
    }
    std::fs::write(tree.path().join("big.txt"), &big).unwrap();
    let tools = Tools::on(tree.path());
    let read = json!({"file_path": "big.txt", "limit": 100_000});
    let t_ours = median(21, || {
        tools.call("read_file", read.clone());
    });
    let t_native = median(21, || {
        let text = std::fs::read_to_string(tree.path().join("big.txt")).unwrap();
        let mut out = String::with_capacity(text.len() + 200_000);
        for (i, line) in text.lines().enumerate() {
            let _ = writeln!(out, "{:>6}\t{line}", i + 1);
        }
        std::hint::black_box(out);
    });
    report("read_file 1 MB", t_ours, "native read", t_native);

    // glob and list_dir vs a native walk.
    let t_walk = median(11, || {
        let mut v = Vec::new();
        native_walk(tree.path(), &mut v);
        std::hint::black_box(v);
    });
    let t_glob = median(11, || {
        tools.call("glob", json!({"pattern": "**/*.rs"}));
    });
    report("glob **/*.rs, 3,000 files", t_glob, "native walk", t_walk);
    let t_list = median(11, || {
        tools.call("list_dir", json!({"path": ".", "depth": 10}));
    });
    report(
        "list_dir depth 10, 3,000 files",
        t_list,
        "native walk",
        t_walk,
    );
}
