//! One tool call, one path: where the copies of a call's reading used to
//! disagree, the binary now does one thing. A call whose arguments arrive
//! as a string holding the JSON object (double-encoded) is judged, run,
//! checkpointed and undone like any other; a call `mcp serve` refuses
//! carries a receipt like one the agent refuses.

use std::path::Path;

use serde_json::{Value, json};

use crate::cli_support::{self, events};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::Scene;
use sandcrab::llm::ProviderKind;

const KIND: ProviderKind = ProviderKind::Anthropic;

/// `chat --json` in `scene`, one `write_file` call answered with `args`,
/// then `/undo`: its events.
async fn write_then_undo(scene: &Scene, args: Value) -> Vec<Value> {
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("w1", "write_file", args)]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["written"])));
    let out = cli_support::chat(scene, KIND, &server, &["write it", "/undo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    events(&out.stdout)
}

/// The files the call `w1` changed, as its TOOL_CALL_END says.
fn changed_paths(events: &[Value]) -> Vec<String> {
    let end = events
        .iter()
        .find(|e| e["kind"] == "TOOL_CALL_END" && e["data"]["call_id"] == "w1")
        .unwrap_or_else(|| panic!("no TOOL_CALL_END of w1: {events:?}"));
    assert_eq!(end["data"]["is_error"], false, "{end}");
    end["data"]["changes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| c["path"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_encoded_call_is_checkpointed_and_undone_like_any_other() {
    // Control: arguments as an object. The file is written, its change
    // shown, and `/undo` takes it away again.
    let scene = Scene::new();
    let object = json!({"file_path": "plain.txt", "content": "PLAIN\n"});
    let seen = write_then_undo(&scene, object).await;
    assert_eq!(changed_paths(&seen), ["plain.txt"]);
    assert!(
        !scene.workspace().join("plain.txt").exists(),
        "control: /undo removes the file the call made"
    );

    // The attack: the same call with its arguments as a string holding
    // the object. It runs (the tools read the string as the object), so
    // it must be kept and undone the same way.
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("kept.txt"), "BEFORE\n").unwrap();
    let text = json!({"file_path": "kept.txt", "content": "AFTER\n"}).to_string();
    let seen = write_then_undo(&scene, Value::String(text)).await;
    // Precondition: the call reached the host encoded.
    let start = seen
        .iter()
        .find(|e| e["kind"] == "TOOL_CALL_START")
        .expect("a TOOL_CALL_START");
    assert!(start["data"]["arguments"].is_string(), "{start}");
    assert_eq!(changed_paths(&seen), ["kept.txt"], "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("kept.txt")).unwrap(),
        "BEFORE\n",
        "/undo put the file back"
    );
}

/// `run --json` with one `write_file` call to `file_path`; its
/// TOOL_CALL_END.
async fn run_write(scene: &Scene, workspace: &Path, file_path: &str, extra: &[&str]) -> Value {
    let server = MockLlm::strict(KIND).await;
    let args = json!({"file_path": file_path, "content": "on: push\n"});
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("w1", "write_file", args)]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    // A workspace not named `workspace`, so a name through the guest's
    // `/workspace` and the host's folder of that name differ.
    let out = crate::support::sandcrab_cmd(scene)
        .env(KIND.key_vars()[0], "sk-test")
        .args(["run", "--provider", KIND.id(), "--model", "m", "--base-url"])
        .arg(server.base_url())
        .arg("-w")
        .arg(workspace)
        .arg("--json")
        .args(extra)
        .arg("go")
        .output()
        .unwrap();
    events(&out.stdout)
        .into_iter()
        .find(|e| e["kind"] == "TOOL_CALL_END")
        .unwrap_or_else(|| panic!("no TOOL_CALL_END: {}", String::from_utf8_lossy(&out.stderr)))
}

/// A path rule judges the file the tool really writes, however the call
/// names it: through the guest's `/workspace/..`, the host's path, `..`
/// from the working directory. Each spelling is refused by the deny rule
/// and the file is not written; the control (another folder) is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_rule_judges_the_file_the_tool_writes_however_it_is_named() {
    let scene = Scene::new();
    scene.write_user_config("[[approvals.rules]]\npath = \".github/**\"\ndecision = \"deny\"\n");
    let project = scene.workspace().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let workflow = project.join(".github/workflows/x.yml");
    let host = project.display().to_string();
    for name in [
        ".github/workflows/x.yml".to_string(),
        "../workspace/.github/workflows/x.yml".to_string(),
        "/workspace/x/../.github/workflows/x.yml".to_string(),
        format!("{host}/../workspace/.github/workflows/x.yml"),
    ] {
        let end = run_write(&scene, &project, &name, &[]).await;
        assert_eq!(end["data"]["status"], "denied", "{name}: {end}");
        assert!(!workflow.exists(), "{name} was written past the deny rule");
    }
    let end = run_write(&scene, &project, "docs/x.yml", &[]).await;
    assert_eq!(end["data"]["status"], "ok", "control: {end}");
    assert!(project.join("docs/x.yml").exists());
}
