//! The walk against ripgrep's own walker (the `ignore` crate's
//! `WalkBuilder` with the settings the tools used before): same files,
//! same order, on a tree whose ignore files exercise precedence,
//! negation, anchoring, directory patterns, CRLF and a BOM.

use std::path::Path;

use super::{Flow, Part, each_file_of, each_file_split};
use crate::test_tree::Tree;

/// What ripgrep's walker yields with the tools' settings.
fn reference(root: &Path) -> Vec<String> {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path().to_string_lossy().into_owned())
        .collect()
}

fn ours(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    each_file_of(root.to_str().unwrap(), Part::WHOLE, |f, _| {
        found.push(f.path.to_string());
        Flow::Continue
    })
    .unwrap();
    found
}

fn tricky_tree() -> Tree {
    let t = Tree::new("tricky");
    t.file(
        ".gitignore",
        "# build output\ntarget/\n*.log\n!keep.log\n/anchored.txt\nsub/**/deep.txt\ntrailing.txt   \n",
    )
    .file(".ignore", "ignored_by_ignore.txt\n!whitelisted.log\n")
    .file("sub/.gitignore", "!*.log\nlocal.txt\n")
    .file("sub/nested/.gitignore", "/x.txt\r\nonly_dir/\r\n")
    .file("bom/.gitignore", "\u{feff}bommed.txt\n")
    .file("bom/bommed.txt", "")
    .file("bom/kept.txt", "")
    .file("a.txt", "")
    .file("B.txt", "")
    .file("a-b", "")
    .file("a.b", "")
    .file("a/inner.txt", "")
    .file("b.log", "")
    .file("keep.log", "")
    .file("whitelisted.log", "")
    .file("anchored.txt", "")
    .file("trailing.txt", "")
    .file("ignored_by_ignore.txt", "")
    .file("target/x.rs", "")
    .file("sub/anchored.txt", "")
    .file("sub/target/y.rs", "")
    .file("sub/a/deep.txt", "")
    .file("sub/b.log", "")
    .file("sub/local.txt", "")
    .file("sub/nested/x.txt", "")
    .file("sub/nested/y/x.txt", "")
    .file("sub/nested/only_dir", "a file, not the directory the rule names")
    .file("sub/nested/z/only_dir/inside.txt", "")
    .file(".git/config", "")
    .file("worktree/.git", "gitdir: elsewhere")
    .file("worktree/code.rs", "")
    .file(".hidden/file", "");
    std::os::unix::fs::symlink(t.0.join("a.txt"), t.0.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(t.0.join("sub"), t.0.join("linkdir")).unwrap();
    t
}

#[test]
fn the_walk_yields_what_ripgreps_walker_yields_in_the_same_order() {
    let tree = tricky_tree();
    let expected = reference(&tree.0);
    assert_eq!(ours(&tree.0), expected);
    // The tree really exercises the rules (the reference is not vacuous).
    let shown: Vec<&str> = expected
        .iter()
        .map(|p| p.strip_prefix(tree.0.to_str().unwrap()).unwrap())
        .collect();
    for kept in [
        "/keep.log",
        "/whitelisted.log",
        "/sub/b.log",
        "/sub/anchored.txt",
        "/sub/nested/y/x.txt",
        "/sub/nested/only_dir",
        "/bom/kept.txt",
        "/.hidden/file",
    ] {
        assert!(shown.contains(&kept), "{kept} missing from {shown:?}");
    }
    for gone in [
        "/b.log",
        "/anchored.txt",
        "/target/x.rs",
        "/sub/target/y.rs",
        "/sub/a/deep.txt",
        "/sub/local.txt",
        "/sub/nested/x.txt",
        "/sub/nested/z/only_dir/inside.txt",
        "/ignored_by_ignore.txt",
        "/trailing.txt",
        "/bom/bommed.txt",
        "/link.txt",
        "/.git/config",
        "/worktree/.git",
    ] {
        assert!(!shown.contains(&gone), "{gone} listed: {shown:?}");
    }
}

#[test]
fn a_walk_below_the_root_ignores_the_ignore_files_above_it() {
    let tree = tricky_tree();
    let sub = tree.0.join("sub");
    assert_eq!(ours(&sub), reference(&sub));
    assert!(ours(&sub).iter().any(|p| p.ends_with("/sub/target/y.rs")));
}

#[test]
fn stopping_ends_the_walk_at_once() {
    let tree = tricky_tree();
    let mut seen = 0;
    each_file_of(tree.0.to_str().unwrap(), Part::WHOLE, |_, _| {
        seen += 1;
        if seen == 3 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    })
    .unwrap();
    assert_eq!(seen, 3);
}

#[test]
fn an_ignore_file_that_is_not_a_regular_file_is_never_opened() {
    let tree = Tree::new("fifo");
    tree.file("sub/a.txt", "");
    let fifo = std::ffi::CString::new(tree.0.join("sub/.gitignore").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a temp path (a blocking open would hang this test).
    assert_eq!(unsafe { libc_mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let found = ours(&tree.0);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("/sub/a.txt"));
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

/// Every part's files with their keys, aiming for `units` units a part.
fn parts(root: &Path, count: u32, units: usize) -> Vec<Vec<(u64, String)>> {
    (0..count)
        .map(|index| {
            let mut found = Vec::new();
            let part = Part { index, count };
            each_file_split(root.to_str().unwrap(), part, units, |f, key| {
                found.push((key, f.path.to_string()));
                Flow::Continue
            })
            .unwrap();
            found
        })
        .collect()
}

/// A wide tree (like a source cache: one directory holding many) beside
/// the tricky one's rules, a deep narrow branch and files at every level.
fn wide_tree() -> Tree {
    let t = tricky_tree();
    for i in 0..45 {
        t.file(&format!("cache/crate{i:02}/src/lib.rs"), "");
        for j in 0..(i % 4) {
            t.file(&format!("cache/crate{i:02}/src/m{j}.rs"), "");
        }
        t.file(&format!("cache/crate{i:02}/Cargo.toml"), "");
    }
    t.file("cache/crate07/.gitignore", "src/m1.rs\n")
        .file("cache/README", "")
        .file("deep/a/b/c/d/e/f/g/h/i/j/leaf.txt", "");
    t
}

#[test]
fn parts_of_a_walk_visit_every_file_once_and_their_keys_give_the_whole_order() {
    for tree in [tricky_tree(), wide_tree()] {
        let whole = ours(&tree.0);
        for (count, units) in (1..=9).flat_map(|c| [(c, 1), (c, 16), (c, 256)]) {
            let parts = parts(&tree.0, count, units);
            let mut merged: Vec<(u64, String)> = parts.iter().flatten().cloned().collect();
            merged.sort_by_key(|(key, _)| *key);
            let merged: Vec<String> = merged.into_iter().map(|(_, path)| path).collect();
            assert_eq!(
                merged, whole,
                "{count} parts ({units} units) of {:?}",
                tree.0
            );
            for part in &parts {
                assert!(
                    part.windows(2).all(|w| w[0].0 < w[1].0),
                    "keys rise in walk order"
                );
            }
        }
    }
}

#[test]
fn a_part_walks_into_its_own_subtrees_only() {
    let tree = wide_tree();
    // Two parts split at cache/crateNN: each crate is in one part, whole,
    // and the crates are shared out (by a hash of their paths).
    let parts = parts(&tree.0, 2, 16);
    let crate_of = |path: &str| {
        path.split("/cache/")
            .nth(1)
            .and_then(|rest| rest.strip_prefix("crate"))
            .map(|rest| rest[..2].to_string())
    };
    let mut owner = std::collections::HashMap::new();
    let mut per_part = [0usize; 2];
    for (index, part) in parts.iter().enumerate() {
        for (_, path) in part {
            if let Some(krate) = crate_of(path) {
                let first = *owner.entry(krate.clone()).or_insert(index);
                assert_eq!(first, index, "crate{krate} split between parts");
                if first == index && path.ends_with("/Cargo.toml") {
                    per_part[index] += 1;
                }
            }
        }
    }
    assert_eq!(owner.len(), 45);
    assert!(per_part.iter().all(|n| *n >= 12), "{per_part:?}");
    assert!(parts.iter().all(|p| !p.is_empty()), "every part has work");
}
