//! What counting a workspace's git metadata costs (done before and after
//! every program that may write the workspace, see
//! `sandcrab::kept::Census`), against `find -name .git`, the plain tool
//! for the same walk, on the same tree in the same run: a tree of 10,000
//! folders (a mid-sized repository) with a repository at its root and two
//! nested ones. The first count reads every folder; the counts after it
//! (before and after each program) read only folders that changed.
//!
//! Run: `cargo bench -p sandcrab --bench git_census`.

use std::path::Path;
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::kept::Census;

/// 10 × 10 × 10 × 10 folders, a file in each leaf.
fn tree(root: &Path) {
    for a in 0..10 {
        for b in 0..10 {
            for c in 0..10 {
                for d in 0..10 {
                    let dir = root.join(format!("a{a}/b{b}/c{c}/d{d}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(dir.join("f.rs"), "").unwrap();
                }
            }
        }
    }
    for repo in [".", "a1", "a2/b3"] {
        let git = root.join(repo).join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
    }
}

fn census(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree(&root);
    let mut group = c.benchmark_group("git_census_10k_folders");
    group.sample_size(20);
    group.bench_function("sandcrab_census", |b| {
        b.iter(|| {
            let census = Census::take(&root);
            assert!(census.complete);
        })
    });
    let first = Census::take(&root);
    group.bench_function("sandcrab_recount_unchanged", |b| {
        b.iter(|| {
            let census = first.recount(&root);
            assert!(census.complete);
        })
    });
    group.bench_function("find_name_git", |b| {
        b.iter(|| {
            let out = Command::new("find")
                .arg(&root)
                .args(["-name", ".git", "-prune"])
                .output()
                .unwrap();
            assert!(out.status.success());
        })
    });
    group.finish();
}

criterion_group!(benches, census);
criterion_main!(benches);
