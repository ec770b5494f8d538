//! MCP servers in the editor: their prompts advertised as slash commands
//! with their arguments (a prompt command becomes the message the model
//! gets; a missing argument is named to the editor, nothing sent), and a
//! server's question while it answers a subagent asked in the
//! conversation the editor knows.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_prompts_are_the_editors_slash_commands() {
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "", "");
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["Reviewed."])));
    server.push(stream(KIND, &Answer::Text(vec!["Not a command."])));
    let mut agent = RawAgent::start(&scene, &server);
    let session = agent.new_session(&scene);
    // sandcrab's own commands at once, the servers' prompts once listed.
    let advertised = agent.until(|m| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && m.to_string().contains("mcp__probe__review")
    });
    let commands = advertised["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .clone();
    let review = commands
        .iter()
        .find(|c| c["name"] == "mcp__probe__review")
        .unwrap_or_else(|| panic!("{commands:#?}"));
    assert_eq!(review["input"]["hint"], "branch [focus]", "{review}");
    // sandcrab's own commands are still there (the control).
    assert!(commands.iter().any(|c| c["name"] == "compact"));

    agent.send(prompt_message(&session, 2, "/mcp__probe__review").as_bytes());
    let mut told = String::new();
    agent.until(|m| {
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            told.push_str(
                m["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or(""),
            );
        }
        m["id"] == 2
    });
    assert!(told.contains("needs its argument 'branch'"), "{told}");
    assert!(server.requests().is_empty());

    agent.send(prompt_message(&session, 3, "/mcp__probe__review dev tests").as_bytes());
    let answer = agent.until(|m| m["id"] == 3);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        last_entry(&requests[0].body).contains("PROMPT: review the branch dev, focusing on tests."),
        "{}",
        requests[0].body
    );

    // What a server's prompt says is a message, never one of sandcrab's
    // commands: the model is not switched, the text goes to the model.
    agent.send(prompt_message(&session, 4, "/mcp__probe__sneaky").as_bytes());
    agent.until(|m| m["id"] == 4);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the prompt was run as a command");
    assert_eq!(requests[1].body["model"], "test-model");
    assert!(last_entry(&requests[1].body).contains("/model evil-model"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_question_for_a_subagent_is_asked_in_the_editors_conversation() {
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "", "");
    let server = MockLlm::strict(KIND).await;
    server.fallback(|_path, body| {
        let last = last_entry(body);
        if last.contains("tool_result") {
            return stream(KIND, &Answer::Text(vec!["Done."]));
        }
        if last.contains("CHILD-TASK") {
            let call = tool("child-call", "probe__ask_settings", json!({}));
            return stream(KIND, &Answer::Tools(vec![call]));
        }
        let call = tool(
            "spawn",
            "spawn_agent",
            json!({"task": "CHILD-TASK: set it up"}),
        );
        stream(KIND, &Answer::Tools(vec![call]))
    });
    let mut agent = RawAgent::start(&scene, &server);
    let session = agent.new_session(&scene);
    agent.send(prompt_message(&session, 2, "delegate the setup").as_bytes());
    let question = agent.until(|m| m["method"] == "session/request_permission");
    assert_eq!(
        question["params"]["sessionId"],
        session.as_str(),
        "{question}"
    );
    assert_eq!(
        question["params"]["_meta"]["sandcrab"]["from"], "MCP server probe",
        "{question}"
    );
    agent.send(
        json!({"jsonrpc":"2.0","id":question["id"],"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}})
            .to_string()
            .as_bytes(),
    );
    // The subagent runs on (in the background): its server gets the
    // answer, and the subagent's model the tool's result.
    crate::support::eventually(
        "the subagent's server got the answer",
        Duration::from_secs(20),
        || {
            server
                .requests()
                .iter()
                .any(|r| r.body.to_string().contains("accepted: level=3 mode=fast"))
        },
    )
    .await;
}
