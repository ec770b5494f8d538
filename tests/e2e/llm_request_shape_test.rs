//! The JSON each adapter sends for one conversation — system prompt, a tool
//! definition, an assistant tool call and its result — checked field by
//! field against each provider's documented format, plus URLs and headers.

use sandcrab::llm::{
    HttpClient, LlmClient, Message, ProviderConfig, ProviderKind, Request, RetryPolicy, ToolCall,
    ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, complete};
use crate::mock_llm::{MockLlm, Recorded};

fn conversation() -> Request {
    Request {
        model: "model-x".into(),
        messages: vec![
            Message::system("You are a careful agent."),
            Message::user("Read a.txt"),
            Message::Assistant {
                text: "Reading it.".into(),
                tool_calls: vec![ToolCall::new(
                    "call_7",
                    "read_file",
                    json!({"file_path": "a.txt"}),
                )],
                reasoning: None,
            },
            Message::ToolResult {
                call_id: "call_7".into(),
                name: "read_file".into(),
                content: "     1\thello".into(),
                is_error: false,
            },
        ],
        tools: vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"], "additionalProperties": false}),
        }],
        tool_choice: ToolChoice::Auto,
        max_tokens: Some(1000),
        temperature: Some(0.2),
        ..Request::default()
    }
}

async fn sent(kind: ProviderKind) -> Recorded {
    let server = MockLlm::start().await;
    server.push(complete(kind, &Answer::Text(vec!["ok"])));
    let mut config = ProviderConfig::new(kind);
    config.api_key = Some("sk-test".into());
    config.base_url = server.base_url();
    config.retry = RetryPolicy::none();
    HttpClient::new(config)
        .unwrap()
        .complete(&conversation())
        .await
        .unwrap();
    server.requests().remove(0)
}

fn header(r: &Recorded, name: &str) -> String {
    r.headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn anthropic_messages_shape() {
    let r = sent(ProviderKind::Anthropic).await;
    assert_eq!(r.path_and_query, "/v1/messages");
    assert_eq!(header(&r, "x-api-key"), "sk-test");
    assert_eq!(header(&r, "anthropic-version"), "2023-06-01");
    let b = &r.body;
    assert_eq!(b["model"], "model-x");
    // Prompt caching: the system prompt, the tools and the conversation so
    // far each end with a breakpoint.
    let cached = json!({"type": "ephemeral"});
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "You are a careful agent.", "cache_control": cached}])
    );
    assert_eq!(b["max_tokens"], 1000);
    assert_eq!(b["stream"], false);
    assert_eq!(
        b["tools"],
        json!([{"name": "read_file", "description": "Read a file", "input_schema": conversation().tools[0].parameters, "cache_control": cached}])
    );
    assert_eq!(b["tool_choice"], json!({"type": "auto"}));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "call_7", "name": "read_file", "input": {"file_path": "a.txt"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_7", "content": "     1\thello", "is_error": false, "cache_control": cached}]}
        ])
    );
}

#[tokio::test]
async fn openai_responses_shape() {
    let r = sent(ProviderKind::OpenAi).await;
    assert_eq!(r.path_and_query, "/v1/responses");
    assert_eq!(header(&r, "authorization"), "Bearer sk-test");
    let b = &r.body;
    assert_eq!(b["model"], "model-x");
    assert_eq!(b["instructions"], "You are a careful agent.");
    assert_eq!(b["max_output_tokens"], 1000);
    assert_eq!(b["tool_choice"], "auto");
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "name": "read_file", "description": "Read a file", "parameters": conversation().tools[0].parameters, "strict": false}])
    );
    assert_eq!(
        b["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "Read a.txt"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading it."}]},
            {"type": "function_call", "call_id": "call_7", "name": "read_file", "arguments": "{\"file_path\":\"a.txt\"}"},
            {"type": "function_call_output", "call_id": "call_7", "output": "     1\thello"}
        ])
    );
}

#[tokio::test]
async fn chat_completions_shape() {
    let r = sent(ProviderKind::OpenAiCompatible).await;
    assert_eq!(r.path_and_query, "/v1/chat/completions");
    assert_eq!(header(&r, "authorization"), "Bearer sk-test");
    let b = &r.body;
    assert_eq!(b["max_tokens"], 1000);
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": conversation().tools[0].parameters}}])
    );
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "You are a careful agent."},
            {"role": "user", "content": "Read a.txt"},
            {"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"a.txt\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_7", "content": "     1\thello"}
        ])
    );
    assert!((b["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
}

#[tokio::test]
async fn gemini_generate_content_shape() {
    let r = sent(ProviderKind::Gemini).await;
    assert_eq!(r.path_and_query, "/v1beta/models/model-x:generateContent");
    assert_eq!(header(&r, "x-goog-api-key"), "sk-test");
    let b = &r.body;
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "You are a careful agent."}]})
    );
    assert_eq!(b["generationConfig"]["maxOutputTokens"], 1000);
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    let decl = &b["tools"][0]["functionDeclarations"][0];
    assert_eq!(decl["name"], "read_file");
    assert_eq!(
        decl["parameters"],
        json!({"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}),
        "additionalProperties is not accepted by Gemini and is dropped"
    );
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Read a.txt"}]},
            {"role": "model", "parts": [{"text": "Reading it."}, {"functionCall": {"name": "read_file", "args": {"file_path": "a.txt"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "     1\thello"}}}]}
        ])
    );
}

#[tokio::test]
async fn streaming_requests_ask_for_streams() {
    for kind in ProviderKind::ALL {
        let server = MockLlm::start().await;
        server.push(crate::llm_transcripts::stream(
            kind,
            &Answer::Text(vec!["ok"]),
        ));
        let mut config = ProviderConfig::new(kind);
        config.api_key = Some("k".into());
        config.base_url = server.base_url();
        let client = HttpClient::new(config).unwrap();
        let mut s = client.stream(&conversation()).await.unwrap();
        while futures::StreamExt::next(&mut s).await.is_some() {}
        let r = &server.requests()[0];
        match kind {
            ProviderKind::Gemini => assert_eq!(
                r.path_and_query,
                "/v1beta/models/model-x:streamGenerateContent?alt=sse"
            ),
            ProviderKind::OpenAiCompatible => {
                assert_eq!(r.body["stream"], true);
                assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
            }
            _ => assert_eq!(r.body["stream"], true, "{kind}"),
        }
    }
}

#[tokio::test]
async fn tool_choice_effort_and_options_map_per_provider() {
    let mut req = conversation();
    req.tool_choice = ToolChoice::Named("read_file".into());
    req.reasoning_effort = Some("high".into());
    req.provider_options
        .insert("metadata".into(), json!({"run": "t"}));
    let expected: [(ProviderKind, &str, Value); 4] = [
        (
            ProviderKind::Anthropic,
            "/tool_choice",
            json!({"type": "tool", "name": "read_file"}),
        ),
        (
            ProviderKind::OpenAi,
            "/tool_choice",
            json!({"type": "function", "name": "read_file"}),
        ),
        (
            ProviderKind::OpenAiCompatible,
            "/tool_choice",
            json!({"type": "function", "function": {"name": "read_file"}}),
        ),
        (
            ProviderKind::Gemini,
            "/toolConfig/functionCallingConfig",
            json!({"mode": "ANY", "allowedFunctionNames": ["read_file"]}),
        ),
    ];
    for (kind, pointer, value) in expected {
        let server = MockLlm::start().await;
        server.push(complete(kind, &Answer::Text(vec!["ok"])));
        let mut config = ProviderConfig::new(kind);
        config.api_key = Some("k".into());
        config.base_url = server.base_url();
        HttpClient::new(config)
            .unwrap()
            .complete(&req)
            .await
            .unwrap();
        let body = &server.requests()[0].body;
        assert_eq!(body.pointer(pointer), Some(&value), "{kind}");
        assert_eq!(
            body["metadata"],
            json!({"run": "t"}),
            "{kind}: provider options pass through"
        );
        match kind {
            ProviderKind::Anthropic => {
                assert_eq!(
                    body["thinking"],
                    json!({"type": "enabled", "budget_tokens": 24576})
                );
                assert!(body["max_tokens"].as_u64().unwrap() > 24576);
                assert!(
                    body.get("temperature").is_none(),
                    "thinking requires the default temperature"
                );
            }
            ProviderKind::OpenAi => assert_eq!(body["reasoning"]["effort"], "high"),
            ProviderKind::OpenAiCompatible => assert_eq!(body["reasoning_effort"], "high"),
            ProviderKind::Gemini => assert_eq!(
                body["generationConfig"]["thinkingConfig"]["thinkingBudget"],
                24576
            ),
        }
    }
}
