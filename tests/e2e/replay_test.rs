//! Flight recordings through the binary: a session made against each wire
//! format replays offline — provider gone, workspace read-only, nothing
//! run again — with every request the host builds matching the recorded
//! one; an export carries the recording to another machine, where it
//! replays the same; a fork continues from a model call; and no provider
//! key reaches the database or an export.

use std::os::unix::fs::PermissionsExt;

use sandcrab::llm::ProviderKind;
use serde_json::json;

use crate::cli_support::sandcrab;
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, sandcrab_cmd};

/// The key every loopback provider is given (`cli_support::sandcrab`).
const KEY: &str = "sk-test-secret-4242";

/// `sandcrab run` whose model runs `command`, then answers; the session id.
async fn recorded_run(scene: &Scene, kind: ProviderKind, command: &str) -> String {
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": command}))]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["all ", "done"])));
    let out = sandcrab(scene, kind, &server, "run")
        .arg("make the marker")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    let list = sandcrab_cmd(scene)
        .args(["sessions", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    String::from_utf8_lossy(&list.stdout)
        .split_whitespace()
        .next()
        .expect("a saved session")
        .to_string()
}

/// `sandcrab ARGS… -w WORKSPACE`: exit status and everything it printed.
fn sandcrab_in(scene: &Scene, args: &[&str]) -> (bool, String) {
    let out = sandcrab_cmd(scene)
        .args(args)
        .arg("-w")
        .arg(scene.workspace())
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn set_mode(dir: &std::path::Path, mode: u32) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wire_format_replays_offline_in_a_read_only_workspace() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        let id = recorded_run(&scene, kind, "touch replay-marker && echo made").await;
        let marker = scene.workspace().join("replay-marker");
        assert!(marker.exists(), "{kind:?}: the live run made the marker");
        std::fs::remove_file(&marker).unwrap();
        // The provider is gone (its server dropped), the workspace cannot
        // be written: a replay needs neither.
        set_mode(&scene.workspace(), 0o555);
        let (ok, said) = sandcrab_in(&scene, &["replay", &id]);
        set_mode(&scene.workspace(), 0o755);
        assert!(ok, "{kind:?}: {said}");
        assert!(
            said.contains("1 input, 2 model calls, 1 tool answer ")
                && said.contains("every request the host built is the recorded one"),
            "{kind:?}: {said}"
        );
        assert!(
            !marker.exists(),
            "{kind:?}: the replay ran the command again"
        );
        // The recording is chained with the turns.
        let (ok, said) = sandcrab_in(&scene, &["sessions", "verify", &id]);
        assert!(ok, "{kind:?}: {said}");
        // --until stops early, saying so.
        let (ok, said) = sandcrab_in(&scene, &["replay", &id, "--until", "1"]);
        assert!(
            ok && said.contains("up to model call 1"),
            "{kind:?}: {said}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_recording_replays_on_another_machine_and_holds_no_key() {
    let here = Scene::new();
    let kind = ProviderKind::Anthropic;
    let id = recorded_run(&here, kind, "echo carried").await;
    let export = sandcrab_cmd(&here)
        .args(["sessions", "export", &id, "-w"])
        .arg(here.workspace())
        .output()
        .unwrap();
    assert!(export.status.success());
    let text = String::from_utf8(export.stdout.clone()).unwrap();
    assert!(
        text.contains("{\"record\":\"recording\""),
        "the recording is in the export"
    );
    // The provider key is in no request, receipt or recording: not in the
    // export (the recording in plain JSON) nor in any file of the store.
    assert!(!text.contains(KEY), "the key is in the export");
    for entry in std::fs::read_dir(here.root.path().join("data/sandcrab")).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(path).unwrap();
        assert!(
            !crate::support::bytes_contain(&bytes, KEY),
            "the key is in the store"
        );
    }
    let there = Scene::new();
    let file = there.root.path().join("s.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let (ok, said) = sandcrab_in(&there, &["sessions", "import", file.to_str().unwrap()]);
    assert!(ok, "{said}");
    let id = crate::cli_support::imported_id(&said);
    let (ok, said) = sandcrab_in(&there, &["replay", &id]);
    assert!(ok && said.contains("2 model calls"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_continues_from_a_model_call_as_a_normal_session() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAi;
    let id = recorded_run(&scene, kind, "echo forked-output-7").await;
    let (ok, said) = sandcrab_in(
        &scene,
        &["replay", &id, "--fork-at", "1", "--model", "other-model"],
    );
    assert!(ok, "{said}");
    let fork = said
        .split(" as ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("the fork's id")
        .to_string();
    // It holds the state after the first call: the input, the tool call
    // and its result (the second answer is not part of it).
    let (ok, shown) = sandcrab_in(&scene, &["sessions", "show", &fork]);
    assert!(ok, "{shown}");
    assert!(
        shown.contains("other-model") && shown.contains("forked-output-7"),
        "{shown}"
    );
    assert!(!shown.contains("all done"), "{shown}");
    let (ok, said) = sandcrab_in(&scene, &["sessions", "verify", &fork]);
    assert!(ok, "{said}");
    // Continued live, the model sees the forked history; then the fork
    // itself replays.
    let server = MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["continued"])));
    let mut chat = sandcrab(&scene, kind, &server, "run");
    let out = chat.args(["--resume", &fork, "go on"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = server.requests();
    assert!(
        sent.last()
            .unwrap()
            .body
            .to_string()
            .contains("forked-output-7"),
        "the continued fork sent its history"
    );
    let (ok, said) = sandcrab_in(&scene, &["replay", &fork]);
    assert!(ok && said.contains("1 model call,"), "{said}");
    // Out of range: said so.
    let (ok, said) = sandcrab_in(&scene, &["replay", &id, "--fork-at", "9"]);
    assert!(!ok && said.contains("has 2 recorded model calls"), "{said}");
}

/// Ids can be given by their start (unique) everywhere an id is taken; a
/// start two sessions share is refused naming both; `sessions list`
/// counts the operator's inputs, in words a person reads ("1 turn"), and a
/// finished run is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_named_by_the_start_of_its_id_and_listed_as_closed_with_its_inputs() {
    let scene = Scene::new();
    let kind = ProviderKind::Anthropic;
    let id = recorded_run(&scene, kind, "echo first-session").await;
    let short = &id[..8];
    for args in [
        vec!["sessions", "show", short],
        vec!["sessions", "verify", short],
        vec!["audit", short],
        vec!["replay", short],
    ] {
        let (ok, said) = sandcrab_in(&scene, &args);
        assert!(ok, "{args:?}: {said}");
    }
    let (ok, listed) = sandcrab_in(&scene, &["sessions", "list"]);
    assert!(ok, "{listed}");
    let row = listed.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains(" 1 turn ") && row.contains("closed"), "{row}");

    // A second session; a start both share is refused with both named.
    let other = recorded_run(&scene, kind, "echo second-session").await;
    let common: String = id
        .chars()
        .zip(other.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let (ok, said) = sandcrab_in(&scene, &["sessions", "show", &common]);
    if common.is_empty() {
        // Nothing shared: an empty id names nothing (control of the
        // refusal below, which needs a shared start).
        assert!(!ok, "{said}");
    } else {
        assert!(!ok && said.contains(&id) && said.contains(&other), "{said}");
    }
    // A start nobody has.
    let (ok, said) = sandcrab_in(&scene, &["sessions", "show", "zzzz"]);
    assert!(!ok && said.contains("no session with id 'zzzz'"), "{said}");
}

/// A fork of a session imported from another machine goes on in the
/// workspace given with `-w`, not in a folder of that machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_goes_on_in_the_workspace_it_is_given() {
    let there = Scene::new();
    let kind = ProviderKind::OpenAi;
    let id = recorded_run(&there, kind, "echo from-there").await;
    let export = sandcrab_cmd(&there)
        .args(["sessions", "export", &id, "-w"])
        .arg(there.workspace())
        .output()
        .unwrap();
    assert!(export.status.success());
    let here = Scene::new();
    let file = here.root.path().join("s.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let (ok, said) = sandcrab_in(&here, &["sessions", "import", file.to_str().unwrap()]);
    assert!(ok, "{said}");
    let imported = said
        .split(" as ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    let elsewhere = here.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = sandcrab_cmd(&here)
        .args(["replay", &imported, "--fork-at", "1", "-w"])
        .arg(&elsewhere)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let elsewhere = elsewhere.canonicalize().unwrap();
    assert!(
        said.contains(&format!("--workspace {}", elsewhere.display())),
        "{said}"
    );
    // Control: without -w, the fork stays where its source is.
    let out = sandcrab_cmd(&here)
        .args(["replay", &imported, "--fork-at", "1"])
        .current_dir(here.root.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    let workspace = here.workspace().canonicalize().unwrap();
    assert!(
        said.contains(&format!("--workspace {}", workspace.display())),
        "{said}"
    );
}

/// `run --continue` goes on with the provider and model the session was
/// made with when the flags name none: it does not ask for another
/// provider's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_keeps_its_provider_and_model() {
    let scene = Scene::new();
    let kind = ProviderKind::OpenAiCompatible;
    recorded_run(&scene, kind, "echo made-here").await;
    let server = MockLlm::strict(kind).await;
    server.push(stream(kind, &Answer::Text(vec!["still me"])));
    let out = sandcrab_cmd(&scene)
        .env("OPENAI_BASE_URL", server.base_url())
        .args(["run", "--continue", "-w"])
        .arg(scene.workspace())
        .arg("again")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still me\n");
    assert_eq!(server.requests()[0].body["model"], "test-model");
}
