//! Long sessions at the edge of a small window, through the binary, on
//! every wire format: a provider that refuses any request over 4,096
//! tokens with its own API's "prompt too long" answer, a conversation of
//! fifty ~900-token inputs with a tool call each (one reading a file
//! nearly as large as the window, one input larger than the window, a
//! `/compact` between them). Every turn answers or says once why it
//! cannot; the session goes on, `memory_read` still finds the first
//! turn's fact, a continued session starts from the learned window, and
//! the flight recorder replays the session.

use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{events, of_kind, sandcrab, tool_result, with_lines};
use crate::llm_transcripts::{Answer, complete, stream, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::support::{Scene, sandcrab_cmd};

/// The model's window, as the provider enforces it.
const WINDOW: u64 = 4096;

/// What the default summarizer plugin's prompt always contains.
const SUMMARY_PROMPT: &str = "New messages to fold into the summary";

/// The input about the first turn's fact.
const QUESTION: &str = "Which code word did turn 1 give?";

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// An input of about 900 tokens carrying the code word of turn `n`.
fn input(n: usize) -> String {
    format!(
        "Turn {n}: the code word is FACT-{n:02}. Read notes.txt and keep it in mind. {}",
        "Some context about the task at hand, to be weighed. ".repeat(50)
    )
}

/// The last message, item or content of a request body, as text.
fn last_entry(body: &Value) -> String {
    ["messages", "input", "contents"]
        .iter()
        .find_map(|k| body[*k].as_array().and_then(|a| a.last()))
        .map(Value::to_string)
        .unwrap_or_default()
}

fn answers_a_tool(last: &str) -> bool {
    [
        "tool_result",
        "function_call_output",
        "\"role\":\"tool\"",
        "functionResponse",
    ]
    .iter()
    .any(|marker| last.contains(marker))
}

/// A scripted model: a summary that keeps every code word it read; a
/// tool call for each input (`read_file`, or `memory_read` for the
/// question); a short answer after each tool result.
fn model(kind: ProviderKind) -> impl Fn(&str, &Value) -> Reply + Send + 'static {
    let calls = Arc::new(AtomicUsize::new(0));
    move |_path, body| {
        let text = body.to_string();
        if text.contains(SUMMARY_PROMPT) {
            let mut words: Vec<&str> = text
                .match_indices("FACT-")
                .map(|(at, _)| &text[at..at + 7])
                .collect();
            words.sort_unstable();
            words.dedup();
            let summary = format!("The user gave the code words {}.", words.join(", "));
            return complete(kind, &Answer::Text(vec![leak(summary)]));
        }
        let last = last_entry(body);
        if answers_a_tool(&last) {
            return stream(kind, &Answer::Text(vec!["Noted."]));
        }
        let id = format!("call{}", calls.fetch_add(1, Ordering::Relaxed));
        let call = if last.contains(QUESTION) {
            tool(&id, "memory_read", json!({"query": "FACT-01"}))
        } else if last.contains("Turn 7:") {
            tool(&id, "read_file", json!({"file_path": "big.log"}))
        } else {
            tool(&id, "read_file", json!({"file_path": "notes.txt"}))
        };
        stream(kind, &Answer::Tools(vec![call]))
    }
}

/// `sandcrab chat --json` with `lines` on its stdin.
fn chat(
    scene: &Scene,
    kind: ProviderKind,
    server: &MockLlm,
    args: &[&str],
    lines: &[String],
) -> Output {
    let mut cmd = sandcrab(scene, kind, server, "chat");
    cmd.args(["--json", "--approvals", "never"]).args(args);
    with_lines(cmd, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_turns_against_a_4096_token_model_never_brick_on_any_wire_format() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        std::fs::write(
            scene.workspace().join("notes.txt"),
            "The build runs with make; the tests with make check.\n",
        )
        .unwrap();
        // A tool output nearly the size of the window.
        std::fs::write(
            scene.workspace().join("big.log"),
            "2026-11-26 12:00:00 INFO a line of the service's log\n".repeat(220),
        )
        .unwrap();
        let server = MockLlm::strict(kind).await;
        server.window(kind, WINDOW);
        server.fallback(model(kind));

        let oversized = format!(
            "Turn 20: here is a whole file. {}",
            "a line of a file pasted whole into the input; ".repeat(400)
        );
        let mut lines: Vec<String> = (1..50)
            .map(|n| if n == 20 { oversized.clone() } else { input(n) })
            .collect();
        lines.insert(30, "/compact".into());
        lines.push(QUESTION.into());
        let out = chat(&scene, kind, &server, &[], &lines);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: {stderr}");
        assert_eq!(server.rejections(), Vec::<String>::new(), "{kind}");
        let all = events(&out.stdout);

        // Every input was answered but the one that cannot fit, which was
        // refused once, saying why and what to do; nothing closed.
        let errors = of_kind(&all, "ERROR");
        assert_eq!(errors.len(), 1, "{kind}: {errors:#?}");
        let said = errors[0]["data"]["message"].as_str().unwrap();
        assert!(
            said.contains("this input alone is about")
                && said.contains(&format!("context window of {WINDOW} tokens"))
                && said.contains("split the input"),
            "{kind}: {said}"
        );
        assert_eq!(errors[0]["data"]["closes_session"], false, "{kind}");
        let ends = of_kind(&all, "PROCESSING_END");
        assert_eq!(ends.len(), 49, "{kind}: {stderr}");
        assert!(
            !of_kind(&all, "SESSION_END")
                .iter()
                .any(|e| e["data"]["reason"] != "completed"),
            "{kind}"
        );

        // The window was learned from the provider's own refusal, and
        // after that almost nothing more was refused.
        let notices = of_kind(&all, "NOTICE");
        assert!(
            notices.iter().any(|n| n["data"]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("context window is {WINDOW} tokens"))),
            "{kind}: {notices:#?}"
        );
        let last_end = &ends[ends.len() - 1]["data"];
        assert_eq!(last_end["context_window"], WINDOW, "{kind}");
        let (accepted, refused) = server.counted();
        assert!(refused.len() <= 3, "{kind}: refused {refused:?}");
        let compactions = of_kind(&all, "COMPACTION_END")
            .iter()
            .filter(|c| c["data"]["messagesCompressed"].as_u64() > Some(0))
            .count();
        assert!(compactions >= 3, "{kind}: {compactions} compactions");

        // memory_read still works and finds the first turn's fact.
        let requests = server.requests();
        let last = requests
            .iter()
            .rev()
            .find(|r| !r.body.to_string().contains(SUMMARY_PROMPT))
            .unwrap();
        let call = all
            .iter()
            .rfind(|e| e["kind"] == "TOOL_CALL_START" && e["data"]["name"] == "memory_read")
            .unwrap_or_else(|| panic!("{kind}: memory_read was not called"));
        let id = call["data"]["call_id"].as_str().unwrap();
        let found = tool_result(kind, last, id, "memory_read");
        assert!(found.contains("FACT-01"), "{kind}: {found}");

        eprintln!(
            "{kind}: window learned {}, {compactions} compactions, largest request sent {} (as the provider counts), {} refused, {} requests",
            last_end["context_window"],
            accepted.iter().max().unwrap(),
            refused.len(),
            accepted.len() + refused.len(),
        );

        // The next session starts from the learned window, and goes on.
        let next = chat(&scene, kind, &server, &["--continue"], &[input(51)]);
        assert!(next.status.success(), "{kind}");
        let next = events(&next.stdout);
        let start = of_kind(&next, "SESSION_START")[0];
        assert_eq!(start["data"]["context_window"], WINDOW, "{kind}: {start}");
        assert_eq!(start["data"]["window_source"], "learned", "{kind}");
        assert!(of_kind(&next, "ERROR").is_empty(), "{kind}");
        assert_eq!(
            server.counted().1.len(),
            refused.len(),
            "{kind}: refused again"
        );

        // The flight recorder replays the whole session, refusals and all.
        let id = crate::sessions_test::only_session(&scene);
        let replay = sandcrab_cmd(&scene)
            .args(["replay", &id, "-w"])
            .arg(scene.workspace())
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&replay.stdout),
            String::from_utf8_lossy(&replay.stderr)
        );
        assert!(replay.status.success(), "{kind}: {said}");
        assert!(
            said.contains("every request the host built is the recorded one"),
            "{kind}: {said}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_says_its_models_window_and_it_is_used() {
    let scene = Scene::new();
    let kind = ProviderKind::Gemini;
    let server = MockLlm::strict(kind).await;
    server.describe(
        "/v1beta/models/test-model",
        json!({"name": "models/test-model", "inputTokenLimit": 32768, "outputTokenLimit": 8192}),
    );
    server.push(stream(kind, &Answer::Text(vec!["hi"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["--json", "hello"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = events(&out.stdout);
    let start = &of_kind(&all, "SESSION_START")[0]["data"];
    assert_eq!(start["context_window"], 32768, "{start}");
    assert_eq!(start["window_source"], "server", "{start}");
    assert_eq!(server.info_asked(), ["/v1beta/models/test-model"]);
    // Kept: the next run asks nothing.
    server.push(stream(kind, &Answer::Text(vec!["hi"])));
    let out = sandcrab(&scene, kind, &server, "run")
        .args(["--json", "hello"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(server.info_asked().len(), 1);
}

/// The operator's request in the tool-loop test.
const LOOP_INPUT: &str =
    "Read part 1 to part 14 of the report, one by one, then summarize them. REQUEST-MARK";

/// Parts the tool-loop model reads before it answers.
const PARTS: usize = 14;

/// Part `n` of the report: about 450 tokens, ending with its own mark.
fn part(n: usize) -> String {
    format!(
        "{}END-OF-PART-{n:02}\n",
        format!("part {n}: a line of the quarterly report, weighed with care\n").repeat(20)
    )
}

/// A scripted model that reads the parts one per round, then answers; a
/// summary that keeps nothing of what it read.
fn reader(kind: ProviderKind) -> impl Fn(&str, &Value) -> Reply + Send + 'static {
    move |_path, body| {
        let text = body.to_string();
        if text.contains(SUMMARY_PROMPT) {
            return complete(kind, &Answer::Text(vec!["Earlier, parts were read."]));
        }
        let read = (1..=PARTS)
            .filter(|n| text.contains(&format!("END-OF-PART-{n:02}")))
            .max()
            .unwrap_or(0);
        if !answers_a_tool(&last_entry(body)) || read < PARTS {
            let next = if answers_a_tool(&last_entry(body)) {
                read + 1
            } else {
                1
            };
            let call = tool(
                &format!("part{next}"),
                "read_file",
                json!({"file_path": format!("part{next}.txt")}),
            );
            return stream(kind, &Answer::Tools(vec![call]));
        }
        stream(kind, &Answer::Text(vec!["All fourteen parts are read."]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_tool_loop_keeps_the_operators_request_and_the_newest_output_whole() {
    for kind in ProviderKind::ALL {
        let scene = Scene::new();
        for n in 1..=PARTS {
            std::fs::write(scene.workspace().join(format!("part{n}.txt")), part(n)).unwrap();
        }
        let server = MockLlm::strict(kind).await;
        server.window(kind, WINDOW);
        server.fallback(reader(kind));
        let out = chat(&scene, kind, &server, &[], &[LOOP_INPUT.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: {stderr}");
        let all = events(&out.stdout);
        assert!(
            of_kind(&all, "ERROR").is_empty(),
            "{kind}: {:#?}",
            of_kind(&all, "ERROR")
        );
        let reads = of_kind(&all, "TOOL_CALL_START").len();
        assert_eq!(
            reads, PARTS,
            "{kind}: the model read every part (the positive control)"
        );

        // Every request the model got carries the operator's request whole,
        // and the output just read whole, its end mark included.
        let mut rounds = 0;
        for request in server.requests() {
            let body = request.body.to_string();
            if body.contains(SUMMARY_PROMPT) {
                continue;
            }
            assert!(
                body.contains(LOOP_INPUT),
                "{kind}: the operator's request was not sent:\n{}",
                last_entry(&request.body)
            );
            let last = last_entry(&request.body);
            if answers_a_tool(&last) {
                rounds += 1;
                assert!(
                    last.contains(&format!("END-OF-PART-{rounds:02}"))
                        && !last.contains("bytes cut"),
                    "{kind}: round {rounds}'s output was cut: {last}"
                );
            }
        }
        assert_eq!(rounds, PARTS, "{kind}");
        let (accepted, refused) = server.counted();
        eprintln!(
            "{kind}: {PARTS} rounds in a {WINDOW}-token window, largest request {} (provider count), {} refused",
            accepted.iter().max().unwrap(),
            refused.len()
        );
    }
}
