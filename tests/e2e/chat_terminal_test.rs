//! What `sandcrab chat` draws, read through a real pseudo-terminal in the
//! order the terminal received it.

use sandcrab::llm::ProviderKind;

use crate::cli_support::sandcrab;
use crate::llm_transcripts::{Answer, stream};
use crate::mock_llm::MockLlm;
use crate::pty::Terminal;
use crate::support::Scene;

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

/// A long answer in many small pieces, ending with `last`.
fn long_answer(pieces: usize, last: &'static str) -> Answer {
    let mut text: Vec<&'static str> = (0..pieces)
        .map(|i| &*Box::leak(format!("w{i} ").into_boxed_str()))
        .collect();
    text.push(last);
    Answer::Text(text)
}

/// The next prompt appears only once the answer is drawn whole: it never
/// lands in the middle of the answer (the screen once read `> p> ong`),
/// neither after a normal turn nor after an error and `/retry` — even on a
/// terminal slower than the model (here: one not read at all until the
/// turn is over, so drawing the answer blocks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_prompt_waits_for_the_whole_answer() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &long_answer(40_000, "FIRST-END")));
    // A provider that fails (retried, then reported), then answers.
    for _ in 0..3 {
        server.push(crate::mock_llm::Reply::json(
            500,
            serde_json::json!({"error": {"message": "overloaded"}}),
        ));
    }
    server.push(stream(KIND, &long_answer(40_000, "SECOND-END")));
    let mut term = Terminal::spawn(sandcrab(&scene, KIND, &server, "chat"));
    term.expect("> ");

    // A terminal that reads nothing while the turn runs and ends.
    let slow_turn = |term: &mut Terminal, input: &str, requests: usize, end: &str| {
        term.pause(true);
        term.send(input);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while server.requests().len() < requests {
            assert!(
                std::time::Instant::now() < deadline,
                "the model was not asked"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Time for the turn to end while its drawing is stuck.
        std::thread::sleep(std::time::Duration::from_secs(2));
        term.pause(false);
        let drawn = term.expect(end);
        let answer = &drawn[drawn.find("w0 ").expect("the answer")..];
        assert!(
            !answer.contains('>'),
            "a prompt inside the answer: …{}",
            &answer[answer.find('>').unwrap().saturating_sub(40)..][..80]
        );
        let after = term.expect("> ");
        assert!(
            after.contains('\n'),
            "the prompt shares the answer's line: {after:?}"
        );
    };
    slow_turn(&mut term, "talk\n", 1, "FIRST-END");

    term.send("again\n");
    term.expect("error: openai-compatible: server error");
    term.expect("> ");
    slow_turn(&mut term, "/retry\n", 5, "SECOND-END");
    term.exit();
}
