//! A sharded search, merged as the host merges it (all pieces ordered by
//! file number, then line), answers exactly what the whole search answers:
//! same matches, same order, same cap, ignore rules and binary files alike.

use sandcrab_sdk::CallContext;

use super::{Args, answer, search};
use crate::test_tree::Tree;
use crate::walk::Part as Shard;

fn context(tree: &Tree) -> CallContext {
    let root = tree.0.to_str().unwrap().to_string();
    CallContext {
        workspace_root: root.clone(),
        host_workspace_root: "/host/project".into(),
        session_id: "s".into(),
        call_id: "c".into(),
        working_dir: root,
        sandbox: sandcrab_sdk::SandboxMode::Locked,
        protected_paths: Vec::new(),
        time_budget_ms: 10_000,
        background: false,
    }
}

fn args(json: serde_json::Value) -> Args {
    serde_json::from_value(json).unwrap()
}

fn whole(args: &Args, ctx: &CallContext) -> String {
    let found = search(args, ctx, Shard::WHOLE).unwrap();
    answer(args, ctx, found.matches().map(|m| m.text), found.len()).unwrap()
}

/// Every shard's matches, ordered as the host orders pieces (stable by
/// file number, then line), then merged.
fn sharded(args: &Args, ctx: &CallContext, count: u32) -> (String, Vec<usize>) {
    let mut pieces = Vec::new();
    let mut per_shard = Vec::new();
    for index in 0..count {
        let found = search(args, ctx, Shard { index, count }).unwrap();
        per_shard.push(found.len());
        pieces.extend(
            found
                .matches()
                .map(|m| (m.file, m.line, m.text.to_string())),
        );
    }
    pieces.sort_by_key(|p| (p.0, p.1));
    let text = answer(args, ctx, pieces.iter().map(|p| p.2.as_str()), pieces.len()).unwrap();
    (text, per_shard)
}

fn tree() -> Tree {
    let t = Tree::new("grep-shards");
    t.file(".gitignore", "target/\n*.log\n")
        .file("target/out.rs", "needle in ignored output\n")
        .file("build.log", "needle in a log\n")
        .file("blob.bin", "needle\0binary\n")
        .file("crlf.txt", "needle one\r\nplain\r\nneedle two\r\n");
    for i in 0..23 {
        let mut body = String::new();
        for line in 0..(i % 5 + 1) {
            body.push_str(&format!("line {line} of {i}\nneedle {i}.{line}\n"));
        }
        t.file(&format!("src/m{}/f{i:02}.rs", i % 4), &body);
        t.file(
            &format!("docs/d{i:02}.md", i = i * 7 % 23),
            "NEEDLE upper\nx\n",
        );
    }
    t.file("src/m1/.gitignore", "f05.rs\n");
    // Enough directories that shards split the tree at pkg/pNN and src/mN.
    for p in 0..40 {
        t.file(
            &format!("pkg/p{p:02}/lib.rs"),
            &format!("needle in package {p}\nplain\nneedle again\n"),
        );
    }
    t.file("pkg/p07/.gitignore", "lib.rs\n");
    t
}

#[test]
fn shards_merged_in_order_answer_as_the_whole_search() {
    let t = tree();
    let ctx = context(&t);
    let cases = [
        serde_json::json!({"pattern": "needle"}),
        serde_json::json!({"pattern": "needle", "max_results": 1}),
        serde_json::json!({"pattern": "needle", "max_results": 7}),
        serde_json::json!({"pattern": "needle", "max_results": 1000}),
        serde_json::json!({"pattern": "needle", "case_insensitive": true, "max_results": 40}),
        serde_json::json!({"pattern": "^needle \\d+$", "max_results": 1000}),
        serde_json::json!({"pattern": "needle", "glob_filter": "*.rs"}),
        serde_json::json!({"pattern": "needle", "path": "src/m2"}),
        serde_json::json!({"pattern": "needle", "path": "crlf.txt"}),
        serde_json::json!({"pattern": "absent"}),
    ];
    for case in cases {
        let args = args(case.clone());
        let expected = whole(&args, &ctx);
        assert_eq!(
            sandcrab_sdk::run_whole::<super::Grep>(&args, &ctx).unwrap(),
            expected,
            "{case}: the SDK's whole run (shard 0 of 1, then merge)"
        );
        for count in [2, 3, 4, 7, 64] {
            let (got, _) = sharded(&args, &ctx, count);
            assert_eq!(got, expected, "{case} in {count} shards");
        }
    }
}

#[test]
fn the_whole_search_keeps_its_rules_and_shards_split_the_work() {
    let t = tree();
    let ctx = context(&t);
    let args = args(serde_json::json!({"pattern": "needle", "max_results": 1000}));
    let text = whole(&args, &ctx);
    for absent in ["target/", "build.log", "blob.bin", "src/m1/f05.rs", "docs/"] {
        assert!(!text.contains(absent), "{absent} in:\n{text}");
    }
    assert!(text.contains("crlf.txt:3:needle two\n"), "{text}");
    let paths: Vec<&str> = text.lines().map(|l| l.split(':').next().unwrap()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "walk order");

    let (_, per_shard) = sharded(&args, &ctx, 3);
    assert!(per_shard.iter().all(|n| *n > 0), "{per_shard:?}");
    assert_eq!(per_shard.iter().sum::<usize>(), text.lines().count());
}

#[test]
fn a_shard_stops_at_one_match_over_the_cap() {
    let t = tree();
    let ctx = context(&t);
    let args = args(serde_json::json!({"pattern": "needle", "max_results": 2}));
    for index in 0..3 {
        let found = search(&args, &ctx, Shard { index, count: 3 }).unwrap();
        assert_eq!(found.len(), 3);
        assert!(found.stopped_early(&args));
    }
    assert!(whole(&args, &ctx).ends_with("[results capped at 2 matches; narrow the pattern, path or glob_filter, or raise max_results]\n"));
}
