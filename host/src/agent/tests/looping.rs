//! Phase 2: the agentic loop, limits and loop detection; parallel tools.

use super::*;
use crate::agent::TurnKind;
use crate::llm::scripted::{text, tool_calls};

#[tokio::test]
async fn a_tool_call_then_text_emits_tool_events_then_text() {
    let h = harness(
        vec![
            tool_calls(&[("c1", "echo", json!({"text": "hi"}))]),
            text("All done"),
        ],
        |_| {},
    );
    let mut events = h.session.events();
    h.session.submit("go").await.unwrap();
    let all = drain(&mut events);
    let k = kinds(&all);
    let pos = |kind| {
        k.iter()
            .position(|x| *x == kind)
            .unwrap_or_else(|| panic!("{kind:?} missing in {k:?}"))
    };
    assert!(pos(EventKind::ToolCallStart) < pos(EventKind::ToolCallEnd));
    assert!(pos(EventKind::ToolCallEnd) < pos(EventKind::AssistantTextDelta));
    assert!(pos(EventKind::AssistantTextDelta) < pos(EventKind::AssistantTextEnd));
    let end = &all[pos(EventKind::ToolCallEnd)];
    assert_eq!(end.data_json()["output"], "echo: hi");
    assert_eq!(end.data_json()["is_error"], false);
    let text_end = &all[pos(EventKind::AssistantTextEnd)];
    assert_eq!(text_end.data_json()["text"], "All done");
    assert_eq!(
        h.client.requests().len(),
        2,
        "the loop exits after the text answer"
    );
    let second = &h.client.requests()[1];
    assert!(second.messages.iter().any(|m| matches!(m, crate::llm::Message::ToolResult { call_id, content, .. } if call_id == "c1" && content == "echo: hi")));
}

#[tokio::test]
async fn max_tool_rounds_emits_turn_limit() {
    let client = ScriptedClient::new(vec![tool_calls(&[("c", "echo", json!({"text": "again"}))])])
        .repeating();
    let h = harness_with(
        client,
        |c| {
            c.max_tool_rounds_per_input = 2;
            c.loop_detection_window = 50;
        },
        200_000,
    );
    let mut events = h.session.events();
    h.session.submit("loop forever").await.unwrap();
    let all = drain(&mut events);
    let limit = all
        .iter()
        .find(|e| e.kind() == EventKind::TurnLimit)
        .expect("TURN_LIMIT");
    assert_eq!(limit.data_json()["limit"], "max_tool_rounds_per_input");
    assert_eq!(
        all.iter()
            .filter(|e| e.kind() == EventKind::ToolCallEnd)
            .count(),
        2
    );
    assert_eq!(h.client.requests().len(), 2);
}

#[tokio::test]
async fn max_turns_stops_the_fourth_input() {
    let h = harness(vec![text("1"), text("2"), text("3"), text("4")], |c| {
        c.max_turns = 3
    });
    let mut events = h.session.events();
    for input in ["a", "b", "c"] {
        h.session.submit(input).await.unwrap();
    }
    assert!(!kinds(&drain(&mut events)).contains(&EventKind::TurnLimit));
    h.session.submit("d").await.unwrap();
    let all = drain(&mut events);
    let limit = all
        .iter()
        .find(|e| e.kind() == EventKind::TurnLimit)
        .expect("TURN_LIMIT on the fourth input");
    assert_eq!(limit.data_json()["limit"], "max_turns");
    assert_eq!(h.client.requests().len(), 3, "no fourth model call");
    h.session.submit("e").await.unwrap();
    assert_eq!(
        h.client.requests().len(),
        3,
        "the session stops accepting further loops"
    );
}

#[tokio::test]
async fn the_same_call_five_times_is_detected_as_a_loop() {
    let mut steps: Vec<Step> = (0..6)
        .map(|_| tool_calls(&[("c", "echo", json!({"text": "same"}))]))
        .collect();
    steps.push(text("giving up"));
    let h = harness(steps, |_| {});
    let mut events = h.session.events();
    h.session.submit("repeat").await.unwrap();
    let all = drain(&mut events);
    let detection = all
        .iter()
        .position(|e| e.kind() == EventKind::LoopDetection)
        .expect("LOOP_DETECTION");
    let calls_before = all[..detection]
        .iter()
        .filter(|e| e.kind() == EventKind::ToolCallEnd)
        .count();
    assert_eq!(calls_before, 5, "detected right after the fifth repetition");
    assert_eq!(
        all.iter()
            .filter(|e| e.kind() == EventKind::LoopDetection)
            .count(),
        1
    );
    let history = h.session.history();
    assert!(
        history
            .iter()
            .any(|t| matches!(&t.kind, TurnKind::Steering { text } if text.contains("repeating")))
    );
}

#[tokio::test]
async fn tool_failures_are_results_the_model_sees() {
    let h = harness(
        vec![
            tool_calls(&[("c1", "fail", json!({})), ("c2", "nope", json!({}))]),
            text("ok"),
        ],
        |_| {},
    );
    h.session.submit("go").await.unwrap();
    let history = h.session.history();
    let results = history
        .iter()
        .find_map(|t| match &t.kind {
            TurnKind::ToolResults { results } => Some(results.clone()),
            _ => None,
        })
        .unwrap();
    assert!(results[0].is_error && results[0].content.contains("boom"));
    assert!(results[1].is_error && results[1].content.starts_with("Unknown tool: nope"));
}

#[tokio::test]
async fn parallel_tool_calls_run_concurrently() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut registry = tools();
    let (inf, max) = (in_flight.clone(), most.clone());
    registry.register(
        ToolSpec {
            name: "slow".into(),
            description: "sleeps".into(),
            parameters: json!({"type": "object"}),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |_, _| {
            let (inf, max) = (inf.clone(), max.clone());
            async move {
                let now = inf.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                inf.fetch_sub(1, Ordering::SeqCst);
                Ok("slept".to_string())
            }
        })),
    );
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[
            ("a", "slow", json!({})),
            ("b", "slow", json!({})),
            ("c", "slow", json!({})),
        ]),
        text("done"),
    ]));
    let session = Session::new(SessionParts::new(
        client,
        profile(200_000),
        registry.into(),
        SessionConfig::new("m"),
        std::env::temp_dir(),
    ));
    session.submit("go").await.unwrap();
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "all three calls were in flight at once"
    );
    let results = session
        .history()
        .iter()
        .find_map(|t| match &t.kind {
            TurnKind::ToolResults { results } => Some(results.clone()),
            _ => None,
        })
        .unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b", "c"], "results keep call order");
}

#[tokio::test]
async fn parallel_writes_to_one_file_land_in_the_models_order() {
    use crate::plugin::{ToolTraits, Writes};
    use std::collections::BTreeMap;
    // Each call reads its "file", waits, then writes it back with its
    // mark: run concurrently, the later write would lose the earlier one.
    let files = Arc::new(std::sync::Mutex::new(BTreeMap::<String, String>::new()));
    let mut registry = tools();
    let f = files.clone();
    registry.register(
        ToolSpec {
            traits: ToolTraits {
                writes: Writes::Paths(vec!["file_path".into()]),
                ..Default::default()
            },
            ..ToolSpec::new(
                "append",
                "appends its mark",
                json!({"type": "object", "properties": {"file_path": {"type": "string"}, "mark": {"type": "string"}}}),
            )
        },
        Arc::new(FnTool(move |args: Value, _| {
            let f = f.clone();
            async move {
                let path = args["file_path"].as_str().unwrap().trim_start_matches("./").to_string();
                let before = f.lock().unwrap().get(&path).cloned().unwrap_or_default();
                let wait = if args["mark"] == "1" { 150 } else { 10 };
                tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                let mark = args["mark"].as_str().unwrap();
                f.lock().unwrap().insert(path, format!("{before}{mark}"));
                Ok("appended".to_string())
            }
        })),
    );
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[
            ("a", "append", json!({"file_path": "x.txt", "mark": "1"})),
            ("b", "append", json!({"file_path": "./x.txt", "mark": "2"})),
            ("c", "append", json!({"file_path": "y.txt", "mark": "3"})),
        ]),
        text("done"),
    ]));
    let session = Session::new(SessionParts::new(
        client,
        profile(200_000),
        registry.into(),
        SessionConfig::new("m"),
        std::env::temp_dir(),
    ));
    let started = std::time::Instant::now();
    session.submit("go").await.unwrap();
    let files = files.lock().unwrap().clone();
    assert_eq!(
        files["x.txt"], "12",
        "both writes landed, in the model's order"
    );
    assert_eq!(files["y.txt"], "3");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(400),
        "the unrelated write ran alongside"
    );
}
