//! One tool call, one path: where the copies of a call's reading used to
//! disagree, the binary now does one thing. A call whose arguments arrive
//! as a string holding the JSON object (double-encoded) is judged, run,
//! checkpointed and undone like any other; a call `mcp serve` refuses
//! carries a receipt like one the agent refuses.

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
