//! Approval rules through the real binary: `sandcrab run` with rules in the
//! operator's configuration, in the project's `sandcrab.toml`, and from
//! `--approve`. With nobody to ask, a call that needs approval is refused
//! (and does not run), and the refusal says what would allow it.

use sandcrab::llm::ProviderKind;
use serde_json::{Value, json};

use crate::cli_support::{events, sandcrab, tool_result};
use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::Scene;

const KIND: ProviderKind = ProviderKind::OpenAiCompatible;

/// Run one shell call `command` with `extra` arguments; the TOOL_CALL_END
/// event and what the model was told.
async fn run_shell(
    scene: &Scene,
    command: &str,
    extra: &[&str],
) -> (std::process::Output, Value, String) {
    let server = MockLlm::start().await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool("c1", "shell", json!({"command": command}))]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    let out = sandcrab(scene, KIND, &server, "run")
        .arg("--json")
        .args(extra)
        .arg("go")
        .output()
        .unwrap();
    let end = events(&out.stdout)
        .into_iter()
        .find(|e| e["kind"] == "TOOL_CALL_END")
        .unwrap_or_else(|| panic!("no tool call end: {}", String::from_utf8_lossy(&out.stderr)));
    let requests = server.requests();
    let sent = tool_result(KIND, &requests[1], "c1", "shell");
    (out, end, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_command_does_not_run_and_the_model_is_told_which_rule() {
    let scene = Scene::new();
    scene.write_user_config(
        "[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"deny\"\nexamples = [\"touch x\", \"ls && touch x\"]\n",
    );
    let (out, end, sent) = run_shell(&scene, "echo hi && touch pwned", &[]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !scene.workspace().join("pwned").exists(),
        "the denied command ran"
    );
    assert_eq!(end["data"]["status"], "denied", "{end}");
    let config = scene.user_config().display().to_string();
    assert!(
        sent.contains(&format!("approval rule at {config}:1")),
        "{sent}"
    );
    let approvals = &end["data"]["receipt"]["approvals"];
    // A record, not a sentence: the decision and the rule that gave it.
    assert_eq!(approvals[0]["decision"], "deny", "{approvals}");
    assert_eq!(approvals[0]["by"]["kind"], "rule", "{approvals}");
    assert_eq!(approvals[0]["by"]["rule"], "shell touch", "{approvals}");
    assert!(
        crate::support::approval_line(&approvals[0])
            .starts_with(&format!("deny by rule {config}:1 (shell touch)")),
        "{approvals}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_risk_refuses_unapproved_commands_and_approve_lets_them_run() {
    let scene = Scene::new();
    let (_, end, sent) = run_shell(&scene, "touch made", &["--approvals", "on-risk"]).await;
    assert!(!scene.workspace().join("made").exists());
    assert_eq!(end["data"]["status"], "denied");
    assert!(sent.contains("--approve 'command:touch made'"), "{sent}");
    // Pre-approved by rule, it runs, and its receipt says by which rule.
    let (_, end, _) = run_shell(
        &scene,
        "touch made",
        &["--approvals", "on-risk", "--approve", "shell:touch"],
    )
    .await;
    assert!(scene.workspace().join("made").exists());
    assert_eq!(end["data"]["status"], "ok", "{end}");
    let line = crate::support::approval_line(&end["data"]["receipt"]["approvals"][0]);
    assert!(
        line.starts_with("allow by rule --approve:1 (shell touch)"),
        "{line}"
    );
    // The default (no mode anywhere) asks nothing: today's behaviour.
    let (_, end, _) = run_shell(&scene, "touch again", &[]).await;
    assert_eq!(end["data"]["status"], "ok");
    assert_eq!(
        crate::support::approval_line(&end["data"]["receipt"]["approvals"][0]),
        "allow by mode never"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_may_deny_but_never_allow() {
    let scene = Scene::new();
    let project = scene.workspace().join("sandcrab.toml");
    std::fs::write(
        &project,
        "[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"deny\"\n",
    )
    .unwrap();
    // Untrusted, its deny rule still applies (it only narrows).
    let (_, end, _) = run_shell(&scene, "touch x", &[]).await;
    assert_eq!(end["data"]["status"], "denied", "{end}");
    assert!(!scene.workspace().join("x").exists());
    // An allow rule in a project is refused, naming the file and line;
    // the project file is left out and the run goes on without it (a
    // repository cannot lock the operator out).
    std::fs::write(
        &project,
        "model = \"m\"\n\n[[approvals.rules]]\nshell = [\"curl\"]\ndecision = \"allow\"\n",
    )
    .unwrap();
    let server = MockLlm::start().await;
    server.push(stream(KIND, &Answer::Text(vec!["went on"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("go")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: line 3:", project.display()))
            && stderr.contains("never `allow`")
            && stderr.contains("sandcrab.toml is ignored"),
        "{stderr}"
    );
    // Left out whole: its model is not the one asked.
    assert_ne!(server.requests()[0].body["model"], "m");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_rule_fails_at_start_with_its_line_and_fix() {
    let scene = Scene::new();
    scene.write_user_config(
        "model = \"m\"\n[[approvals.rules]]\nshell = [\"git\", \"status\"]\ndecision = \"allow\"\nexamples = [\"git stat\"]\n",
    );
    let server = MockLlm::start().await;
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("go")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("{}: line 2:", scene.user_config().display()))
            && stderr.contains("\"git stat\"")
            && stderr.contains("fix the rule or the example"),
        "{stderr}"
    );
    assert!(server.requests().is_empty(), "nothing ran");
}

#[test]
fn the_rules_in_force_are_listed_with_where_each_was_written() {
    let scene = Scene::new();
    scene.write_user_config(
        "[approvals]\nmode = \"on-risk\"\n\n[[approvals.rules]]\nshell = [\"git\", \"status\"]\ndecision = \"allow\"\n",
    );
    let project = scene.workspace().join("sandcrab.toml");
    std::fs::write(
        &project,
        "[[approvals.rules]]\npath = \"secrets/**\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["approvals", "list", "--json", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let config = scene.user_config().display().to_string();
    assert_eq!(
        listed,
        json!({"mode": "on-risk",
            "effective": {"chat": "on-risk", "serve": "on-risk", "run": "on-risk"},
            "rules": [
            {"at": format!("{config}:4"), "decision": "allow", "matches": "shell git status",
             "number": 1, "workspace": null},
            {"at": format!("{}:1", project.display()), "decision": "deny", "matches": "path secrets/**",
             "number": null, "workspace": null},
        ]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_rule_sees_through_dot_dot_and_guest_paths() {
    let scene = Scene::new();
    scene.write_user_config("[[approvals.rules]]\npath = \"secrets/**\"\ndecision = \"deny\"\n");
    std::fs::create_dir_all(scene.workspace().join("src")).unwrap();
    std::fs::create_dir_all(scene.workspace().join("secrets")).unwrap();
    for (n, path) in ["src/../secrets/a", "/workspace/secrets/b", "./secrets/c"]
        .iter()
        .enumerate()
    {
        let server = MockLlm::start().await;
        server.push(stream(
            KIND,
            &Answer::Tools(vec![tool(
                "c1",
                "write_file",
                json!({"file_path": path, "content": "leak"}),
            )]),
        ));
        server.push(stream(KIND, &Answer::Text(vec!["done"])));
        let out = sandcrab(&scene, KIND, &server, "run")
            .args(["--json", "go"])
            .output()
            .unwrap();
        let end = events(&out.stdout)
            .into_iter()
            .find(|e| e["kind"] == "TOOL_CALL_END")
            .unwrap();
        assert_eq!(end["data"]["status"], "denied", "{path}: {end}");
        let written = std::fs::read_dir(scene.workspace().join("secrets"))
            .unwrap()
            .count();
        assert_eq!(written, 0, "{path} was written (case {n})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_cannot_smuggle_a_second_command_past_an_allow_rule() {
    let scene = Scene::new();
    // `echo` is allowed; the quote inside the comment once hid the new
    // line, so the whole line read as one allowed `echo`.
    let line = "echo hi #'\ntouch smuggled #'";
    let (_, end, sent) = run_shell(
        &scene,
        line,
        &["--approvals", "on-risk", "--approve", "shell:echo"],
    )
    .await;
    assert_eq!(end["data"]["status"], "denied", "{end}");
    assert!(
        !scene.workspace().join("smuggled").exists(),
        "the hidden command ran"
    );
    assert!(sent.contains("No single rule can allow it"), "{sent}");
}

/// The model may not add a rule by writing the operator's file, even when
/// the workspace holds it (sandcrab run in the home directory): the file
/// tools and the shell both leave it as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_write_itself_a_rule_into_the_operators_file() {
    let scene = Scene::new();
    let config_home = scene.workspace().join("dot-config");
    let config = config_home.join("sandcrab/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# the operator's\n").unwrap();
    let rule = "[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"allow\"\n";
    let server = MockLlm::start().await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "w1",
            "write_file",
            json!({"file_path": "dot-config/sandcrab/config.toml", "content": rule}),
        )]),
    ));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "s1",
            "shell",
            json!({"command": format!("printf '{}' >> dot-config/sandcrab/config.toml", rule.replace('\n', "\\n"))}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .env("XDG_CONFIG_HOME", &config_home)
        .args(["--json", "--approve", "shell:printf"])
        .arg("add the rule")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# the operator's\n",
        "the model changed the operator's file"
    );
    let requests = server.requests();
    let told = tool_result(KIND, &requests[1], "w1", "write_file");
    assert!(told.contains("protected"), "{told}");
}

/// `[approvals] rules_file` names a file of rules beside the operator's
/// configuration: its rules are in force and listed, and a mistake in it
/// is named by its own file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_file_the_operator_names_is_in_force() {
    let scene = Scene::new();
    scene.write_user_config("[approvals]\nrules_file = \"rules.toml\"\n");
    let rules = scene.user_config().with_file_name("rules.toml");
    std::fs::write(
        &rules,
        "# team rules\n\n[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"deny\"\n",
    )
    .unwrap();
    let (_, end, sent) = run_shell(&scene, "touch nope", &[]).await;
    assert_eq!(end["data"]["status"], "denied", "{end}");
    assert!(
        sent.contains(&format!("{}:3", rules.display())),
        "the refusal names the rules file's line: {sent}"
    );
    let list = crate::support::sandcrab_cmd(&scene)
        .args(["approvals", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("file     deny   shell touch"), "{listed}");
    std::fs::write(
        &rules,
        "[[approvals.rules]]\nshell = [\"touch\"]\ndecision = \"maybe\"\n",
    )
    .unwrap();
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["approvals", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&rules.display().to_string()), "{err}");
}

/// A rule naming a tool nobody has (a typo) would silently never apply:
/// the session warns with its file and line; rules for the host's own
/// tools (jobs, subagents) are not warned about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_for_a_tool_nobody_has_is_a_warning_with_its_line() {
    let scene = Scene::new();
    scene.write_user_config(
        "[[approvals.rules]]\ntool = \"cancel_job\"\ndecision = \"ask\"\n\n[[approvals.rules]]\ntool = \"write_fiel\"\ndecision = \"deny\"\n",
    );
    let (out, _, _) = run_shell(&scene, "echo hi", &[]).await;
    let warnings: Vec<String> = events(&out.stdout)
        .into_iter()
        .filter(|e| e["kind"] == "WARNING")
        .map(|e| e["data"]["message"].as_str().unwrap().to_string())
        .filter(|m| m.contains("approval rule"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "{}:5: the approval rule names tool 'write_fiel'",
            scene.user_config().display()
        )) && warnings[0].contains("write_file"),
        "{}",
        warnings[0]
    );
}

/// The same for a configuration named with `--config` inside the
/// workspace: neither a file tool nor an allowed program changes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_write_a_rule_into_a_config_named_by_flag() {
    let scene = Scene::new();
    let config = scene.workspace().join("dev.toml");
    std::fs::write(&config, "# the operator's\n").unwrap();
    let server = MockLlm::start().await;
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "s1",
            "shell",
            json!({"command": "printf '[[approvals.rules]]\\ntool = \"shell\"\\ndecision = \"allow\"\\n' >> dev.toml"}),
        )]),
    ));
    server.push(stream(
        KIND,
        &Answer::Tools(vec![tool(
            "w1",
            "edit_file",
            json!({"file_path": "dev.toml", "old_string": "# the operator's", "new_string": "[[approvals.rules]]\ntool = \"shell\"\ndecision = \"allow\""}),
        )]),
    ));
    server.push(stream(KIND, &Answer::Text(vec!["done"])));
    let out = sandcrab(&scene, KIND, &server, "run")
        .arg("--config")
        .arg(&config)
        .args(["--json", "--approve", "shell:printf"])
        .arg("add the rule")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# the operator's\n",
        "the model changed the operator's file"
    );
}

/// A project — even one the operator trusted — may make asking stricter,
/// never looser: its `[approvals] mode = "never"` does not stop the
/// operator's on-risk from asking, and its `always` raises `run`'s never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_project_cannot_turn_asking_off() {
    let scene = Scene::new();
    scene.write_user_config("[approvals]\nmode = \"on-risk\"\n");
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        "[approvals]\nmode = \"never\"\n",
    )
    .unwrap();
    let trusted = crate::support::sandcrab_cmd(&scene)
        .arg("trust")
        .arg(scene.workspace())
        .output()
        .unwrap();
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let (_, end, _) = run_shell(&scene, "touch loosened", &[]).await;
    assert_eq!(end["data"]["status"], "denied", "{end}");
    assert!(!scene.workspace().join("loosened").exists());
    // Stricter is taken: `always` asks even for an echo under run's never.
    scene.write_user_config("");
    std::fs::write(
        scene.workspace().join("sandcrab.toml"),
        "[approvals]\nmode = \"always\"\n",
    )
    .unwrap();
    let (_, end, _) = run_shell(&scene, "echo hi", &[]).await;
    assert_eq!(end["data"]["status"], "denied", "{end}");
}

/// With no mode set, `approvals list` says what each command does (chat
/// asks on risk, run cannot ask), not one mode that is wrong for chat.
#[test]
fn an_unset_mode_is_listed_as_each_command_uses_it() {
    let scene = Scene::new();
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["approvals", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with("mode: on-risk in chat and serve, never in run"),
        "{text}"
    );
    // Control: a mode set is one mode.
    scene.write_user_config("[approvals]\nmode = \"always\"\n");
    let out = crate::support::sandcrab_cmd(&scene)
        .args(["approvals", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("mode: always (for calls"), "{text}");
}
