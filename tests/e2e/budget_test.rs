//! Spend caps through the binary, against a loopback provider that reports
//! usage (and, as OpenRouter does, cost): a cap reached mid-run stops the
//! loop before the request is sent (exit 4, SPEND_CAP, the RESULT line),
//! a request that fits gets its answer capped to the room left, cost
//! counts only where it is reported or priced, a subagent's spend stops
//! its parent, `chat` asks whether to raise the cap, and a replay stops
//! at the same call.

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{events, sandcrab};
use crate::llm_transcripts::{Answer, tool};
use crate::mock_llm::{MockLlm, Reply};
use crate::pty::Terminal;
use crate::support::{Scene, latest_session_id, sandcrab_cmd};

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

/// `answer` as a Chat Completions stream whose usage reports `prompt` and
/// `completion` tokens and, when given, a `cost` in US dollars.
fn billed(answer: &Answer, prompt: u64, completion: u64, cost: Option<f64>) -> Reply {
    let mut usage = json!({"prompt_tokens": prompt, "completion_tokens": completion});
    if let Some(cost) = cost {
        usage["cost"] = json!(cost);
    }
    let mut replaced = false;
    let text: Vec<String> = crate::llm_transcripts::chat(answer)
        .lines()
        .map(|line| match line.strip_prefix("data: ") {
            Some(data) if data.contains("\"usage\"") => {
                let mut chunk: Value = serde_json::from_str(data).unwrap();
                chunk["usage"] = usage.clone();
                replaced = true;
                format!("data: {chunk}")
            }
            _ => line.to_string(),
        })
        .collect();
    assert!(replaced, "the usage was replaced");
    let text = text.join("\n") + "\n";
    Reply::sse(text)
}

fn shell(id: &str, command: &str) -> Answer {
    Answer::Tools(vec![tool(id, "shell", json!({"command": command}))])
}

fn result_of(stdout: &[u8]) -> Value {
    events(stdout).last().cloned().expect("a RESULT line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_cap_stops_the_run_before_the_request_that_cannot_fit() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 48_000, 1_000, None));
    server.push(billed(&shell("c2", "true"), 49_000, 1_000, None));
    server.push(billed(&Answer::Text(vec!["never"]), 10, 5, None));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-tokens-total", "100000", "--json", "work hard"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    // Two calls answered; the third did not fit and was never sent.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the request over the cap was sent");
    // The second call's answer was capped to what was left.
    let capped = requests[1].body["max_tokens"].as_u64().expect("max_tokens");
    assert!(capped < 51_000, "answer not capped to the room: {capped}");
    let all = events(&out.stdout);
    let cap = all
        .iter()
        .find(|e| e["kind"] == "SPEND_CAP")
        .expect("a SPEND_CAP event");
    assert_eq!(cap["data"]["cap"], "tokens", "{cap}");
    assert_eq!(cap["data"]["spend"]["tokens"], 99_000, "{cap}");
    // The input's end says what stopped it.
    let end = all
        .iter()
        .rfind(|e| e["kind"] == "PROCESSING_END")
        .expect("PROCESSING_END");
    assert_eq!(end["data"]["spend_cap"]["cap"], "tokens", "{end}");
    let result = result_of(&out.stdout);
    assert_eq!(result["data"]["status"], "spend_cap", "{result}");
    assert_eq!(result["data"]["spend"]["max_tokens"], 100_000, "{result}");
    assert!(
        result["data"]["spend_cap"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-tokens-total"),
        "{result}"
    );

    // Control: the same work with room ends 0 and sends every request.
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 48_000, 1_000, None));
    server.push(billed(&shell("c2", "true"), 48_000, 1_000, None));
    server.push(billed(&Answer::Text(vec!["done"]), 10, 5, None));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-tokens-total", "1000000", "work hard"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_counts_what_the_provider_reports_and_an_unknown_cost_is_not_guessed() {
    let scene = Scene::new();
    // The provider reports cost: $0.06 + $0.05 reaches a cap of $0.10.
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 100, 10, Some(0.06)));
    server.push(billed(&shell("c2", "true"), 100, 10, Some(0.05)));
    server.push(billed(&Answer::Text(vec!["never"]), 10, 5, Some(0.01)));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-cost", "0.10", "spend"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(server.requests().len(), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("$0.1100 of $0.10") && stderr.contains("--max-cost"),
        "{stderr}"
    );

    // No cost reported and no price: the cap cannot be kept, so the next
    // call is not made (one call of unknown cost at most).
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 100, 10, None));
    server.push(billed(&Answer::Text(vec!["never"]), 10, 5, None));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-cost", "5", "spend"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(server.requests().len(), 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown") && stderr.contains("[budget.prices]"),
        "{stderr}"
    );

    // The operator's prices make the same run countable: it goes on.
    scene.write_user_config("[budget.prices.test-model]\ninput = 1.0\noutput = 2.0\n");
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 100, 10, None));
    server.push(billed(&Answer::Text(vec!["priced"]), 10, 5, None));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-cost", "5", "--json", "spend"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result = result_of(&out.stdout);
    // 110 input at $1/M and 15 output at $2/M.
    let cost = result["data"]["spend"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00014).abs() < 1e-9, "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_spend_counts_against_the_session_that_started_it() {
    let scene = Scene::new();
    scene.write_user_config("[budget]\nmax_tokens_total = 100000\n");
    let server = MockLlm::strict(KIND).await;
    // The parent starts a child in the background, then waits.
    server.push(billed(
        &Answer::Tools(vec![tool(
            "s1",
            "spawn_agent",
            json!({"task": "CHILD-TASK: check things", "run_in_background": true}),
        )]),
        500,
        50,
        None,
    ));
    server.push(billed(&Answer::Text(vec!["waiting"]), 500, 50, None));
    // The child spends what the parent has.
    server.push_for(
        "CHILD-TASK",
        billed(&shell("k1", "echo CHILD-STEP-ONE"), 60_000, 1_000, None),
    );
    server.push_for(
        "CHILD-STEP-ONE",
        billed(&shell("k2", "echo CHILD-STEP-TWO"), 38_000, 1_000, None),
    );
    server.push_for(
        "CHILD-STEP-TWO",
        billed(&Answer::Text(vec!["never"]), 10, 5, None),
    );
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--json", "--wait-jobs", "60", "delegate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let last_messages: Vec<String> = server
        .requests()
        .iter()
        .map(|r| {
            r.body["messages"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(last_messages.len(), 4, "{last_messages:#?}");
    assert!(
        !last_messages.iter().any(|m| m.contains("CHILD-STEP-TWO")),
        "the child went on past the parent's cap: {last_messages:#?}"
    );
    let all = events(&out.stdout);
    let cap = all
        .iter()
        .find(|e| e["kind"] == "SPEND_CAP")
        .expect("the parent's SPEND_CAP");
    assert_eq!(cap["data"]["parents"], false, "{cap}");
    assert!(
        cap["data"]["spend"]["tokens"].as_u64().unwrap() >= 100_000,
        "the child's spend is the parent's: {cap}"
    );
    // The child's result, kept for the parent, says why it stopped.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("stopped_by_spend_cap")
            && stdout.contains("the parent session's spend cap reached"),
        "the child's result does not say it was stopped: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_asks_to_raise_the_cap_and_goes_on_when_told() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "true"), 9_000, 500, None));
    server.push(billed(
        &Answer::Text(vec!["finished after the raise"]),
        100,
        10,
        None,
    ));
    let mut chat = sandcrab(&scene, KIND, &server, "chat");
    chat.args(["--max-tokens-total", "10000", "--approvals", "never"]);
    let mut term = Terminal::spawn(chat);
    term.expect("> ");
    term.send("do it\n");
    let shown = term.expect("[y/N]");
    assert!(shown.contains("--max-tokens-total"), "{shown}");
    assert!(
        shown.contains("raise it by 10000 tokens (to 20000 tokens)"),
        "{shown}"
    );
    assert_eq!(server.requests().len(), 1, "sent before the answer");
    term.send("y\n");
    let shown = term.expect("finished after the raise");
    let status = term.expect("> ");
    assert!(
        format!("{shown}{status}").contains("spent 9.6k/20.0k tokens"),
        "the status line shows spend against the cap: {shown}{status}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stops_at_the_same_call_the_cap_stopped() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(billed(&shell("c1", "echo one"), 48_000, 1_000, None));
    server.push(billed(&shell("c2", "echo two"), 49_500, 1_000, None));
    let out = sandcrab(&scene, KIND, &server, "run")
        .args(["--max-tokens-total", "100000", "work hard"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let id = latest_session_id(&scene);
    let out = sandcrab_cmd(&scene)
        .args(["replay", &id, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("every request the host built is the recorded one"),
        "{said}"
    );
    assert!(said.contains("spend cap reached"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summaries_compaction_asks_for_count_against_the_session() {
    const SUMMARY_PROMPT: &str = "New messages to fold into the summary";
    let scene = Scene::new();
    scene.write_user_config(
        "[providers.openai-compatible]\ncontext_window = 4000\n\
         [summarization]\nkeep_recent = 2\nchunk_size = 4\n",
    );
    let server = MockLlm::strict(KIND).await;
    let summary = json!({"id": "chatcmpl-s", "object": "chat.completion", "model": "local-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "The user gave steps."},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50_000, "completion_tokens": 100}});
    for _ in 0..10 {
        server.push_for(SUMMARY_PROMPT, Reply::json(200, summary.clone()));
    }
    let steps = 6;
    for i in 0..steps {
        server.push_for(
            &format!("Step {i}:"),
            billed(&Answer::Text(vec!["Noted."]), 10, 5, None),
        );
    }
    let mut chat = sandcrab(&scene, KIND, &server, "chat");
    chat.args(["--json", "--max-tokens-total", "100000000"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = chat.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for i in 0..steps {
            let filler = "Some detail about the task. ".repeat(55);
            writeln!(stdin, "Step {i}: remember this. {filler}").unwrap();
        }
        writeln!(stdin, "/exit").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let summaries = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(SUMMARY_PROMPT))
        .count() as u64;
    assert!(summaries > 0, "nothing was compacted");
    let spend = events(&out.stdout)
        .into_iter()
        .rfind(|e| e["kind"] == "PROCESSING_END")
        .expect("a PROCESSING_END")["data"]["spend"]
        .clone();
    assert_eq!(
        spend["tokens"].as_u64(),
        Some(steps * 15 + summaries * 50_100),
        "the summaries' tokens are not the session's spend: {spend}"
    );
}
