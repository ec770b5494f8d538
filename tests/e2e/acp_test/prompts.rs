//! An MCP server's prompts in the editor: advertised as slash commands
//! with their arguments, and a prompt command becomes the message the
//! model gets (a missing argument is named to the editor, nothing sent).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_prompts_are_the_editors_slash_commands() {
    let scene = Scene::new();
    crate::mcp_client_test::configure_probe(&scene, "", "");
    let server = MockLlm::strict(KIND).await;
    server.push(stream(KIND, &Answer::Text(vec!["Reviewed."])));
    let mut agent = RawAgent::start(&scene, &server);
    let session = agent.new_session(&scene);
    let advertised =
        agent.until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update");
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
}
