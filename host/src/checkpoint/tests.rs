use std::os::unix::fs::symlink;

use super::*;

fn setup() -> (tempfile::TempDir, PathBuf, Checkpoints) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let checkpoints = Checkpoints::open(dir.path().join("cp/s1"), &workspace);
    (dir, workspace, checkpoints)
}

#[test]
fn undo_puts_back_what_the_last_input_changed_and_only_that() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    let snap = cp.before_write(&ws.join("a.txt")).unwrap().unwrap();
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    assert_eq!(cp.changed(&snap).unwrap().added, 1);

    cp.begin_input();
    cp.before_write(&ws.join("a.txt")).unwrap();
    std::fs::write(ws.join("a.txt"), "three\n").unwrap();
    cp.before_write(Path::new("sub/new.txt")).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/new.txt"), "new\n").unwrap();
    // A second write in the same input keeps the first state.
    cp.before_write(&ws.join("a.txt")).unwrap();
    std::fs::write(ws.join("a.txt"), "four\n").unwrap();

    let restored = cp.undo_last().unwrap();
    assert_eq!(restored.len(), 2);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    assert!(!ws.join("sub/new.txt").exists());

    // The conversation's diff now runs from the first state.
    let all = cp.conversation_diff();
    assert_eq!(all.len(), 1);
    assert!(all[0].diff.contains("-one\n+two\n"), "{}", all[0].diff);

    cp.undo_last().unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(matches!(
        cp.undo_last(),
        Err(CheckpointError::NothingToUndo)
    ));
}

/// The model swaps a changed file for a link to a file outside the
/// workspace: undo replaces the link, and the outside file is untouched.
#[test]
fn undo_never_writes_through_a_link_the_model_planted() {
    let (dir, ws, cp) = setup();
    let outside = dir.path().join("bashrc");
    std::fs::write(&outside, "mine\n").unwrap();
    std::fs::write(ws.join("a.txt"), "kept\n").unwrap();
    cp.begin_input();
    cp.before_write(&ws.join("a.txt")).unwrap();
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    symlink(&outside, ws.join("a.txt")).unwrap();
    // A linked directory on the way is refused too.
    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/f"), "f\n").unwrap();
    cp.before_write(&ws.join("d/f")).unwrap();
    std::fs::remove_dir_all(ws.join("d")).unwrap();
    symlink(dir.path(), ws.join("d")).unwrap();

    let err = cp.undo_last().unwrap_err();
    assert!(
        matches!(err, CheckpointError::Restore { ref path, .. } if path == "d/f"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    assert!(!dir.path().join("f").exists());
    let meta = std::fs::symlink_metadata(ws.join("a.txt")).unwrap();
    assert!(meta.is_file(), "the link itself was replaced");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "kept\n");
}

#[test]
fn files_outside_the_workspace_or_behind_links_are_not_kept() {
    let (dir, ws, cp) = setup();
    std::fs::write(dir.path().join("secret"), "s").unwrap();
    symlink(dir.path().join("secret"), ws.join("link")).unwrap();
    cp.begin_input();
    assert!(
        cp.before_write(&dir.path().join("secret"))
            .unwrap()
            .is_none()
    );
    assert!(cp.before_write(Path::new("../secret")).unwrap().is_none());
    assert!(cp.before_write(&ws.join("link")).unwrap().is_none());
}

#[test]
fn a_resumed_session_can_undo_what_it_changed_before() {
    let (dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "before\n").unwrap();
    cp.begin_input();
    cp.before_write(&ws.join("a.txt")).unwrap();
    std::fs::write(ws.join("a.txt"), "after\n").unwrap();
    drop(cp);
    let again = Checkpoints::open(dir.path().join("cp/s1"), &ws);
    again.begin_input();
    again.undo_last().unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "before\n"
    );
    remove_session(&dir.path().join("cp"), "s1").unwrap();
    assert!(!dir.path().join("cp/s1").exists());
}
