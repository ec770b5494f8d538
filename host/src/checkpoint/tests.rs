use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;

fn setup() -> (tempfile::TempDir, PathBuf, Checkpoints) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let checkpoints = Checkpoints::open(dir.path().join("cp/s1"), &workspace);
    (dir, workspace, checkpoints)
}

fn snapshot(kept: Kept) -> Snapshot {
    match kept {
        Kept::Snapshot(s) => s,
        other => panic!("not kept: {other:?}"),
    }
}

/// The calls that kept `snapshots` end, as the session ends a call: how
/// each file is left is recorded (one that cannot be read back too).
fn calls_end(cp: &Checkpoints, snapshots: &[&Snapshot]) {
    for snapshot in snapshots {
        let _ = cp.changed(snapshot);
    }
}

#[test]
fn undo_puts_back_what_the_last_input_changed_and_only_that() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    let snap = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    assert_eq!(cp.changed(&snap).unwrap().unwrap().added, 1);

    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), "three\n").unwrap();
    let new = snapshot(cp.before_write(Path::new("sub/new.txt")).unwrap());
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/new.txt"), "new\n").unwrap();
    // A second write in the same input keeps the first state.
    let again = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), "four\n").unwrap();
    calls_end(&cp, &[&a, &new, &again]);

    let undone = cp.undo_last(false).unwrap();
    assert_eq!((undone.restored.len(), undone.failed.len()), (2, 0));
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    assert!(!ws.join("sub/new.txt").exists());

    // The conversation's diff now runs from the first state.
    let all = cp.conversation_diff().changes;
    assert_eq!(all.len(), 1);
    assert!(all[0].diff.contains("-one\n+two\n"), "{}", all[0].diff);

    cp.undo_last(false).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(matches!(
        cp.undo_last(false),
        Err(CheckpointError::NothingToUndo)
    ));
}

/// The model swaps a changed file for a link to a file outside the
/// workspace, and a directory on the way for a link: undo replaces the
/// first link, refuses the second, restores everything else, and the
/// outside files are untouched.
#[test]
fn undo_never_writes_through_a_link_the_model_planted() {
    let (dir, ws, cp) = setup();
    let outside = dir.path().join("bashrc");
    std::fs::write(&outside, "mine\n").unwrap();
    std::fs::write(ws.join("a.txt"), "kept\n").unwrap();
    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/f"), "f\n").unwrap();
    std::fs::write(ws.join("z.txt"), "z\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    let f = snapshot(cp.before_write(&ws.join("d/f")).unwrap());
    let z = snapshot(cp.before_write(&ws.join("z.txt")).unwrap());
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    symlink(&outside, ws.join("a.txt")).unwrap();
    std::fs::remove_dir_all(ws.join("d")).unwrap();
    symlink(dir.path(), ws.join("d")).unwrap();
    std::fs::write(ws.join("z.txt"), "changed\n").unwrap();
    calls_end(&cp, &[&a, &f, &z]);

    // `/diff` cannot show the link or the file beneath it, and says so.
    let diff = cp.conversation_diff();
    let unshown: Vec<&str> = diff.unshown.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(unshown, ["a.txt", "d/f"], "{diff:?}");
    assert_eq!(diff.changes.len(), 1, "{diff:?}");
    let undone = cp.undo_last(false).unwrap();
    assert_eq!(undone.failed.len(), 1, "{undone:?}");
    assert_eq!(undone.failed[0].0, "d/f");
    assert_eq!(std::fs::read_to_string(ws.join("z.txt")).unwrap(), "z\n");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    assert!(!dir.path().join("f").exists());
    let meta = std::fs::symlink_metadata(ws.join("a.txt")).unwrap();
    assert!(meta.is_file(), "the link itself was replaced");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "kept\n");
}

#[test]
fn files_outside_the_workspace_are_not_kept_and_those_that_cannot_be_are_said() {
    let (dir, ws, cp) = setup();
    std::fs::write(dir.path().join("secret"), "s").unwrap();
    symlink(dir.path().join("secret"), ws.join("link")).unwrap();
    cp.begin_input();
    assert!(matches!(
        cp.before_write(&dir.path().join("secret")).unwrap(),
        Kept::Outside
    ));
    assert!(matches!(
        cp.before_write(Path::new("../secret")).unwrap(),
        Kept::Outside
    ));
    assert!(matches!(
        cp.before_write(&ws.join("link")).unwrap(),
        Kept::Skipped { ref path, .. } if path == "link"
    ));
    // A FIFO is refused at once (never opened for a blocking read).
    let fifo = ws.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert!(matches!(
        cp.before_write(&fifo).unwrap(),
        Kept::Skipped { .. }
    ));
}

#[test]
fn a_conversation_keeps_at_most_its_quota() {
    let (_dir, ws, cp) = setup();
    let cp = cp.with_quota(10_000);
    let big = vec![b'x'; 1_000];
    cp.begin_input();
    let mut skipped = 0;
    for i in 0..40 {
        let name = format!("f{i}");
        std::fs::write(ws.join(&name), &big).unwrap();
        if matches!(
            cp.before_write(&ws.join(&name)).unwrap(),
            Kept::Skipped { .. }
        ) {
            skipped += 1;
        }
    }
    assert_eq!(skipped, 30);
}

#[test]
fn undo_restores_the_permission_bits() {
    let (_dir, ws, cp) = setup();
    let script = ws.join("run.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    cp.begin_input();
    let kept = snapshot(cp.before_write(&script).unwrap());
    std::fs::remove_file(&script).unwrap();
    std::fs::write(&script, "changed\n").unwrap();
    calls_end(&cp, &[&kept]);
    cp.undo_last(false).unwrap();
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[test]
fn a_resumed_session_can_undo_what_it_changed_before_and_planted_manifests_are_ignored() {
    let (dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "before\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), "after\n").unwrap();
    calls_end(&cp, &[&a]);
    drop(cp);
    // A manifest naming a blob elsewhere is not read back.
    let planted = dir.path().join("cp/s1/7");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(
        planted.join(MANIFEST),
        r#"[{"path":"stolen","blob":"/etc/hostname"}]"#,
    )
    .unwrap();
    let again = Checkpoints::open(dir.path().join("cp/s1"), &ws);
    again.begin_input();
    let undone = again.undo_last(false).unwrap();
    assert_eq!(undone.restored.len(), 1);
    assert!(!ws.join("stolen").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "before\n"
    );
    // Only a session id is ever a folder name to remove.
    remove_session(&dir.path().join("cp"), "s1").unwrap();
    assert!(dir.path().join("cp/s1").exists(), "not a session id");
    let id = "6f1c2a7e-3b4d-4e5f-8a9b-0c1d2e3f4a5b";
    std::fs::rename(dir.path().join("cp/s1"), dir.path().join("cp").join(id)).unwrap();
    remove_session(&dir.path().join("cp"), id).unwrap();
    assert!(!dir.path().join("cp").join(id).exists());
}

/// A file the last input changed was changed again after it (by the
/// operator, or by a shell command the checkpoints do not see): `/undo`
/// puts nothing back and names it, even after a resume; `force` does.
#[test]
fn undo_never_throws_away_a_later_change_unless_forced() {
    let (dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    let notes = snapshot(cp.before_write(&ws.join("notes.md")).unwrap());
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    std::fs::write(ws.join("notes.md"), "by the model\n").unwrap();
    assert!(cp.changed(&a).unwrap().is_some() && cp.changed(&notes).unwrap().is_some());
    // After the turn the operator adds to the file the model created, and
    // a later input changes nothing a tool writes.
    std::fs::write(ws.join("notes.md"), "by the model\nmine\n").unwrap();
    cp.begin_input();

    let refused = |cp: &Checkpoints| match cp.undo_last(false) {
        Err(CheckpointError::ChangedSince { changed, unsure }) if unsure.is_empty() => changed,
        other => panic!("undone over a later change: {other:?}"),
    };
    assert_eq!(refused(&cp), ["notes.md"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "by the model\nmine\n"
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    let resumed = Checkpoints::open(dir.path().join("cp/s1"), &ws);
    assert_eq!(refused(&resumed), ["notes.md"]);
    // A change of permission bits alone counts too.
    std::fs::set_permissions(ws.join("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(refused(&cp), ["a.txt", "notes.md"]);

    let undone = cp.undo_last(true).unwrap();
    assert_eq!(undone.restored.len(), 2, "{undone:?}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(!ws.join("notes.md").exists());
}

/// A file kept before a call that then did not change it (the tool
/// refused, or wrote the same bytes) is not written again by `/undo`:
/// same inode, same content.
#[test]
fn undo_leaves_a_file_that_is_already_as_it_was_untouched() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("same.txt"), "same\n").unwrap();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    cp.begin_input();
    let same = snapshot(cp.before_write(&ws.join("same.txt")).unwrap());
    let b = snapshot(cp.before_write(&ws.join("b.txt")).unwrap());
    std::fs::write(ws.join("b.txt"), "changed\n").unwrap();
    calls_end(&cp, &[&same, &b]);
    let inode = std::fs::metadata(ws.join("same.txt")).unwrap().ino();
    let undone = cp.undo_last(false).unwrap();
    assert_eq!(undone.restored.len(), 1, "{undone:?}");
    assert_eq!(std::fs::metadata(ws.join("same.txt")).unwrap().ino(), inode);
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "b\n");
}

/// The call left a file too large to read back (over [`MAX_FILE`]), and
/// the operator then edited it: `/undo` cannot compare contents, so it
/// compares what it can (kind, size, inode, time) and refuses.
#[test]
fn a_later_change_to_a_file_the_call_left_too_large_is_not_thrown_away() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "precious\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), vec![b'x'; MAX_FILE as usize + 1]).unwrap();
    let err = cp.changed(&a).expect_err("too large to read back");
    assert!(err.to_string().contains("limit"), "{err}");
    // The operator appends to the large file: still too large to read.
    std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join("a.txt"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"mine\n"))
        .unwrap();
    match cp.undo_last(false) {
        Err(CheckpointError::ChangedSince { changed, .. }) => assert_eq!(changed, ["a.txt"]),
        other => panic!("undone over a later change: {other:?}"),
    }
    // Made small again by the operator: refused as well.
    std::fs::write(ws.join("a.txt"), "the operator's edit\n").unwrap();
    assert!(matches!(
        cp.undo_last(false),
        Err(CheckpointError::ChangedSince { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "the operator's edit\n"
    );
}

/// A call cut off before it ended left no record of how it left its
/// files: `/undo` cannot rule out a later change, says so, and `force`
/// puts the files back.
#[test]
fn a_call_that_never_ended_needs_force_to_undo() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    cp.before_write(&ws.join("a.txt")).unwrap();
    std::fs::write(ws.join("a.txt"), "half").unwrap();
    match cp.undo_last(false) {
        Err(err @ CheckpointError::ChangedSince { .. }) => {
            let CheckpointError::ChangedSince { changed, unsure } = &err else {
                unreachable!()
            };
            assert!(changed.is_empty(), "{err}");
            assert_eq!(unsure, &["a.txt"]);
            assert!(err.to_string().contains("not known"), "{err}");
        }
        other => panic!("undone without knowing how the call left it: {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "half");
    cp.undo_last(true).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
}

/// A file that could not be put back keeps its checkpoint: once the
/// obstacle is gone, the next `/undo` puts it back (and does not move on
/// to the input before).
#[test]
fn a_file_that_could_not_be_restored_keeps_its_checkpoint() {
    let (dir, ws, cp) = setup();
    std::fs::write(ws.join("first.txt"), "first\n").unwrap();
    cp.begin_input();
    let first = snapshot(cp.before_write(&ws.join("first.txt")).unwrap());
    std::fs::write(ws.join("first.txt"), "first changed\n").unwrap();
    cp.changed(&first).unwrap();

    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/b.txt"), "b precious\n").unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    cp.begin_input();
    let b = snapshot(cp.before_write(&ws.join("d/b.txt")).unwrap());
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("d/b.txt"), "B new\n").unwrap();
    std::fs::write(ws.join("a.txt"), "A new\n").unwrap();
    cp.changed(&b).unwrap();
    cp.changed(&a).unwrap();

    // The operator moves d aside and puts a link in its place.
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::rename(ws.join("d"), ws.join("d.aside")).unwrap();
    symlink(&outside, ws.join("d")).unwrap();
    let undone = cp.undo_last(true).unwrap();
    assert_eq!(undone.restored.len(), 1, "{undone:?}");
    assert_eq!(undone.failed.len(), 1, "{undone:?}");
    assert_eq!(undone.failed[0].0, "d/b.txt");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "a\n");

    // d is back: the next /undo finishes that input, not the one before.
    std::fs::remove_file(ws.join("d")).unwrap();
    std::fs::rename(ws.join("d.aside"), ws.join("d")).unwrap();
    let undone = cp.undo_last(false).unwrap();
    assert_eq!(
        (undone.restored.len(), undone.failed.len()),
        (1, 0),
        "{undone:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("d/b.txt")).unwrap(),
        "b precious\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("first.txt")).unwrap(),
        "first changed\n"
    );
    // The same after a resume: what is left is read back.
    let resumed = Checkpoints::open(dir.path().join("cp/s1"), &ws);
    resumed.undo_last(false).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("first.txt")).unwrap(),
        "first\n"
    );
}

/// A file that can never be put back (the operator made it a directory of
/// their own) does not hold every earlier `/undo`: `forget_last` drops
/// that input's checkpoints, touching nothing, and `/undo` goes on.
#[test]
fn a_stuck_checkpoint_can_be_forgotten() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("first.txt"), "first\n").unwrap();
    cp.begin_input();
    let first = snapshot(cp.before_write(&ws.join("first.txt")).unwrap());
    std::fs::write(ws.join("first.txt"), "first changed\n").unwrap();
    calls_end(&cp, &[&first]);
    cp.begin_input();
    let b = snapshot(cp.before_write(&ws.join("b.txt")).unwrap());
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    calls_end(&cp, &[&b]);
    std::fs::remove_file(ws.join("b.txt")).unwrap();
    std::fs::create_dir(ws.join("b.txt")).unwrap();
    std::fs::write(ws.join("b.txt/mine"), "mine\n").unwrap();
    assert_eq!(cp.undo_last(true).unwrap().failed.len(), 1);
    assert_eq!(cp.undo_last(true).unwrap().failed.len(), 1, "still stuck");

    assert_eq!(cp.forget_last(), ["b.txt"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt/mine")).unwrap(),
        "mine\n"
    );
    cp.undo_last(false).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("first.txt")).unwrap(),
        "first\n"
    );
}

/// An input directory with an absurd number (planted, or from a damaged
/// data directory) is not read: numbering goes on and `/undo` keeps order.
#[test]
fn an_absurd_input_number_is_ignored() {
    let (dir, ws, _) = setup();
    let planted = dir.path().join("cp/s1").join(u64::MAX.to_string());
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join(MANIFEST), "[]").unwrap();
    let cp = Checkpoints::open(dir.path().join("cp/s1"), &ws);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    cp.changed(&a).unwrap();
    cp.begin_input();
    cp.undo_last(false).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
}

/// A file the turn created too large to read back is removed by `/undo`
/// (and reported), not taken for absent and forgotten.
#[test]
fn a_large_file_the_turn_created_is_removed_by_undo() {
    let (_dir, ws, cp) = setup();
    cp.begin_input();
    let big = snapshot(cp.before_write(&ws.join("big.bin")).unwrap());
    std::fs::write(ws.join("big.bin"), vec![b'x'; MAX_FILE as usize + 1]).unwrap();
    calls_end(&cp, &[&big]);
    let undone = cp.undo_last(false).unwrap();
    assert!(!ws.join("big.bin").exists());
    assert_eq!(undone.restored.len(), 1, "{undone:?}");
    assert_eq!(undone.restored[0].kind, ChangeKind::Deleted);
}

/// For a file too large to read back, a change of its permission bits
/// after the turn counts as a change, as it does for any other file.
#[test]
fn a_mode_change_to_a_large_file_blocks_undo() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("big.bin"), "small\n").unwrap();
    cp.begin_input();
    let big = snapshot(cp.before_write(&ws.join("big.bin")).unwrap());
    std::fs::write(ws.join("big.bin"), vec![b'x'; MAX_FILE as usize + 1]).unwrap();
    calls_end(&cp, &[&big]);
    std::fs::set_permissions(ws.join("big.bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(matches!(
        cp.undo_last(false),
        Err(CheckpointError::ChangedSince { .. })
    ));
}

/// A call cut off before it ended leaves nothing behind for a call of a
/// later input that reuses its id (some servers number calls `call_0`
/// in every answer).
#[test]
fn a_cut_off_call_leaves_nothing_for_a_later_call_with_its_id() {
    let (_dir, ws, cp) = setup();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    cp.begin_input();
    let a = snapshot(cp.before_write(&ws.join("a.txt")).unwrap());
    cp.running("call_0", vec![a]);
    // Cut off: never ended. The next input's call_0 writes nothing.
    cp.begin_input();
    cp.running("call_0", Vec::new());
    assert!(cp.ended("call_0").is_empty());
}
