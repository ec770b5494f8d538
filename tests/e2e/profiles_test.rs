//! Provider profiles as WASM plugins: tool sets, the system prompt, and
//! custom tools on a profile's registry.

use std::sync::Arc;

use sandcrab::agent::{Profile, Session, SessionConfig, SessionParts};
use sandcrab::llm::scripted::{ScriptedClient, text, tool_calls};
use sandcrab::plugin::{Policy, ToolSpec, discovery};
use sandcrab::tools::{FnTool, ToolRegistry};
use serde_json::json;

use crate::support::{Scene, plugin_session};

async fn all_tools(scene: &Scene) -> (sandcrab::plugin::PluginHost, ToolRegistry) {
    let mut host = scene.host(Policy::default());
    host.load_all(&discovery::bundled()).await;
    assert!(host.diagnostics().is_empty(), "{:?}", host.diagnostics());
    let tools = ToolRegistry::from_plugins(host.plugins());
    (host, tools)
}

#[tokio::test]
async fn each_profile_offers_its_tool_set() {
    let scene = Scene::new();
    let (host, tools) = all_tools(&scene).await;
    for (id, expected) in [
        (
            "openai",
            vec![
                "apply_patch",
                "glob",
                "grep",
                "read_file",
                "shell",
                "write_file",
            ],
        ),
        (
            "anthropic",
            vec![
                "edit_file",
                "glob",
                "grep",
                "read_file",
                "shell",
                "write_file",
            ],
        ),
        (
            "gemini",
            vec![
                "edit_file",
                "glob",
                "grep",
                "list_dir",
                "read_file",
                "shell",
                "write_file",
            ],
        ),
    ] {
        let profile = Profile::load(&host, id).await.unwrap();
        let names = profile.tools(&tools).names();
        assert_eq!(names, expected, "{id}");
        for spec in profile.tools(&tools).definitions() {
            assert_eq!(
                spec.parameters["type"], "object",
                "{id}/{}: a JSON-schema object",
                spec.name
            );
        }
    }
    let anthropic = Profile::load(&host, "anthropic").await.unwrap();
    let edit = anthropic
        .tools(&tools)
        .get("edit_file")
        .unwrap()
        .spec
        .clone();
    assert!(
        edit.parameters["properties"]["old_string"].is_object()
            && edit.parameters["properties"]["new_string"].is_object()
    );
    assert!(Profile::load(&host, "nope").await.is_err());
}

#[tokio::test]
async fn the_anthropic_prompt_has_the_claude_code_identity_and_five_layers() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("AGENTS.md"), "Always run the tests.").unwrap();
    std::fs::write(scene.workspace().join("CLAUDE.md"), "Prefer small commits.").unwrap();
    let (host, tools) = all_tools(&scene).await;
    let profile = Arc::new(Profile::load(&host, "anthropic").await.unwrap());
    let mut config = SessionConfig::new("claude-test");
    config.user_instructions = Some("Answer in French.".into());
    let session = Session::new(SessionParts::new(
        Arc::new(ScriptedClient::new(vec![])),
        profile.clone(),
        profile.tools(&tools).into(),
        config,
        scene.workspace(),
    ));
    let prompt = session.system_prompt();
    let pos = |needle: &str| {
        prompt
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing"))
    };
    assert!(prompt.contains("Claude Code"));
    assert!(
        prompt.contains("old_string must match the file exactly"),
        "edit_file guidance"
    );
    assert!(pos("Claude Code") < pos("<environment>"));
    assert!(pos("<environment>") < pos("# Tools"));
    assert!(pos("# Tools") < pos("Always run the tests."));
    assert!(pos("Always run the tests.") < pos("Prefer small commits."));
    assert!(pos("Prefer small commits.") < pos("Answer in French."));
    assert!(prompt.contains("Model: claude-test"));
}

#[tokio::test]
async fn custom_tools_extend_a_profile_and_override_built_ins() {
    let scene = Scene::new();
    let (host, tools) = all_tools(&scene).await;
    let profile = Profile::load(&host, "anthropic").await.unwrap();
    let mut registry = profile.tools(&tools);
    assert_eq!(registry.len(), 6);
    let spec = |name: &str| ToolSpec {
        name: name.into(),
        description: format!("custom {name}"),
        parameters: json!({"type": "object"}),
        traits: Default::default(),
    };
    registry.register(
        spec("custom_read"),
        Arc::new(FnTool(|_, _| async { Ok("custom".to_string()) })),
    );
    assert_eq!(registry.len(), 7);
    registry.register(
        spec("read_file"),
        Arc::new(FnTool(|_, _| async { Ok("overridden".to_string()) })),
    );
    assert_eq!(registry.len(), 7);
    assert_eq!(
        registry.get("read_file").unwrap().spec.description,
        "custom read_file"
    );
}

#[tokio::test]
async fn every_profile_completes_a_tool_round_trip() {
    let scene = Scene::new();
    std::fs::write(scene.workspace().join("a.txt"), "alpha\n").unwrap();
    for id in ["openai", "anthropic", "gemini"] {
        let client = Arc::new(ScriptedClient::new(vec![
            tool_calls(&[("c1", "read_file", json!({"file_path": "a.txt"}))]),
            text("It says alpha."),
        ]));
        let (_host, session) = plugin_session(&scene, id, client.clone()).await;
        session.submit("read a.txt").await.unwrap();
        assert_eq!(
            session.last_assistant_text().as_deref(),
            Some("It says alpha."),
            "{id}"
        );
        let second = &client.requests()[1];
        let sent = second.messages.iter().find_map(|m| match m {
            sandcrab::llm::Message::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        });
        assert_eq!(sent.as_deref(), Some("     1\talpha\n"), "{id}");
    }
}
