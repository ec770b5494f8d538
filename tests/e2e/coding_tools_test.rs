//! Every coding tool through the real WASM plugin and runtime on a temp
//! workspace, including every escape attempt.

use std::time::{Duration, Instant};

use sandcrab::plugin::Policy;
use sandcrab::tools::ToolOutcome;
use serde_json::json;

use crate::support::{Scene, coding_tools, gone_soon, run_tool};

fn ok(outcome: ToolOutcome) -> String {
    assert!(!outcome.is_error(), "unexpected error: {}", outcome.content);
    outcome.content
}

fn err(outcome: ToolOutcome) -> String {
    assert!(
        outcome.is_error(),
        "expected an error, got: {}",
        outcome.content
    );
    outcome.content
}

#[tokio::test]
async fn read_file_numbers_lines_from_offset_with_limit() {
    let scene = Scene::new();
    let ten: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(scene.workspace().join("ten.txt"), ten).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = ok(run_tool(
        &tools,
        "read_file",
        json!({"file_path": "ten.txt", "offset": 3, "limit": 2}),
    )
    .await);
    assert!(out.starts_with("     3\tline 3\n     4\tline 4\n"), "{out}");
    assert!(
        out.contains("6 more lines") && out.contains("offset=5"),
        "{out}"
    );
    let all = ok(run_tool(&tools, "read_file", json!({"file_path": "ten.txt"})).await);
    assert_eq!(all.lines().count(), 10);
    assert!(all.ends_with("    10\tline 10\n"));
    // The host's path of the workspace works as an absolute path.
    let abs = scene.workspace().join("ten.txt").display().to_string();
    assert_eq!(
        ok(run_tool(&tools, "read_file", json!({"file_path": abs})).await),
        all
    );
}

#[tokio::test]
async fn read_file_refuses_missing_directories_and_binaries() {
    let scene = Scene::new();
    std::fs::create_dir(scene.workspace().join("dir")).unwrap();
    std::fs::write(scene.workspace().join("blob.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    assert!(
        err(run_tool(&tools, "read_file", json!({"file_path": "nope.txt"})).await)
            .contains("file not found: nope.txt")
    );
    assert!(
        err(run_tool(&tools, "read_file", json!({"file_path": "dir"})).await)
            .contains("dir is a directory")
    );
    assert!(
        err(run_tool(&tools, "read_file", json!({"file_path": "blob.bin"})).await)
            .contains("binary")
    );
}

#[tokio::test]
async fn write_file_creates_parent_directories() {
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = ok(run_tool(
        &tools,
        "write_file",
        json!({"file_path": "a/b/c/file.txt", "content": "deep"}),
    )
    .await);
    assert!(
        out.contains("a/b/c/file.txt") && out.contains("4 bytes"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("a/b/c/file.txt")).unwrap(),
        "deep"
    );
}

#[tokio::test]
async fn edit_file_replaces_and_reports_missing_or_ambiguous() {
    let scene = Scene::new();
    let file = scene.workspace().join("code.rs");
    std::fs::write(&file, "let x = 1;\nlet y = 1;\n").unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let e = err(run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "code.rs", "old_string": "z = 1", "new_string": "z = 2"}),
    )
    .await);
    assert!(e.contains("old_string not found in code.rs"), "{e}");
    let e = err(run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "code.rs", "old_string": "= 1;", "new_string": "= 2;"}),
    )
    .await);
    assert!(e.contains("old_string is not unique (2 matches)"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "let x = 1;\nlet y = 1;\n",
        "failed edits change nothing"
    );
    ok(run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "code.rs", "old_string": "let y = 1;", "new_string": "let y = 2;"}),
    )
    .await);
    ok(run_tool(&tools, "edit_file", json!({"file_path": "code.rs", "old_string": "let", "new_string": "const", "replace_all": true})).await);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "const x = 1;\nconst y = 2;\n"
    );
}

#[tokio::test]
async fn apply_patch_adds_updates_deletes_and_moves() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::write(
        ws.join("main.py"),
        "def a():\n    return 1\n\ndef b():\n    return 2\n",
    )
    .unwrap();
    std::fs::write(ws.join("old.txt"), "bye\n").unwrap();
    std::fs::write(ws.join("mv.txt"), "one\ntwo\n").unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n*** Update File: main.py\n@@ def a():\n-    return 1\n+    return 10\n@@ def b():\n-    return 2\n+    return 20\n*** Delete File: old.txt\n*** Update File: mv.txt\n*** Move to: moved/mv.txt\n@@\n one\n-two\n+TWO\n*** End Patch";
    let out = ok(run_tool(&tools, "apply_patch", json!({ "patch": patch })).await);
    assert!(
        out.contains("A docs/new.md")
            && out.contains("M main.py")
            && out.contains("D old.txt")
            && out.contains("R mv.txt -> moved/mv.txt"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/new.md")).unwrap(),
        "# New\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("main.py")).unwrap(),
        "def a():\n    return 10\n\ndef b():\n    return 20\n"
    );
    assert!(!ws.join("old.txt").exists() && !ws.join("mv.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("moved/mv.txt")).unwrap(),
        "one\nTWO\n"
    );
}

#[tokio::test]
async fn apply_patch_is_all_or_nothing() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let original = "a\nb\nc\n";
    std::fs::write(ws.join("f.txt"), original).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let patch = "*** Begin Patch\n*** Add File: created.txt\n+x\n*** Update File: f.txt\n@@\n a\n-b\n+B\n@@\n-zzz\n+q\n*** End Patch";
    let e = err(run_tool(&tools, "apply_patch", json!({ "patch": patch })).await);
    assert!(
        e.contains("f.txt: hunk 2 of 2 did not match") && e.contains("No files were changed"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("f.txt")).unwrap(), original);
    assert!(!ws.join("created.txt").exists());
    let e = err(run_tool(&tools, "apply_patch", json!({ "patch": "not a patch" })).await);
    assert!(
        e.contains("invalid patch") && e.contains("Begin Patch"),
        "{e}"
    );
}

#[tokio::test]
async fn shell_reports_stdout_stderr_exit_code_and_duration() {
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = ok(run_tool(&tools, "shell", json!({"command": "echo hello"})).await);
    assert!(out.starts_with("hello\n"), "{out}");
    let status = out.lines().last().unwrap();
    assert!(status.starts_with("[exit code 0, "), "{status}");
    let ms: u64 = status
        .trim_start_matches("[exit code 0, ")
        .trim_end_matches(" ms]")
        .parse()
        .unwrap();
    assert!(ms > 0);
    let out = ok(run_tool(
        &tools,
        "shell",
        json!({"command": "echo out; echo oops >&2; exit 7"}),
    )
    .await);
    assert!(out.contains("out\n[stderr]\noops\n[exit code 7,"), "{out}");
    let pwd = ok(run_tool(&tools, "shell", json!({"command": "pwd"})).await);
    assert!(
        pwd.starts_with(&scene.workspace().display().to_string()),
        "{pwd}"
    );
}

#[tokio::test]
async fn shell_timeout_stops_the_command_promptly_and_leaves_nothing_behind() {
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let marker = format!("{}.{}", 30, std::process::id());
    let started = Instant::now();
    let out = ok(run_tool(&tools, "shell", json!({"command": format!("echo before; sleep {marker}; echo finished"), "timeout_ms": 100})).await);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.starts_with("before\n"), "partial output kept: {out}");
    assert!(!out.contains("finished"));
    assert!(
        out.contains("[ERROR: Command timed out after 100ms"),
        "{out}"
    );
    assert!(
        gone_soon(&format!("sleep {marker}")),
        "the sleep was left running"
    );
}

#[tokio::test]
async fn grep_and_glob_search_a_small_tree() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::create_dir_all(ws.join("src/nested")).unwrap();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "fn alpha() {}\nfn Beta() {}\n").unwrap();
    std::fs::write(ws.join("src/nested/deep.rs"), "// alpha here\n").unwrap();
    std::fs::write(ws.join("notes.md"), "alpha in prose\n").unwrap();
    std::fs::write(ws.join(".git/config"), "alpha in git\n").unwrap();
    std::fs::write(ws.join("bin.dat"), b"alpha\0binary").unwrap();
    std::fs::write(ws.join(".gitignore"), "ignored.txt\n").unwrap();
    std::fs::write(ws.join("ignored.txt"), "alpha ignored\n").unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;

    let out = ok(run_tool(&tools, "grep", json!({"pattern": "alpha"})).await);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "notes.md:1:alpha in prose",
            "src/lib.rs:1:fn alpha() {}",
            "src/nested/deep.rs:1:// alpha here"
        ]
    );
    let out = ok(run_tool(
        &tools,
        "grep",
        json!({"pattern": "beta", "case_insensitive": true, "glob_filter": "*.rs"}),
    )
    .await);
    assert_eq!(out, "src/lib.rs:2:fn Beta() {}\n");
    let out = ok(run_tool(
        &tools,
        "grep",
        json!({"pattern": "alpha", "path": "src", "max_results": 1}),
    )
    .await);
    assert!(out.contains("results capped at 1"), "{out}");
    assert!(err(run_tool(&tools, "grep", json!({"pattern": "("})).await).contains("invalid regex"));

    let out = ok(run_tool(&tools, "glob", json!({"pattern": "**/*.rs"})).await);
    let mut files: Vec<&str> = out.lines().collect();
    files.sort();
    assert_eq!(files, vec!["src/lib.rs", "src/nested/deep.rs"]);
    let out = ok(run_tool(&tools, "glob", json!({"pattern": "*.md"})).await);
    assert_eq!(out, "notes.md\n");

    let out = ok(run_tool(&tools, "list_dir", json!({"path": ".", "depth": 2})).await);
    assert!(out.contains("  src/\n    lib.rs\n    nested/\n"), "{out}");
    assert!(
        out.contains("  .git/\n") && !out.contains("config"),
        "{out}"
    );
}

#[tokio::test]
async fn grep_searches_large_text_files_to_their_end_and_skips_large_binary_ones() {
    let scene = Scene::new();
    let ws = scene.workspace();
    // Text past the tool's first read (64 KB) and past a second read.
    let mut big = "filler line without the word\n".repeat(10_000);
    big.push_str("the needle at the end\n");
    std::fs::write(ws.join("big.txt"), &big).unwrap();
    // Binary: a NUL early, the word far past the first read.
    let mut blob = b"\0header".to_vec();
    blob.extend(std::iter::repeat_n(b'x', 300_000));
    blob.extend(b"\nthe needle in a blob\n");
    std::fs::write(ws.join("big.bin"), &blob).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let out = ok(run_tool(&tools, "grep", json!({"pattern": "needle"})).await);
    assert_eq!(out, "big.txt:10001:the needle at the end\n");
}

#[tokio::test]
async fn glob_lists_newest_first() {
    let scene = Scene::new();
    let ws = scene.workspace();
    for (name, age) in [("old.txt", 300), ("new.txt", 0), ("mid.txt", 100)] {
        let path = ws.join(name);
        std::fs::write(&path, name).unwrap();
        let when = std::time::SystemTime::now() - Duration::from_secs(age);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    assert_eq!(
        ok(run_tool(&tools, "glob", json!({"pattern": "*.txt"})).await),
        "new.txt\nmid.txt\nold.txt\n"
    );
}

#[tokio::test]
async fn every_escape_attempt_is_refused() {
    let scene = Scene::new();
    std::fs::write(scene.outside().join("x"), "outside").unwrap();
    std::os::unix::fs::symlink("/etc", scene.workspace().join("etc")).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    for path in [
        "../outside/x",
        "/etc/passwd",
        "etc/passwd",
        "a/../../outside/x",
    ] {
        let e = err(run_tool(&tools, "read_file", json!({ "file_path": path })).await);
        assert!(
            !e.contains("root:") && !e.contains("outside\n"),
            "{path}: {e}"
        );
        assert!(
            e.contains("outside the workspace") || e.contains("denied by the sandbox"),
            "{path}: {e}"
        );
    }
    let e = err(run_tool(
        &tools,
        "write_file",
        json!({"file_path": "../outside/y", "content": "x"}),
    )
    .await);
    assert!(e.contains("outside the workspace"), "{e}");
    assert!(!scene.outside().join("y").exists());
    let e = err(run_tool(&tools, "grep", json!({"pattern": "root", "path": "/etc"})).await);
    assert!(e.contains("outside the workspace"), "{e}");
    let e = err(run_tool(&tools, "list_dir", json!({"path": "etc"})).await);
    assert!(!e.contains("passwd"), "{e}");
}

#[tokio::test]
async fn dispatch_reports_unknown_tools_and_bad_arguments() {
    let scene = Scene::new();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    assert_eq!(
        tools.names(),
        vec![
            "apply_patch",
            "edit_file",
            "glob",
            "grep",
            "list_dir",
            "read_file",
            "shell",
            "write_file"
        ]
    );
    assert!(err(run_tool(&tools, "nope", json!({})).await).starts_with("Unknown tool: nope"));
    let e = err(run_tool(&tools, "read_file", json!({"file_path": 5})).await);
    assert!(
        e.starts_with("Invalid arguments for read_file: file_path:"),
        "{e}"
    );
    let e = err(run_tool(
        &tools,
        "shell",
        json!({"command": "true", "timeout_ms": 700000}),
    )
    .await);
    assert!(e.contains("timeout_ms"), "{e}");
}

/// Every file under `dir`, sorted (to see that nothing was left behind).
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn apply_patch_changes_nothing_when_a_write_fails_midway() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join("b.txt"), "two\n").unwrap();
    // b.txt has another hard link: the write is refused when it is staged,
    // after a.txt and new/c.txt were already staged.
    std::fs::hard_link(ws.join("b.txt"), ws.join("b-link.txt")).unwrap();
    let before = listing(&ws);
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Add File: new/c.txt\n+three\n*** Update File: b.txt\n@@\n-two\n+TWO\n*** End Patch";
    let msg = err(run_tool(&tools, "apply_patch", json!({ "patch": patch })).await);
    assert!(msg.contains("hard links"), "{msg}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "two\n");
    assert_eq!(listing(&ws), before, "no file or directory was left behind");
}

#[tokio::test]
async fn apply_patch_composes_operations_on_one_file_and_keeps_crlf() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::write(ws.join("win.txt"), "alpha\r\nbeta\r\ngamma\r\n").unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let patch = "*** Begin Patch\n*** Update File: win.txt\n@@\n-alpha\n+ALPHA\n*** Update File: win.txt\n@@\n beta\n-gamma\n+GAMMA\n+delta\n*** Add File: new.txt\n+first\n*** Update File: new.txt\n@@\n first\n+second\n*** End Patch";
    ok(run_tool(&tools, "apply_patch", json!({ "patch": patch })).await);
    assert_eq!(
        std::fs::read_to_string(ws.join("win.txt")).unwrap(),
        "ALPHA\r\nbeta\r\nGAMMA\r\ndelta\r\n",
        "both updates landed, line endings kept"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("new.txt")).unwrap(),
        "first\nsecond\n"
    );
}

#[tokio::test]
async fn edit_file_refuses_non_utf8_and_keeps_crlf() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let latin1 = b"caf\xe9 = 1\nname = x\n";
    std::fs::write(ws.join("latin1.txt"), latin1).unwrap();
    std::fs::write(ws.join("crlf.txt"), "key = 1\r\nother = 2\r\n").unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let msg = err(run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "latin1.txt", "old_string": "name = x", "new_string": "name = y"}),
    )
    .await);
    assert!(msg.contains("not UTF-8"), "{msg}");
    assert_eq!(
        std::fs::read(ws.join("latin1.txt")).unwrap(),
        latin1,
        "the file is untouched"
    );
    ok(run_tool(
        &tools,
        "edit_file",
        json!({"file_path": "crlf.txt", "old_string": "key = 1\nother = 2", "new_string": "key = 10\nother = 20\nnew = 3"}),
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(ws.join("crlf.txt")).unwrap(),
        "key = 10\r\nother = 20\r\nnew = 3\r\n"
    );
}

/// The WASM walk (one descriptor per directory, files opened by one name)
/// applies the ignore rules the way ripgrep does and yields files in name
/// order, depth first; links are never followed, so nothing outside the
/// workspace is searched or listed.
#[tokio::test]
async fn grep_and_glob_walk_in_order_with_ripgreps_ignore_rules_and_never_through_links() {
    let scene = Scene::new();
    let ws = scene.workspace();
    let files: &[(&str, &str)] = &[
        (
            ".gitignore",
            "# build output\ntarget/\n*.log\n!keep.log\n/anchored.txt\nsub/**/deep.txt\ntrailing.txt   \n",
        ),
        (".ignore", "ignored_by_ignore.txt\n!whitelisted.log\n"),
        ("sub/.gitignore", "!*.log\nlocal.txt\n"),
        ("sub/nested/.gitignore", "/x.txt\r\nonly_dir/\r\n"),
        ("bom/.gitignore", "\u{feff}bommed.txt\n"),
    ];
    for (path, text) in files {
        std::fs::create_dir_all(ws.join(path).parent().unwrap()).unwrap();
        std::fs::write(ws.join(path), text).unwrap();
    }
    for path in [
        "bom/bommed.txt",
        "bom/kept.txt",
        "a.txt",
        "B.txt",
        "a-b",
        "a.b",
        "a/inner.txt",
        "b.log",
        "keep.log",
        "whitelisted.log",
        "anchored.txt",
        "trailing.txt",
        "ignored_by_ignore.txt",
        "target/x.rs",
        "sub/anchored.txt",
        "sub/target/y.rs",
        "sub/a/deep.txt",
        "sub/b.log",
        "sub/local.txt",
        "sub/nested/x.txt",
        "sub/nested/y/x.txt",
        "sub/nested/only_dir",
        "sub/nested/z/only_dir/inside.txt",
        ".git/config",
        "worktree/.git",
        "worktree/code.rs",
        ".hidden/file",
    ] {
        std::fs::create_dir_all(ws.join(path).parent().unwrap()).unwrap();
        std::fs::write(ws.join(path), "needle\n").unwrap();
    }
    let outside = scene.outside();
    std::fs::create_dir_all(outside.join("secrets")).unwrap();
    std::fs::write(outside.join("secrets/key.txt"), "needle from outside\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secrets"), ws.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.join("secrets/key.txt"), ws.join("link.txt")).unwrap();
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;

    let out = ok(run_tool(
        &tools,
        "grep",
        json!({"pattern": "needle", "max_results": 1000}),
    )
    .await);
    let searched: Vec<&str> = out.lines().map(|l| l.split(':').next().unwrap()).collect();
    let expected = vec![
        ".hidden/file",
        "B.txt",
        "a/inner.txt",
        "a-b",
        "a.b",
        "a.txt",
        "bom/kept.txt",
        "keep.log",
        "sub/anchored.txt",
        "sub/b.log",
        "sub/nested/only_dir",
        "sub/nested/y/x.txt",
        "whitelisted.log",
        "worktree/code.rs",
    ];
    assert_eq!(searched, expected);
    assert!(!out.contains("outside"), "{out}");

    let out = ok(run_tool(&tools, "glob", json!({"pattern": "*.txt"})).await);
    let mut listed: Vec<&str> = out.lines().collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            "B.txt",
            "a.txt",
            "a/inner.txt",
            "bom/kept.txt",
            "sub/anchored.txt",
            "sub/nested/y/x.txt"
        ]
    );
    // list_dir shows the links as names (no trailing `/`) and does not
    // descend into them.
    let out = ok(run_tool(&tools, "list_dir", json!({"path": ".", "depth": 3})).await);
    assert!(out.contains("\n  linkdir\n"), "{out}");
    assert!(!out.contains("key.txt"), "{out}");
}

/// A FIFO named `.gitignore` (the model can make one with the shell) would
/// block any reader that opens it: the walk never opens an ignore file that
/// is not a regular file, so grep and glob answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_gitignore_does_not_hang_grep_or_glob() {
    let scene = Scene::new();
    let ws = scene.workspace();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/a.txt"), "needle\n").unwrap();
    let fifo = ws.join("sub/.gitignore");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo on a temp path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let searches = async {
        let grep = run_tool(&tools, "grep", json!({"pattern": "needle"})).await;
        let glob = run_tool(&tools, "glob", json!({"pattern": "*.txt"})).await;
        (grep, glob)
    };
    let answered = tokio::time::timeout(Duration::from_secs(10), searches).await;
    // Release a reader left blocked on the FIFO, if any.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    let (grep, glob) = answered.expect("grep and glob answer without opening the FIFO");
    assert_eq!(ok(grep), "sub/a.txt:1:needle\n");
    assert_eq!(ok(glob), "sub/a.txt\n");
}

/// A FIFO given as the path to search or list is refused at once, with a
/// message that says what it is (the tools try `sandcrab:fs` first and ask
/// WASI only what the path is, never opening it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_given_as_the_path_is_refused_at_once_by_grep_glob_and_list_dir() {
    let scene = Scene::new();
    let fifo = scene.workspace().join("pipe");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo on a temp path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_h, tools) = coding_tools(&scene, Policy::default()).await;
    let calls = async {
        (
            run_tool(&tools, "grep", json!({"pattern": "x", "path": "pipe"})).await,
            run_tool(&tools, "glob", json!({"pattern": "*", "path": "pipe"})).await,
            run_tool(&tools, "list_dir", json!({"path": "pipe"})).await,
        )
    };
    let answered = tokio::time::timeout(Duration::from_secs(10), calls).await;
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    let (grep, glob, list) = answered.expect("the tools answer without opening the FIFO");
    for (tool, out) in [("grep", grep), ("glob", glob), ("list_dir", list)] {
        assert!(out.is_error(), "{tool}: {}", out.content);
        assert!(out.content.contains("pipe"), "{tool}: {}", out.content);
        assert!(
            out.content.contains("FIFO") || out.content.contains("not a directory"),
            "{tool}: {}",
            out.content
        );
    }
}

/// The same tests with the built-in plugins compiled by the host instead
/// of taken from the code embedded in the binary: both paths must answer
/// byte for byte the same.
mod compiled_code {
    macro_rules! again {
        ($($test:ident),+ $(,)?) => {
            $(
                #[test]
                fn $test() {
                    crate::support::with_compiled_code(super::$test)
                }
            )+
        };
    }

    again!(
        read_file_numbers_lines_from_offset_with_limit,
        read_file_refuses_missing_directories_and_binaries,
        write_file_creates_parent_directories,
        edit_file_replaces_and_reports_missing_or_ambiguous,
        apply_patch_adds_updates_deletes_and_moves,
        apply_patch_is_all_or_nothing,
        shell_reports_stdout_stderr_exit_code_and_duration,
        shell_timeout_stops_the_command_promptly_and_leaves_nothing_behind,
        grep_and_glob_search_a_small_tree,
        grep_searches_large_text_files_to_their_end_and_skips_large_binary_ones,
        glob_lists_newest_first,
        every_escape_attempt_is_refused,
        dispatch_reports_unknown_tools_and_bad_arguments,
        apply_patch_changes_nothing_when_a_write_fails_midway,
        apply_patch_composes_operations_on_one_file_and_keeps_crlf,
        edit_file_refuses_non_utf8_and_keeps_crlf,
        grep_and_glob_walk_in_order_with_ripgreps_ignore_rules_and_never_through_links,
        a_fifo_named_gitignore_does_not_hang_grep_or_glob,
        a_fifo_given_as_the_path_is_refused_at_once_by_grep_glob_and_list_dir,
    );
}
