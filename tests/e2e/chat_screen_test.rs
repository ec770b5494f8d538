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
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "printf 'out\\033]52;c;aGk=\\007 \\033[9;9H\\n'"}),
        )]),
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
