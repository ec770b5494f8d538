//! Durable sessions and compaction through the binary: a long conversation
//! compacts instead of failing (the next request starts with the summary
//! and is valid for the provider), `memory_read` finds what was compacted,
//! `chat --continue` after `kill -9` goes on with every committed turn, and
//! `sandcrab sessions` lists, shows and deletes.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{piped_chat, sandcrab, tool_result, wait_for};
use crate::llm_transcripts::{Answer, complete, stream, tool};
use crate::mock_llm::{MockLlm, Recorded};
use crate::support::{Scene, sandcrab_cmd};

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

/// What the default summarizer plugin's prompt always contains.
const SUMMARY_PROMPT: &str = "New messages to fold into the summary";

/// The text of every message of a chat-completions request.
fn texts(request: &Recorded) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn is_summary_request(r: &Recorded) -> bool {
    texts(r).iter().any(|(_, t)| t.contains(SUMMARY_PROMPT))
}

/// A long input: about 400 tokens, with `fact` in it.
fn long_input(n: usize, fact: &str) -> String {
    format!(
        "Step {n}: {fact} {}",
        "Some detail about the task. ".repeat(55)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_compacts_and_memory_read_finds_what_was_compacted() {
    let scene = Scene::new();
    scene.write_user_config(
        "[providers.openai-compatible]\ncontext_window = 4000\n\
         [summarization]\nkeep_recent = 2\nchunk_size = 4\n",
    );
    let server = MockLlm::strict(KIND).await;
    for _ in 0..10 {
        server.push_for(
            SUMMARY_PROMPT,
            complete(
                KIND,
                &Answer::Text(vec!["The user said the deploy key rotates on Tuesdays."]),
            ),
        );
    }
    let facts = [
        "the deploy key rotates on Tuesdays.",
        "the staging host is called heron.",
        "tests run with make check.",
        "logs live in /var/log/app.",
        "the release branch is stable.",
        "the owner is Dana.",
    ];
    for i in 0..facts.len() {
        server.push_for(
            &format!("Step {i}:"),
            stream(KIND, &Answer::Text(vec!["Noted."])),
        );
    }
    server.push_for(
        "What did I say about the deploy key?",
        stream(
            KIND,
            &Answer::Tools(vec![tool(
                "m1",
                "memory_read",
                json!({"query": "deploy key"}),
            )]),
        ),
    );
    server.push_for(
        "What did I say about the deploy key?",
        stream(KIND, &Answer::Text(vec!["It rotates on Tuesdays."])),
    );

    let mut lines: Vec<String> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| long_input(i, f))
        .collect();
    lines.push("What did I say about the deploy key?".into());
    lines.push("/exit".into());
    let mut child = sandcrab(&scene, KIND, &server, "chat")
        .args(["--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(server.rejections(), Vec::<String>::new());

    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "COMPACTION_END")
        .collect();
    assert!(!ends.is_empty(), "no compaction: {stderr}");
    let first = &ends[0]["data"];
    assert!(first["messagesCompressed"].as_u64().unwrap() > 0, "{first}");
    assert!(
        first["tokensEstimateBefore"].as_u64() > first["tokensEstimateAfter"].as_u64(),
        "{first}"
    );

    // After the first compaction, model requests carry the summary right
    // after the system prompt, and no tool call without its result.
    let requests = server.requests();
    let model_requests: Vec<&Recorded> =
        requests.iter().filter(|r| !is_summary_request(r)).collect();
    let last = model_requests.last().unwrap();
    let messages = texts(last);
    assert_eq!(messages[1].0, "system", "{messages:?}");
    assert!(
        messages[1].1.starts_with("[Context Summary"),
        "{messages:?}"
    );
    assert!(
        !messages.iter().any(|(_, t)| t.contains("Step 0:")),
        "step 0 was compacted"
    );

    // memory_read found the archived summary holding the first fact.
    let found = tool_result(KIND, last, "m1", "memory_read");
    assert!(found.contains("deploy key rotates on Tuesdays"), "{found}");
    assert!(found.contains("compaction-batch-"), "{found}");

    // Compaction deleted turns, and signed off what it deleted: the
    // session's chain still verifies.
    let id = only_session(&scene);
    let (ok, said) = verify(&scene, &id);
    assert!(ok, "{said}");
}

/// `sandcrab run PROMPT` whose model runs `command` once, then answers;
/// the id of the session it saved.
pub(crate) async fn one_run(scene: &Scene, prompt: &str, command: &str) -> String {
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": command}))]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    let out = sandcrab(scene, KIND, &server, "run")
        .arg(prompt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    only_session(scene)
}

/// The id of the scene's one saved session.
pub(crate) fn only_session(scene: &Scene) -> String {
    let out = sandcrab_cmd(scene)
        .args(["sessions", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a saved session")
        .to_string()
}

/// `sandcrab sessions verify ID`: whether it verified, and what it said.
fn verify(scene: &Scene, id: &str) -> (bool, String) {
    let out = sandcrab_cmd(scene)
        .args(["sessions", "verify", id, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// Tamper evidence through the binary: a session with a tool call (its
/// receipt stored in the turn) verifies, `show` prints the chain head,
/// and one byte changed in the database file makes `verify` name the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_changed_in_the_database_file_is_found_by_verify() {
    let scene = Scene::new();
    let id = one_run(&scene, "say tamper-marker-q7", "echo tamper-marker-q7").await;
    let (ok, said) = verify(&scene, &id);
    // Four turns (input, tool call, its result, answer), the title and
    // ten recording entries (start, input, tools, two model calls, the
    // tool's answer, and the clock reads that stamped the four turns, in
    // the four commits that stored them).
    assert!(
        ok && said.contains("the chain verifies — 15 links,"),
        "{said}"
    );
    let show = sandcrab_cmd(&scene)
        .args(["sessions", "show", &id, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let head = said
        .split("head ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(
        String::from_utf8_lossy(&show.stdout).contains(&format!("chain head {head}")),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );
    // One byte of the file: the marker in the first turn (the user's, a
    // JSON string there; the session's title holds it without quotes).
    let db = scene.root.path().join("data/sandcrab/sandcrab.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let marker = b"\"say tamper-marker-q7\"";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the marker is in the database file");
    bytes[at + 1] = b'S';
    std::fs::write(&db, bytes).unwrap();
    let (ok, said) = verify(&scene, &id);
    assert!(!ok, "{said}");
    assert!(
        said.contains("(link 1) was changed after it was stored"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_continue_after_kill_9_keeps_every_committed_turn() {
    let scene = Scene::new();
    let server = MockLlm::strict(KIND).await;
    server.push_for(
        "first question",
        stream(KIND, &Answer::Text(vec!["First answer."])),
    );
    server.push_for(
        "second question",
        stream(
            KIND,
            &Answer::Tools(vec![tool(
                "c1",
                "write_file",
                json!({"file_path": "a.txt", "content": "A"}),
            )]),
        ),
    );
    // The follow-up request ends with the tool's result.
    server.push_for(
        "Created a.txt",
        stream(KIND, &Answer::Text(vec!["Wrote a.txt."])),
    );
    // The third answer never comes in time: the process is killed while
    // it waits.
    server.push_for(
        "third question",
        stream(KIND, &Answer::Text(vec!["too late"])).delayed(Duration::from_secs(30)),
    );

    let mut child = sandcrab(&scene, KIND, &server, "chat")
        .arg("--json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in ["first question", "second question", "third question"] {
        writeln!(stdin, "{line}").unwrap();
    }
    // Wait for the third request to reach the provider, then kill -9.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !server
        .requests()
        .iter()
        .any(|r| texts(r).iter().any(|(_, t)| t == "third question"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the third request never came"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    drop(stdin);
    let killed = child.wait_with_output().unwrap();
    let events = String::from_utf8_lossy(&killed.stdout).to_string();

    // The session is listed, with its title.
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listing.contains("first question"), "{listing}");
    let id = listing.split_whitespace().next().unwrap().to_string();

    server.push_for(
        "fourth question",
        stream(KIND, &Answer::Text(vec!["Fourth answer."])),
    );
    let out = sandcrab(&scene, KIND, &server, "chat")
        .arg("--continue")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            writeln!(c.stdin.take().unwrap(), "fourth question\n/exit").unwrap();
            c.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("resumed session {id}")),
        "{stderr}"
    );
    assert_eq!(server.rejections(), Vec::<String>::new());
    let resumed = server
        .requests()
        .into_iter()
        .find(|r| texts(r).iter().any(|(_, t)| t == "fourth question"))
        .unwrap();
    let said: Vec<String> = texts(&resumed).into_iter().map(|(_, t)| t).collect();
    for expected in [
        "first question",
        "First answer.",
        "second question",
        "Wrote a.txt.",
        "third question",
    ] {
        assert!(
            said.iter().any(|t| t == expected),
            "{expected} missing: {:?}\nevents before the kill:\n{events}",
            &said[1..]
        );
    }

    // show and delete; a bad id is a one-line error.
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "show", &id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("→ write_file") && shown.contains("fourth question"),
        "{shown}"
    );
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "delete", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = sandcrab_cmd(&scene)
        .args(["sessions", "show", &id])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("no session with id '{id}'")), "{err}");
    let out = sandcrab(&scene, KIND, &server, "chat")
        .args(["--resume", "bogus"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session with id 'bogus'"));
}

/// `sessions export` writes one file that `sessions import` loads into
/// another store (another machine's) under a new id, where the session
/// verifies and names the chain head it came with; a file edited on the
/// way is refused, naming the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_session_imports_elsewhere_and_verifies_the_same() {
    let here = Scene::new();
    let id = one_run(&here, "carry this session", "echo carried").await;
    let (_, said) = verify(&here, &id);
    let head = said
        .split("head ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let export = sandcrab_cmd(&here)
        .args(["sessions", "export", &id, "-w"])
        .arg(here.workspace())
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let file = here.root.path().join("s.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();

    let there = Scene::new();
    let import = |path: &std::path::Path| {
        sandcrab_cmd(&there)
            .args(["sessions", "import"])
            .arg(path)
            .arg("-w")
            .arg(there.workspace())
            .output()
            .unwrap()
    };
    // Edited on the way — the title, or a turn — refused, naming what.
    let text = String::from_utf8(export.stdout.clone()).unwrap();
    let refused_for = |edited_text: String| {
        assert_ne!(edited_text, text);
        let edited = here.root.path().join("edited.jsonl");
        std::fs::write(&edited, edited_text).unwrap();
        let refused = import(&edited);
        assert!(!refused.status.success());
        String::from_utf8_lossy(&refused.stderr).into_owned()
    };
    let title = text.replacen("carry this session", "carry that session", 1);
    let why = refused_for(title);
    assert!(why.contains("the session's title was changed"), "{why}");
    let turn: String = text
        .lines()
        .map(|l| {
            let l = if l.starts_with("{\"record\":\"turn\"") {
                l.replacen("carry this session", "carry that session", 1)
            } else {
                l.to_string()
            };
            format!("{l}\n")
        })
        .collect();
    let why = refused_for(turn);
    assert!(why.contains("was changed after it was stored"), "{why}");
    // As written: imported, and it verifies with the same head.
    let imported = import(&file);
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let said = String::from_utf8_lossy(&imported.stdout).into_owned();
    let local = crate::cli_support::imported_id(&said);
    assert_ne!(local, id, "a foreign id is never taken as given");
    let (ok, said) = verify(&there, &local);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("its file's id was {id}, its head {head}")),
        "{said}"
    );
    // A second import finds its turns there.
    let again = import(&file);
    assert!(!again.status.success());
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(
        why.contains(&format!("already in this store, in session '{local}'")),
        "{why}"
    );
}

/// `/resume` would cancel the running background jobs of the session it
/// leaves: it says so and resumes nothing until asked with `force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_does_not_silently_cancel_running_jobs() {
    let scene = Scene::new();
    let id = one_run(&scene, "a session to come back to", "echo saved").await;
    let server = MockLlm::strict(KIND).await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "c1",
            "shell",
            json!({"command": "sleep 30", "run_in_background": true}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["Started."])));
    let (mut child, mut stdin, stderr) = piped_chat(
        &scene,
        KIND,
        &server,
        &["--approvals".as_ref(), "never".as_ref()],
    );
    let limit = Duration::from_secs(60);
    writeln!(stdin, "start a slow job").unwrap();
    wait_for(&stderr, "1 background job running", limit);
    writeln!(stdin, "/resume {id}").unwrap();
    wait_for(&stderr, "not resumed", limit);
    assert!(
        stderr
            .lock()
            .unwrap()
            .contains("cancels its 1 running background job"),
        "{}",
        stderr.lock().unwrap()
    );
    writeln!(stdin, "/resume {id} force").unwrap();
    wait_for(&stderr, &format!("resumed session {id}"), limit);
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    assert!(
        child.wait().unwrap().success(),
        "{}",
        stderr.lock().unwrap()
    );
}

/// Whoever can write the database can rewrite a turn and re-chain the
/// whole session so that every link follows from the one before; the
/// host's seal (its chain key over the head it wrote) does not follow, and
/// `sessions verify` says the chain no longer ends where the host sealed
/// it. Before the rewrite it says which check it made (keyed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_rewritten_and_rechained_in_the_database_is_found_by_its_seal() {
    use sandcrab::store::chain;
    let scene = Scene::new();
    let id = one_run(&scene, "say seal-marker-k3", "echo seal-marker-k3").await;
    let (ok, said) = verify(&scene, &id);
    assert!(
        ok && said.contains("keyed: the chain ends where this host sealed it"),
        "{said}"
    );
    // The rewrite, as a program holding the database would make it.
    let db = scene.root.path().join("data/sandcrab/sandcrab.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE turns SET body = replace(body, 'seal-marker-k3', 'rewritten-k3') WHERE session_id = ?1",
        [&id],
    )
    .unwrap();
    let turns: Vec<sandcrab::store::StoredTurn> = {
        let mut stmt = conn
            .prepare(
                "SELECT id, timestamp, kind, body FROM turns WHERE session_id = ?1 ORDER BY seq",
            )
            .unwrap();
        stmt.query_map([&id], |r| {
            Ok(sandcrab::store::StoredTurn {
                id: r.get(0)?,
                timestamp: r.get(1)?,
                kind: r.get(2)?,
                body: r.get(3)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let old: Vec<chain::Link> = {
        let mut stmt = conn
            .prepare("SELECT seq, kind, subject, digest, detail, hash FROM chain WHERE session_id = ?1 ORDER BY seq")
            .unwrap();
        stmt.query_map([&id], |r| {
            Ok(chain::Link {
                seq: r.get::<_, i64>(0)? as u64,
                kind: r.get(1)?,
                subject: r.get(2)?,
                digest: r.get(3)?,
                detail: r.get(4)?,
                hash: r.get(5)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    // Every link again, each turn's with its new digest.
    let items: Vec<(String, String, String, String)> = old
        .iter()
        .map(|l| {
            let digest = turns
                .iter()
                .find(|t| l.kind == chain::TURN && t.id == l.subject)
                .map(chain::turn_digest)
                .unwrap_or_else(|| l.digest.clone());
            (l.kind.clone(), l.subject.clone(), digest, l.detail.clone())
        })
        .collect();
    let relinked = chain::extend(
        (0, chain::GENESIS.to_string()),
        items
            .iter()
            .map(|(k, s, d, x)| (k.as_str(), s.as_str(), d.clone(), x.as_str())),
    );
    conn.execute("DELETE FROM chain WHERE session_id = ?1", [&id])
        .unwrap();
    for l in &relinked {
        conn.execute(
            "INSERT INTO chain (session_id, seq, kind, subject, digest, detail, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            rusqlite::params![id, l.seq as i64, l.kind, l.subject, l.digest, l.detail, l.hash],
        )
        .unwrap();
    }
    drop(conn);
    let (ok, said) = verify(&scene, &id);
    assert!(!ok, "the rewrite went unnoticed: {said}");
    assert!(
        said.contains("does not end where this host sealed it"),
        "{said}"
    );
}
