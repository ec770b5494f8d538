//! Cancelling through ACP: a cancel stops the prompt it is for whenever
//! it comes (in the same write, while the prompt waits behind another
//! turn, while a finished job waits to be heard), never the next one.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_right_after_a_prompt_a_second_prompt_and_a_second_load_are_safe() {
    let (scene, server) = scripted().await;
    let mut agent = RawAgent::start_with(&scene, &server, &["--approvals", "never"]);
    let cwd = scene.workspace().display().to_string();
    let send = |agent: &mut RawAgent, message: Value| agent.send(message.to_string().as_bytes());
    send(
        &mut agent,
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": cwd, "mcpServers": []}}),
    );
    let session = agent.until(|m| m["id"] == 1)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // A prompt and its cancel in one write: the turn never runs its call.
    let prompt = |id: u64, text: &str| json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId": session, "prompt": [{"type":"text","text": text}]}});
    let cancel = json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": session}});
    agent.send(format!("{}\n{}", prompt(2, "run the tests"), cancel).as_bytes());
    let (answered, ran) = agent.answer_and_ran(2);
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    assert!(!ran, "the cancelled turn ran its call");
    // A second prompt while one is answered is refused; the first goes on.
    send(&mut agent, prompt(3, "wait"));
    agent.until(|m| m["params"]["update"]["sessionUpdate"] == "tool_call");
    send(&mut agent, prompt(4, "hello"));
    let refused = agent.until(|m| m["id"] == 4);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("being answered"),
        "{refused}"
    );
    send(&mut agent, cancel.clone());
    let first = agent.until(|m| m["id"] == 3);
    assert_eq!(first["result"]["stopReason"], "cancelled", "{first}");
    // The control: the same prompt, not cancelled, runs its call.
    send(&mut agent, prompt(5, "run the tests"));
    let (answered, ran) = agent.answer_and_ran(5);
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(ran, "the call ran: {answered}");
    // Loading the open session again shows it, opens nothing new; a
    // prefix of its id opens nothing.
    send(
        &mut agent,
        json!({"jsonrpc":"2.0","id":6,"method":"session/load","params":{"sessionId": session, "cwd": cwd, "mcpServers": []}}),
    );
    let mut replayed = 0;
    let loaded = agent.until(|m| {
        replayed += usize::from(m["params"]["update"]["sessionUpdate"] == "user_message_chunk");
        m["id"] == 6
    });
    assert!(loaded.get("result").is_some(), "{loaded}");
    // (the prompt cancelled as it came became an input or not, as the
    // cancel found it: before the turn began, or in it)
    assert!(
        (2..=3).contains(&replayed),
        "the inputs shown again: {replayed}"
    );
    send(
        &mut agent,
        json!({"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId": &session[..4], "cwd": cwd, "mcpServers": []}}),
    );
    let prefix = agent.until(|m| m["id"] == 7);
    assert_eq!(prefix["error"]["code"], -32002, "{prefix}");
    // The session still answers in the same process.
    send(&mut agent, prompt(8, "hello"));
    assert_eq!(
        agent.until(|m| m["id"] == 8)["result"]["stopReason"],
        "end_turn"
    );
    // Loaded again while a prompt runs: the running turn is still the
    // one a cancel stops (no second session took its place).
    send(&mut agent, prompt(9, "wait"));
    agent.until(|m| m["params"]["update"]["sessionUpdate"] == "tool_call");
    send(
        &mut agent,
        json!({"jsonrpc":"2.0","id":10,"method":"session/load","params":{"sessionId": session, "cwd": cwd, "mcpServers": []}}),
    );
    agent.until(|m| m["id"] == 10);
    send(&mut agent, cancel.clone());
    let running = agent.until(|m| m["id"] == 9);
    assert_eq!(running["result"]["stopReason"], "cancelled", "{running}");
}

/// A prompt cancelled while it waits behind a turn the session took by
/// itself (a background job finished) is never taken: its call does not
/// run once that turn ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_cancelled_while_it_waits_for_a_woken_turn_never_runs() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.fallback(|_path, body| {
        let last = last_entry(body);
        if last.contains("background jobs that finished") {
            // The turn the finished job woke: slow to answer.
            return stream(KIND, &Answer::Text(vec!["Noted."])).delayed(Duration::from_secs(3));
        }
        if last.contains("tool_result") {
            return stream(KIND, &Answer::Text(vec!["The call is done."]));
        }
        if last.contains("start the job") {
            let call = tool(
                "job",
                "shell",
                json!({"command": "sleep 1; echo job-finished", "run_in_background": true}),
            );
            return stream(KIND, &Answer::Tools(vec![call]));
        }
        if last.contains("run the tests") {
            let id = format!("call-{}", body.to_string().len());
            return stream(
                KIND,
                &Answer::Tools(vec![tool(
                    &id,
                    "shell",
                    json!({"command": "echo tests-pass"}),
                )]),
            );
        }
        stream(KIND, &Answer::Text(vec!["Hello."]))
    });
    let mut agent = RawAgent::start_with(&scene, &server, &["--approvals", "never"]);
    let session = agent.new_session(&scene);
    let prompt = |id: u64, text: &str| prompt_message(&session, id, text);
    agent.send(prompt(2, "start the job").as_bytes());
    assert_eq!(
        agent.until(|m| m["id"] == 2)["result"]["stopReason"],
        "end_turn"
    );
    // The job ends; the turn it wakes is asking the model.
    let started = std::time::Instant::now();
    while !server
        .requests()
        .iter()
        .any(|r| last_entry(&r.body).contains("background jobs that finished"))
    {
        assert!(started.elapsed() < Duration::from_secs(20), "no turn woke");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The prompt comes and waits behind that turn; then the cancel.
    agent.send(prompt(3, "run the tests").as_bytes());
    std::thread::sleep(Duration::from_millis(500));
    agent.send(cancel_message(&session).as_bytes());
    let (answered, did) = agent.answer_and_ran(3);
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    assert!(!did, "the prompt cancelled before its turn ran its call");
    // The control: the same prompt, not cancelled, runs its call.
    agent.send(prompt(4, "run the tests").as_bytes());
    let (answered, did) = agent.answer_and_ran(4);
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(did, "the call ran: {answered}");
}

/// A prompt cancelled while a background job it started has finished
/// and waits to be heard: the next prompt is answered (it does not hang
/// behind the stopped one), and the job is told to the model afterwards —
/// in a turn of its own, or, when it finished as the next prompt came,
/// with that prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_with_a_finished_job_waiting_leaves_the_session_answering() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.fallback(|_path, body| {
        let last = last_entry(body);
        if last.contains("background jobs that finished") {
            return stream(KIND, &Answer::Text(vec!["Noted."]));
        }
        if last.contains("tool_result") {
            // Slow: the job finishes while this answer is awaited.
            return stream(KIND, &Answer::Text(vec!["Started."])).delayed(Duration::from_secs(3));
        }
        if last.contains("start the job") {
            let call = tool(
                "job",
                "shell",
                json!({"command": "sleep 1; echo job-finished", "run_in_background": true}),
            );
            return stream(KIND, &Answer::Tools(vec![call]));
        }
        stream(KIND, &Answer::Text(vec!["Hello."]))
    });
    let mut agent = RawAgent::start_with(&scene, &server, &["--approvals", "never"]);
    let session = agent.new_session(&scene);
    let prompt = |id: u64, text: &str| prompt_message(&session, id, text);
    agent.send(prompt(2, "start the job").as_bytes());
    // The job is running; its answer is awaited past the job's end.
    agent.until(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update");
    std::thread::sleep(Duration::from_millis(1_800));
    agent.send(cancel_message(&session).as_bytes());
    assert_eq!(
        agent.until(|m| m["id"] == 2)["result"]["stopReason"],
        "cancelled"
    );
    agent.send(prompt(3, "hello").as_bytes());
    let answered = agent.until(|m| m["id"] == 3);
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    // The job was told to the model: in a turn of its own, or with the
    // next prompt when it finished as that prompt came (a loaded machine).
    crate::support::eventually(
        "the finished job told to the model",
        Duration::from_secs(15),
        || {
            server
                .requests()
                .iter()
                .any(|r| r.body.to_string().contains("background jobs that finished"))
        },
    )
    .await;
}
