use super::apply::apply_hunks;
use super::parse::{Hunk, Line, Op, parse};

fn update_hunks(patch: &str) -> Vec<Hunk> {
    match parse(patch).unwrap().remove(0) {
        Op::Update { hunks, .. } => hunks,
        other => panic!("{other:?}"),
    }
}

#[test]
fn parses_every_operation() {
    let ops = parse(
        "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n*** End of File\n*** End Patch\n",
    )
    .unwrap();
    assert_eq!(
        ops[0],
        Op::Add {
            path: "a.txt".into(),
            content: "one\ntwo\n".into()
        }
    );
    assert_eq!(
        ops[1],
        Op::Delete {
            path: "b.txt".into()
        }
    );
    let Op::Update {
        path,
        move_to,
        hunks,
    } = &ops[2]
    else {
        panic!()
    };
    assert_eq!(
        (path.as_str(), move_to.as_deref()),
        ("c.txt", Some("d.txt"))
    );
    assert_eq!(hunks[0].hint.as_deref(), Some("fn main"));
    assert!(hunks[0].end_of_file);
    assert_eq!(
        hunks[0].lines,
        vec![
            Line::Context("ctx".into()),
            Line::Remove("old".into()),
            Line::Add("new".into())
        ]
    );
}

#[test]
fn malformed_patches_say_where() {
    for (patch, needle) in [
        ("", "empty"),
        ("*** Update File: a\n", "expected '*** Begin Patch'"),
        (
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "must end with '*** End Patch'",
        ),
        (
            "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
            "line 2: expected",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            "line 3: every line of an added file",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n?bad\n*** End Patch",
            "line 4: hunk lines must start",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "has no hunks",
        ),
        (
            "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
            "missing file path",
        ),
    ] {
        let err = parse(patch).unwrap_err();
        assert!(err.contains(needle), "{patch:?}: {err}");
    }
}

#[test]
fn applies_multiple_hunks_in_order() {
    let text = "a\nb\nc\nd\ne\nf\ng\n";
    let hunks = update_hunks(
        "*** Begin Patch\n*** Update File: x\n@@\n a\n-b\n+B\n c\n@@\n e\n-f\n+F\n g\n*** End Patch",
    );
    assert_eq!(apply_hunks(text, &hunks).unwrap(), "a\nB\nc\nd\ne\nF\ng\n");
}

#[test]
fn hint_disambiguates_repeated_context() {
    let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    let hunks = update_hunks(
        "*** Begin Patch\n*** Update File: x\n@@ fn b() {\n-    x();\n+    y();\n*** End Patch",
    );
    assert_eq!(
        apply_hunks(text, &hunks).unwrap(),
        "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n"
    );
}

#[test]
fn whitespace_tolerant_context_matches() {
    let text = "if x:   \n\treturn 1\n";
    let hunks = update_hunks(
        "*** Begin Patch\n*** Update File: x\n@@\n if x:\n-    return 1\n+    return 2\n*** End Patch",
    );
    assert_eq!(
        apply_hunks(text, &hunks).unwrap(),
        "if x:   \n    return 2\n"
    );
}

#[test]
fn end_of_file_anchors_at_the_end() {
    let text = "x\ny\nx\n";
    let hunks = update_hunks(
        "*** Begin Patch\n*** Update File: f\n@@\n-x\n+z\n*** End of File\n*** End Patch",
    );
    assert_eq!(apply_hunks(text, &hunks).unwrap(), "x\ny\nz\n");
}

#[test]
fn a_hunk_that_does_not_match_names_itself() {
    let hunks = update_hunks(
        "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n@@\n-nope\n+x\n*** End Patch",
    );
    let err = apply_hunks("a\nc\n", &hunks).unwrap_err();
    assert!(
        err.contains("hunk 2 of 2 did not match") && err.contains("'nope'"),
        "{err}"
    );
}

#[test]
fn missing_trailing_newline_is_kept() {
    let hunks = update_hunks("*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch");
    assert_eq!(apply_hunks("a", &hunks).unwrap(), "b");
}
