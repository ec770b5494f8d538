//! `sandcrab chat` as a person uses it, through a real pseudo-terminal:
//! typing with edits and history, pasting, completing a path, seeing an
//! edit's diff and undoing it, watching a slow command and interrupting
//! it, a resize; and hostile model or tool output shown as text. Screens
//! are read with a terminal emulator (vt100), so what is asserted is what
//! a person would see.

use sandcrab::llm::ProviderKind;
use serde_json::json;

use crate::cli_support::sandcrab;
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::pty::Terminal;
use crate::support::Scene;

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;
const COLS: u16 = 100;
const ROWS: u16 = 40;

fn text(pieces: &[&str]) -> Answer {
    Answer::Text(
        pieces
            .iter()
            .map(|p| &*Box::leak(p.to_string().into_boxed_str()))
            .collect(),
    )
}

fn chat(scene: &Scene, server: &MockLlm, extra: &[&str]) -> std::process::Command {
    let mut cmd = sandcrab(scene, KIND, server, "chat");
    cmd.args(extra);
    cmd
}

/// The last row of `screen` with something on it.
fn last_row(screen: &[String]) -> &str {
    screen
        .iter()
        .rfind(|row| !row.is_empty())
        .map_or("", |row| row.as_str())
}

/// A model answer that starts `command` as a background job.
fn in_background(command: &str) -> Answer {
    Answer::Tools(vec![tool(
        "c1",
        "shell",
        json!({"command": command, "run_in_background": true}),
    )])
}

/// The user message text of request `n` (every message's content, joined).
fn sent(server: &MockLlm, n: usize) -> String {
    let requests = server.requests();
    let body = &requests[n].body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without sandcrab's SGR styles (and the line editor's escapes).
fn unstyled(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() || c == '~' {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn wait_for_requests(server: &MockLlm, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.requests().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the model was not asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_shows_as_a_coloured_diff_and_undo_puts_the_file_back() {
    let scene = Scene::new();
    let file = scene.workspace().join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\ngamma\n").unwrap();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "edit_file",
            json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "BETA"}),
        )]),
    ));
    server.push(stream(KIND, &text(&["Changed it."])));
    server.push(stream(KIND, &text(&["Noted."])));
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    term.send("uppercase beta\r");
    term.expect("Changed it.");
    term.expect("> ");
    let seen = term.seen();
    assert!(
        seen.contains("\x1b[31m-beta\x1b[0m") && seen.contains("\x1b[32m+BETA\x1b[0m"),
        "no coloured diff: {seen:?}"
    );
    let screen = term.screen(COLS, ROWS).join("\n");
    assert!(screen.contains("● changed notes.txt (+1 −1)"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nBETA\ngamma\n"
    );

    term.send("/diff\r");
    term.expect("+BETA");
    term.expect("> ");
    term.send("/undo\r");
    term.expect("restored notes.txt");
    term.expect("-BETA");
    term.expect("> ");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nbeta\ngamma\n"
    );
    // The model hears of it with the next message.
    term.send("and now?\r");
    term.expect("Noted.");
    wait_for_requests(&server, 3);
    assert!(
        sent(&server, 2).contains("undid the file changes"),
        "{}",
        sent(&server, 2)
    );
    term.send("/undo\r");
    term.expect("nothing to undo");
    term.exit();
}

/// A call leaves a file too large to read back: the screen says its
/// change is not shown, and `/undo` (here in the conversation continued
/// later) never throws away the operator's later edit of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_too_large_to_read_back_is_said_and_a_later_edit_survives_undo() {
    let scene = Scene::new();
    let file = scene.workspace().join("big.txt");
    std::fs::write(&file, "precious\n").unwrap();
    let server = MockLlm::strict(KIND).await;
    let huge = "x".repeat(sandcrab::checkpoint::MAX_FILE as usize + 1);
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "write_file",
            json!({"file_path": "big.txt", "content": huge}),
        )]),
    ));
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("fill big.txt\r");
    term.expect("cannot be read back after the call");
    // The 8 MiB argument then overflows the context and the server's body
    // limit: refused with 413, or the connection is cut while it is still
    // being sent (which comes first depends on timing). Either way the
    // request fails, and the conversation is saved.
    term.expect("error: openai-compatible");
    term.exit();
    std::fs::write(&file, "the operator's edit\n").unwrap();
    let out = chat(&scene, &server, &["--continue"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            writeln!(child.stdin.take().unwrap(), "/undo\n/exit").unwrap();
            child.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not undone: big.txt changed since"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "the operator's edit\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_edits_history_paste_and_path_completion_reach_the_model() {
    let scene = Scene::new();
    std::fs::create_dir_all(scene.workspace().join("docs")).unwrap();
    std::fs::write(scene.workspace().join("docs/guide.md"), "GUIDE-CONTENT\n").unwrap();
    let server = MockLlm::strict(KIND).await;
    for answer in ["first", "second", "third", "fourth"] {
        server.push(stream(KIND, &text(&[answer])));
    }
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    // A typo fixed with the arrow keys.
    term.send("hello wrld");
    term.send("\x1b[D\x1b[D\x1b[D");
    term.send("o\r");
    term.expect("first");
    term.expect("> ");
    wait_for_requests(&server, 1);
    assert!(
        sent(&server, 0).contains("hello world"),
        "{}",
        sent(&server, 0)
    );

    // Three pasted lines are one message.
    term.send("\x1b[200~line one\nline two\nline three\x1b[201~\r");
    term.expect("second");
    term.expect("> ");
    assert!(
        sent(&server, 1).contains("line one\\nline two\\nline three"),
        "{}",
        sent(&server, 1)
    );

    // Tab completes a workspace path after @; the file is attached.
    term.send("summarize @docs/gu\t");
    term.expect("guide.md");
    term.send("\r");
    term.expect("attached docs/guide.md");
    term.expect("third");
    term.expect("> ");
    assert!(
        sent(&server, 2).contains("GUIDE-CONTENT"),
        "{}",
        sent(&server, 2)
    );
    term.exit();

    // History is kept across runs, per workspace.
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    // Up recalls the last input; Ctrl-R finds an older one.
    term.send("\x1b[A");
    term.expect("/exit");
    term.send("\x15\x12hello w");
    term.expect("hello world");
    term.send("\r");
    term.expect("fourth");
    wait_for_requests(&server, 4);
    let history: Vec<String> = std::fs::read_dir(scene.root.path().join("data/sandcrab/history"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(
        sent(&server, 3).contains("hello world"),
        "{} (history: {history:?}; screen: {})",
        sent(&server, 3),
        term.seen()
    );
    term.exit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_command_shows_live_output_and_can_be_interrupted() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let slow = "for i in 1 2 3 4 5 6 7 8; do echo tick$i; sleep 0.4; done";
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": slow}))]),
    ));
    server.push(stream(KIND, &text(&["Ran it."])));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c2",
            "shell",
            json!({"command": "echo started; sleep 60; echo never"}),
        )]),
    ));
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("run the slow thing\r");
    term.expect("tick2");
    // While it runs: a block with a spinner, the tool and the time.
    let running = term.screen(COLS, ROWS).join("\n");
    assert!(
        running.contains("shell ·") && running.contains("│ tick2") && !running.contains("Ran it."),
        "{running}"
    );
    term.expect("Ran it.");
    term.expect("> ");
    // Done: collapsed, the first and last lines kept, the block gone.
    let screen = term.screen(COLS, ROWS).join("\n");
    assert!(
        screen.contains("│ tick1") && screen.contains("│ tick8"),
        "{screen}"
    );
    assert!(screen.contains("… 3 more lines"), "{screen}");
    assert!(
        !screen.contains("shell ·"),
        "the live block stayed: {screen}"
    );

    term.send("start the long one\r");
    term.expect("started");
    term.send("\x03");
    term.expect("(interrupted)");
    term.expect("> ");
    term.exit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_and_tool_output_are_shown_as_text() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let hostile = "clip\x1b]52;c;cHduZWQ=\x07 wipe\x1b[2J home\x1b[H \u{202e}evil\n● changed fake.txt (+1 −1)\n--- a/x\n+++ b/x\n";
    server.push(stream(
        KIND,
        &Answer::Tools(vec![
            tool(
                "c1",
                "shell",
                json!({"command": "printf 'out\\033]52;c;aGk=\\007 \\033[9;9H\\n'"}),
            ),
            // A tool name made to draw sandcrab's own change header.
            tool(
                "c2",
                "read_file\n● changed src/app.py (+3 −0)\n  │ +import os",
                json!({}),
            ),
        ]),
    ));
    server.push(stream(KIND, &text(&[hostile])));
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("go\r");
    term.expect("evil");
    term.expect("> ");
    let seen = term.seen();
    for raw in [
        "\x1b]52",
        "\x1b[2J",
        "\x1b[H",
        "\x1b[9;9H",
        "\u{202e}",
        "\x07",
    ] {
        assert!(
            !seen.contains(raw),
            "{raw:?} reached the terminal: {seen:?}"
        );
    }
    let screen = term.screen(COLS, ROWS).join("\n");
    assert!(screen.contains("\\u{1b}]52;c;cHduZWQ="), "{screen}");
    assert!(
        screen.contains("\\u{1b}]52;c;aGk="),
        "tool output: {screen}"
    );
    // The model's fake header is its text, not sandcrab's: no diff colours.
    assert!(!seen.contains("\x1b[1mchanged fake.txt"), "{seen:?}");
    assert!(
        !screen
            .lines()
            .any(|row| row.starts_with("● changed src/app.py")),
        "a tool name drew a row of its own: {screen}"
    );
    term.exit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_is_rendered_and_rewrapped_after_a_resize() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    let long = "word ".repeat(60);
    let answer = format!(
        "# Plan\n\nSome **bold** and `code`.\n\n- {long}\n\n```rust\nfn main() {{}}\n```\n"
    );
    server.push(stream(KIND, &text(&[&answer])));
    server.push(stream(KIND, &text(&[&format!("- {long}\n")])));
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    term.send("plan\r");
    term.expect("main()");
    term.expect("> ");
    let seen = term.seen();
    assert!(
        seen.contains("\x1b[1mbold\x1b[0m") && !seen.contains("**bold**"),
        "{seen:?}"
    );
    assert!(seen.contains("\x1b[35mfn\x1b[0m"), "code highlighted");
    let first = unstyled(&seen);
    assert!(first.contains("• word word"), "{first}");

    term.resize(40, ROWS);
    term.send("again\r");
    let second = unstyled(&term.expect("> "));
    let lines: Vec<&str> = second
        .split(['\r', '\n'])
        .filter(|l| l.contains("word"))
        .collect();
    assert!(lines.len() > 5, "{second}");
    for line in lines {
        assert!(
            line.chars().count() <= 40,
            "wider than the terminal: {line:?}"
        );
    }
    term.exit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_color_and_dumb_terminals_get_plain_text() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &text(&["**plain** answer\n"])));
    server.push(stream(KIND, &text(&["**dumb** answer\n"])));
    let mut cmd = chat(&scene, &server, &[]);
    cmd.env("NO_COLOR", "1");
    let mut term = Terminal::spawn(cmd);
    term.expect("> ");
    term.send("hi\r");
    term.expect("answer");
    term.expect("> ");
    let seen = term.exit();
    assert!(seen.contains("**plain** answer"), "{seen:?}");
    assert!(
        !seen.contains("\x1b[1m") && !seen.contains("\x1b[2m"),
        "{seen:?}"
    );

    let mut cmd = chat(&scene, &server, &[]);
    cmd.env("TERM", "dumb");
    let mut term = Terminal::spawn(cmd);
    term.expect("> ");
    term.send("hi\n");
    term.expect("answer");
    term.expect("> ");
    let seen = term.exit();
    assert!(
        !seen.contains('\x1b'),
        "escapes on a dumb terminal: {seen:?}"
    );
}

/// A call streams output while another waits for the operator: nothing
/// draws over the approval prompt (the live block once erased the
/// prompt's lines and redrew the other call's output in their place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_draws_over_an_approval_prompt() {
    let scene = Scene::new();
    // A program without a slash or a shell keyword, so a rule can allow it.
    let ticker = "python3 -u -c 'import time; [(print(f\"tick{i}\"), time.sleep(0.1)) for i in range(1, 61)]'";
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![
            tool("c1", "shell", json!({"command": ticker})),
            tool("c2", "shell", json!({"command": "rm -rf build-output"})),
        ]),
    ));
    server.push(stream(KIND, &text(&["All done."])));
    let mut term = Terminal::spawn_sized(
        chat(&scene, &server, &["--approve", "shell:python3"]),
        COLS,
        ROWS,
    );
    term.expect("> ");
    term.send("clean up\r");
    term.expect("answer [y/s/a/n]: ");
    // The ticker keeps printing for seconds while the operator reads.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let screen = term.screen(COLS, ROWS);
    let last = last_row(&screen);
    assert!(
        last.starts_with("answer [y/s/a/n]:"),
        "the prompt was drawn over:\n{}",
        screen.join("\n")
    );
    let shown = screen.join("\n");
    assert!(shown.contains("rm -rf build-output"), "{shown}");
    term.send("n\r");
    term.expect("All done.");
    term.expect("> ");
    let after = term.screen(COLS, ROWS).join("\n");
    assert!(
        after.contains("│ tick60"),
        "the ticker's output after the answer: {after}"
    );
    term.exit();
}

/// A background job ends while the operator is typing: its notice is
/// printed above the prompt, and the prompt with what was typed so far is
/// drawn again below it (a notice never lands inside the input line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_notice_lands_above_the_line_being_typed() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &in_background("sleep 2")));
    server.push(stream(KIND, &text(&["Started it."])));
    server.push(stream(KIND, &text(&["The job is done."])));
    server.push(stream(KIND, &text(&["Noted."])));
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("start the job\r");
    term.expect("Started it.");
    term.expect("> ");
    term.send("half a thou");
    term.expect("half a thou");
    term.expect("background job");
    term.expect("completed");
    term.expect("The job is done.");
    std::thread::sleep(std::time::Duration::from_millis(800));
    let screen = term.screen(COLS, ROWS);
    let last = last_row(&screen);
    assert_eq!(
        last,
        "> half a thou",
        "the prompt was not drawn again below the notice:\n{}",
        screen.join("\n")
    );
    let notice = screen
        .iter()
        .find(|row| row.contains("background job") && row.contains("completed"))
        .expect("a notice");
    assert!(
        !notice.contains("half a thou"),
        "the notice landed inside the input line:\n{}",
        screen.join("\n")
    );
    let status = screen
        .iter()
        .position(|row| row.starts_with("── test-model"))
        .expect("a status line");
    assert!(
        screen[status + 1].starts_with(['>', '●']),
        "the status line took more than a row:\n{}",
        screen.join("\n")
    );
    assert!(
        screen.iter().any(|row| row == "The job is done."),
        "the turn the job woke is shown above the prompt:\n{}",
        screen.join("\n")
    );
    // It has a status line of its own, right above the prompt.
    let prompt = screen
        .iter()
        .rposition(|row| row.starts_with("> half"))
        .unwrap();
    assert!(
        screen[prompt - 1].starts_with("── test-model"),
        "no status line after the woken turn:\n{}",
        screen.join("\n")
    );
    // What was typed is still there to finish and send.
    term.send("ght\r");
    term.expect("Noted.");
    term.exit();
    assert!(
        sent(&server, 3).contains("half a thought"),
        "{}",
        sent(&server, 3)
    );
}

/// A turn a finished job woke asks for approval while the operator is
/// typing a message: the request is shown above the prompt, but what was
/// typed before it existed never answers it (a "yes" meant for the model
/// once ran the command); it is asked with a prompt of its own once the
/// message is sent, and the message goes to the model after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_typed_before_an_approval_request_never_answers_it() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &in_background("sleep 1")));
    server.push(stream(
        KIND,
        &text(&["Started it. Shall I go on? Answer yes or no."]),
    ));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c2", "shell", json!({"command": "touch PWNED"}))]),
    ));
    server.push(stream(KIND, &text(&["Understood, I left it."])));
    server.push(stream(KIND, &text(&["Got your yes."])));
    let mut term = Terminal::spawn_sized(
        chat(&scene, &server, &["--approve", "shell:sleep"]),
        COLS,
        ROWS,
    );
    term.expect("> ");
    term.send("start the job\r");
    term.expect("Answer yes or no.");
    term.expect("> ");
    term.send("ye");
    term.expect("press Enter to answer it");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let screen = term.screen(COLS, ROWS);
    assert_eq!(last_row(&screen), "> ye", "{}", screen.join("\n"));
    assert!(
        screen
            .iter()
            .any(|row| row.contains("command: touch PWNED")),
        "{}",
        screen.join("\n")
    );
    term.send("s\r");
    term.expect("answer [y/s/a/n]: ");
    assert!(
        !scene.workspace().join("PWNED").exists(),
        "the typed line answered"
    );
    term.send("n not now\r");
    term.expect("Understood, I left it.");
    term.expect("Got your yes.");
    term.exit();
    assert!(!scene.workspace().join("PWNED").exists());
    assert!(server.requests()[3].body.to_string().contains("not now"));
    assert!(sent(&server, 4).contains("yes"), "{}", sent(&server, 4));
}

/// A background job ends while an answer with a code block is being
/// drawn: its notice follows the answer, which stays whole (the notice
/// once split a line and broke the code block in two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_notice_waits_for_the_answer_being_drawn() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &in_background("sleep 1")));
    server.push(stream(KIND, &text(&["Started."])));
    let mut pieces = vec!["Here is the script:\n\n```bash\n"];
    pieces.extend(std::iter::repeat_n("echo step\n", 12));
    pieces.extend([
        "# deploy step\n",
        "- not a list\n",
        "```\n\n",
        "Answer ends here.",
    ]);
    server.push(
        stream(KIND, &text(&pieces))
            .eventwise()
            .delayed(std::time::Duration::from_millis(150)),
    );
    server.push(stream(KIND, &text(&["Job noted."])));
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("start the job\r");
    term.expect("Started.");
    term.expect("> ");
    term.send("show the script\r");
    term.expect("Answer ends here.");
    term.expect("completed");
    term.expect("Job noted.");
    let screen = term.screen(COLS, ROWS);
    let row = |needle: &str| {
        screen
            .iter()
            .position(|row| row.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} on:\n{}", screen.join("\n")))
    };
    assert!(
        row("completed") > row("Answer ends here."),
        "the notice split the answer:\n{}",
        screen.join("\n")
    );
    assert_eq!(
        screen.iter().filter(|r| r.contains('┌')).count(),
        1,
        "the code block was broken in two:\n{}",
        screen.join("\n")
    );
    term.exit();
}

/// Keys typed while a turn runs are not echoed into what is drawn, and a
/// line typed ahead never answers an approval request that comes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_typed_during_a_turn_neither_draw_nor_answer() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": "sleep 1.5"}))]),
    ));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c2", "shell", json!({"command": "touch PWNED"}))]),
    ));
    server.push(stream(KIND, &text(&["Fine, I did not."])));
    // For a "yes" kept as the next input, should it be.
    server.push(stream(KIND, &text(&["Heard."])));
    let mut term = Terminal::spawn_sized(
        chat(&scene, &server, &["--approve", "shell:sleep"]),
        COLS,
        ROWS,
    );
    term.expect("> ");
    // A burst: the message and a "yes" right after it, read together.
    term.send("wait a bit\ryes\r");
    term.expect("(sleep 1.5)");
    term.send("typed ahead yes\r");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let during = term.screen(COLS, ROWS).join("\n");
    assert!(!during.contains("typed ahead"), "echoed: {during}");
    term.expect("answer [y/s/a/n]: ");
    assert!(
        !scene.workspace().join("PWNED").exists(),
        "typed ahead answered"
    );
    let asked = term.screen(COLS, ROWS).join("\n");
    assert!(
        asked.contains("typed before this question were set aside"),
        "{asked}"
    );
    term.send("n\r");
    term.expect("Fine, I did not.");
    term.exit();
    assert!(!scene.workspace().join("PWNED").exists());
}

/// Lines typed ahead during a turn each reach a prompt of their own, in
/// order, and a paste during a turn stays one input (only the first line
/// once survived, and a paste arrived as separate lines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_ahead_lines_and_a_paste_during_a_turn_wait_for_the_prompt() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": "sleep 1.5"}))]),
    ));
    for reply in ["Slept.", "Got second.", "Got third.", "Got the paste."] {
        server.push(stream(KIND, &text(&[reply])));
    }
    let mut term =
        Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
    term.expect("> ");
    term.send("wait a bit\r");
    term.expect("(sleep 1.5)");
    term.send("second\rthird\r");
    term.send("\x1b[200~def f():\n    return 1\x1b[201~\r");
    term.expect("Got the paste.");
    term.exit();
    assert!(sent(&server, 2).contains("second"), "{}", sent(&server, 2));
    assert!(sent(&server, 3).contains("third"), "{}", sent(&server, 3));
    assert!(
        sent(&server, 4).contains("def f():\\n    return 1"),
        "{}",
        sent(&server, 4)
    );
}

/// SIGTERM, SIGHUP or Ctrl-\\ while a turn runs (or at the prompt) end
/// chat with the terminal as it found it: echo and line editing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_leaves_the_terminal_as_chat_found_it() {
    for (signal, at_prompt) in [
        (libc::SIGTERM, false),
        (libc::SIGHUP, false),
        (libc::SIGQUIT, false),
        (libc::SIGTERM, true),
    ] {
        let scene = Scene::new();
        let server = MockLlm::strict(KIND).await;
        server.push(stream(
            KIND,
            &Answer::Tools(vec![tool("c1", "shell", json!({"command": "sleep 30"}))]),
        ));
        let mut term =
            Terminal::spawn_sized(chat(&scene, &server, &["--approvals", "never"]), COLS, ROWS);
        term.expect("> ");
        // (At the prompt the line editor has the terminal raw.)
        if !at_prompt {
            term.send("wait\r");
            term.expect("(sleep 30)");
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert_eq!(term.echo_and_canonical(), (false, false), "during a turn");
        }
        let status = term.signal_and_wait(signal);
        assert_eq!(
            status.code(),
            Some(128 + signal),
            "signal {signal}: {status:?}"
        );
        assert_eq!(
            term.echo_and_canonical(),
            (true, true),
            "signal {signal} (at the prompt: {at_prompt}) left the terminal changed"
        );
    }
}

/// `chat --continue` shows where the conversation stood (the last
/// exchanges), and `--resume` without an id offers the sessions of this
/// workspace by number; `/help` lines its descriptions up in one column,
/// wrapped between words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_chat_shows_its_last_exchanges_and_help_reads_in_columns() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &text(&["The first answer, remembered."])));
    server.push(stream(KIND, &text(&["A second conversation."])));
    server.push(stream(KIND, &text(&["Back in the first."])));
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    term.send("remember the blue door\r");
    term.expect("The first answer, remembered.");
    term.expect("> ");
    term.exit();

    let mut term = Terminal::spawn_sized(chat(&scene, &server, &["--continue"]), COLS, ROWS);
    term.expect("> ");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let screen = term.screen(COLS, ROWS).join("\n");
    assert!(
        screen.contains("> remember the blue door")
            && screen.contains("The first answer, remembered.")
            && screen.contains("the last 1 of 1 exchanges"),
        "{screen}"
    );
    term.exit();

    // A second conversation, then --resume picks the first by number.
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    term.send("something else\r");
    term.expect("A second conversation.");
    term.expect("> ");
    term.exit();
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &["--resume"]), COLS, ROWS);
    let listed = term.expect("resume which [1]: ");
    assert!(
        listed.contains("  1  ") && listed.contains("  2  "),
        "{listed}"
    );
    term.send("2\r");
    term.expect("remember the blue door");
    term.expect("> ");
    term.send("/help\r");
    term.expect("/exit");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let screen = term.screen(COLS, ROWS);
    let rows: Vec<&String> = screen.iter().filter(|r| r.starts_with('/')).collect();
    assert!(rows.len() > 8, "{}", screen.join("\n"));
    let column = |row: &str| {
        row.find("  ")
            .map(|i| i + row[i..].len() - row[i..].trim_start().len())
    };
    let first = column(rows[0]).unwrap();
    for row in &rows {
        assert_eq!(
            column(row),
            Some(first),
            "not in one column:\n{}",
            screen.join("\n")
        );
    }
    // Wrapped lines continue under the column, not at the edge.
    let continued = screen
        .iter()
        .filter(|r| r.starts_with(&" ".repeat(first)) && !r.trim().is_empty())
        .count();
    assert!(continued > 0, "{}", screen.join("\n"));
    term.send("now in the first\r");
    term.expect("Back in the first.");
    term.exit();
    assert!(
        sent(&server, 2).contains("remember the blue door"),
        "{}",
        sent(&server, 2)
    );
}

/// Where only this one call can be allowed (no single rule can say what a
/// compound command does), the prompt offers y and n, not s and a.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_offers_only_the_answers_that_apply() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "ls; echo two"}),
        )]),
    ));
    server.push(stream(KIND, &text(&["ran"])));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c2", "shell", json!({"command": "echo one"}))]),
    ));
    server.push(stream(KIND, &text(&["ran again"])));
    let mut term = Terminal::spawn_sized(
        chat(&scene, &server, &["--approvals", "always"]),
        COLS,
        ROWS,
    );
    term.expect("> ");
    term.send("two commands\r");
    term.expect("answer [y/n]: ");
    term.send("y\r");
    term.expect("ran");
    term.expect("> ");
    // Control: a plain command offers every scope.
    term.send("one command\r");
    term.expect("answer [y/s/a/n]: ");
    term.send("y\r");
    term.expect("ran again");
    term.exit();
}

/// A long paste stands in the line as one mark, not 4,000 drawn lines;
/// what is sent is the whole paste, in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_paste_is_one_mark_on_screen_and_whole_when_sent() {
    let scene = Scene::new();
    // A model whose window holds the whole paste (about 20,000 tokens).
    scene.write_user_config("[providers.openai-compatible]\ncontext_window = 131072\n");
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &text(&["Read it all."])));
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), COLS, ROWS);
    term.expect("> ");
    let log: String = (1..=4000).map(|i| format!("log line {i:05}\r")).collect();
    term.send("look: ");
    term.send(&format!("\x1b[200~{log}\x1b[201~"));
    term.expect("[Pasted text #1 +4000 lines]");
    let drawn = term.seen();
    assert!(
        !drawn.contains("log line 02000"),
        "the paste was drawn line by line"
    );
    term.send(" what failed?\r");
    term.expect("Read it all.");
    term.exit();
    let asked = sent(&server, 0);
    assert!(
        // (as JSON text: line breaks escaped)
        asked.contains(r"look: log line 00001\nlog line 00002\n")
            && asked.contains(r"log line 04000\n what failed?"),
        "{}",
        &asked[asked.len().saturating_sub(300)..]
    );
}

/// sandcrab's own long lines (a warning) break between words, each row
/// after the first indented under it, instead of at the terminal's edge
/// in the middle of a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandcrabs_own_long_lines_wrap_between_words() {
    let scene = Scene::new();
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        "[policy]\nsandbox = \"off\"\n",
    )
    .unwrap();
    let server = MockLlm::strict(KIND).await;
    let (cols, rows) = (60, 40);
    let mut term = Terminal::spawn_sized(chat(&scene, &server, &[]), cols, rows);
    term.expect("> ");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let screen = term.screen(cols, rows);
    let first = screen
        .iter()
        .position(|r| r.starts_with("warning:") && r.contains("ignored"))
        .unwrap_or_else(|| panic!("{}", screen.join("\n")));
    let rest: Vec<&String> = screen[first + 1..]
        .iter()
        .take_while(|r| r.starts_with("  "))
        .collect();
    assert!(
        rest.len() >= 2,
        "the warning was not wrapped:\n{}",
        screen.join("\n")
    );
    // Joined back, the rows are the message's words in order: nothing was
    // cut inside a word.
    let joined: Vec<String> = std::iter::once(&screen[first])
        .chain(rest)
        .map(|r| r.trim().to_string())
        .collect();
    assert!(
        joined
            .join(" ")
            .contains("only the operator may set it, and this project is not trusted"),
        "{}",
        screen.join("\n")
    );
    term.exit();
}
