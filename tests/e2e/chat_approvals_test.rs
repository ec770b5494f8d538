//! `sandcrab chat` asking the operator, through a real pseudo-terminal:
//! the request shows the tool, the sandbox and (for an edit) the diff; `y`
//! allows once, `s` for the conversation, `a` always in this workspace
//! (the rule appears in the operator's file, and a later chat does not
//! ask), `n NOTE` denies with a note the model reads, and Ctrl-C denies.

use sandcrab::llm::ProviderKind;
use serde_json::json;

use crate::cli_support::{sandcrab, tool_result};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::pty::Terminal;
use crate::support::{Scene, sandcrab_cmd};

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

fn shell(id: &str, command: &str) -> crate::mock_llm::Reply {
    stream(
        KIND,
        &Answer::Tools(vec![tool(id, "shell", json!({"command": command}))]),
    )
}

fn say(text: &'static str) -> crate::mock_llm::Reply {
    stream(KIND, &Answer::Text(vec![text]))
}

const PROMPT: &str = "answer [y/s/a/n]:";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_asks_on_the_terminal_and_every_answer_keeps_its_scope() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "one\ntwo\n").unwrap();
    let server = MockLlm::strict(KIND).await;
    // 1: an edit, shown as a diff, allowed once.
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "e1",
            "edit_file",
            json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"}),
        )]),
    ));
    server.push(say("edited"));
    // 2: allowed for the conversation: the same command is not asked again.
    server.push(shell("c1", "touch conv"));
    server.push(shell("c2", "touch conv"));
    server.push(say("twice"));
    // 3: always in this workspace.
    server.push(shell("c3", "touch always"));
    server.push(say("remembered"));
    // 4: denied with a note.
    server.push(shell("c4", "touch denied"));
    server.push(say("understood"));
    // 5: Ctrl-C.
    server.push(shell("c5", "touch interrupted"));
    server.push(say("stopped"));
    let mut chat = sandcrab(&scene, KIND, &server, "chat");
    chat.args(["--approvals", "always"]);
    let mut term = Terminal::spawn(chat);
    term.expect("> ");

    term.send("fix a.txt\n");
    let shown = term.expect(PROMPT);
    assert!(shown.contains("approval needed: edit_file"), "{shown}");
    assert!(shown.contains("workspace-write sandbox"), "{shown}");
    assert!(
        shown.contains("-two") && shown.contains("+2"),
        "no diff: {shown}"
    );
    term.send("y\n");
    term.expect("edited");
    assert_eq!(
        std::fs::read_to_string(scene.workspace().join("a.txt")).unwrap(),
        "one\n2\n"
    );

    term.send("make conv\n");
    let shown = term.expect(PROMPT);
    assert!(shown.contains("command: touch conv"), "{shown}");
    assert!(
        shown.contains("s  allow command:touch conv for the rest of this conversation"),
        "{shown}"
    );
    term.send("s\n");
    let rest = term.expect("twice");
    assert!(!rest.contains("approval needed"), "asked again: {rest}");
    assert!(scene.workspace().join("conv").exists());

    term.send("make always\n");
    let shown = term.expect(PROMPT);
    let workspace = scene.workspace().canonicalize().unwrap();
    assert!(
        shown.contains("command = [\"touch\", \"always\"]")
            && shown.contains(&format!("workspace = \"{}\"", workspace.display())),
        "the rule is shown before it is written: {shown}"
    );
    term.send("a\n");
    term.expect("remembered");
    assert!(scene.workspace().join("always").exists());
    let config = std::fs::read_to_string(scene.user_config()).unwrap();
    assert!(
        config.contains("command = [\"touch\", \"always\"]\ndecision = \"allow\"")
            && config.contains(&format!("workspace = \"{}\"", workspace.display())),
        "{config}"
    );

    term.send("make denied\n");
    term.expect(PROMPT);
    term.send("n use make instead\n");
    term.expect("understood");
    assert!(!scene.workspace().join("denied").exists());

    term.send("make interrupted\n");
    term.expect(PROMPT);
    term.send("\x03");
    term.expect("stopped");
    assert!(!scene.workspace().join("interrupted").exists());
    term.exit();

    let requests = server.requests();
    let told = |i: usize, id: &str| tool_result(KIND, &requests[i], id, "shell");
    assert!(
        told(8, "c4").contains("The operator denied this call: use make instead"),
        "{}",
        told(8, "c4")
    );
    assert!(told(10, "c5").contains("Ctrl-C"), "{}", told(10, "c5"));

    // A later chat in this workspace does not ask for what was allowed
    // always here…
    std::fs::remove_file(scene.workspace().join("always")).unwrap();
    let server = MockLlm::strict(KIND).await;
    server.push(shell("d1", "touch always"));
    server.push(say("done again"));
    let mut term = Terminal::spawn(sandcrab(&scene, KIND, &server, "chat"));
    term.expect("> ");
    term.send("again\n");
    let rest = term.expect("done again");
    assert!(!rest.contains("approval needed"), "asked again: {rest}");
    assert!(scene.workspace().join("always").exists());
    term.exit();

    // …the rule is listed with its scope, and revoking it removes it.
    let list = sandcrab_cmd(&scene)
        .args(["approvals", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains("#1")
            && listed.contains("command touch always")
            && listed.contains(&format!("in {} only", workspace.display())),
        "{listed}"
    );
    let revoke = sandcrab_cmd(&scene)
        .args(["approvals", "revoke", "1"])
        .output()
        .unwrap();
    assert!(
        revoke.status.success(),
        "{}",
        String::from_utf8_lossy(&revoke.stderr)
    );
    assert!(String::from_utf8_lossy(&revoke.stdout).contains("revoked #1"));
    assert!(
        !std::fs::read_to_string(scene.user_config())
            .unwrap()
            .contains("always")
    );
}

/// `sandcrab audit` lists every call that started, the operator's decision
/// first: a call approved and then interrupted keeps its receipt (with the
/// program it ran), and a denied one reads as denied, not as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_lists_an_interrupted_call_and_says_who_decided_first() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push(shell("c1", "sleep 30"));
    server.push(shell("c2", "touch refused"));
    server.push(say("understood"));
    let mut chat = sandcrab(&scene, KIND, &server, "chat");
    chat.args(["--approvals", "always"]);
    let mut term = Terminal::spawn(chat);
    term.expect("> ");
    term.send("run the long one\n");
    term.expect(PROMPT);
    term.send("y\n");
    // Running: its program has started.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    term.send("\x03");
    term.expect("(interrupted)");
    term.expect("> ");
    term.send("now the other\n");
    term.expect(PROMPT);
    term.send("n\n");
    term.expect("understood");
    term.exit();

    let id = crate::support::latest_session_id(&scene);
    let out = sandcrab_cmd(&scene).args(["audit", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(". ")).collect();
    assert_eq!(lines.len(), 2, "one line per call that started: {text}");
    assert!(
        lines[0]
            .trim_start()
            .starts_with("1. approved once by the operator"),
        "{text}"
    );
    assert!(lines[0].contains("— interrupted —"), "{text}");
    assert!(lines[0].contains("programs: "), "{text}");
    assert!(
        lines[1]
            .trim_start()
            .starts_with("2. denied by the operator"),
        "{text}"
    );
    assert!(lines[1].contains("— denied —"), "{text}");
    assert!(!text.contains("— error —"), "{text}");

    let out = sandcrab_cmd(&scene)
        .args(["audit", &id, "--json"])
        .output()
        .unwrap();
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all[0]["status"], "interrupted", "{all}");
    assert_eq!(all[0]["call_id"], "c1", "{all}");
}
