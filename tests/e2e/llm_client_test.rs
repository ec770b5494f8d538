//! The LLM client against a real loopback HTTP server replaying each
//! provider's wire format: streaming and complete answers, errors, retries,
//! cut and fragmented streams.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sandcrab::llm::{
    ErrorKind, FinishReason, HttpClient, LlmClient, LlmError, Message, ProviderConfig,
    ProviderKind, Request, Response, RetryPolicy, StreamEvent, ToolDefinition, client_for,
};
use serde_json::json;

use crate::llm_transcripts::{Answer, USAGE, complete, error_body, stream, tool};
use crate::mock_llm::{MockLlm, Reply};

const ALL: [ProviderKind; 4] = ProviderKind::ALL;

fn config(kind: ProviderKind, server: &MockLlm, retry: RetryPolicy) -> ProviderConfig {
    let mut config = ProviderConfig::new(kind);
    config.api_key = Some("test-key".into());
    config.base_url = server.base_url();
    config.retry = retry;
    config
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        base_delay: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    }
}

fn client(kind: ProviderKind, server: &MockLlm) -> HttpClient {
    HttpClient::new(config(kind, server, fast_retry())).unwrap()
}

fn request() -> Request {
    Request {
        model: "test-model".into(),
        messages: vec![Message::system("be brief"), Message::user("hi")],
        tools: vec![ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}),
        }],
        ..Request::default()
    }
}

/// Collect a stream: every event, and the final response or error.
async fn collect(client: &dyn LlmClient) -> (Vec<StreamEvent>, Result<Response, LlmError>) {
    let mut events = Vec::new();
    let mut stream = match client.stream(&request()).await {
        Ok(s) => s,
        Err(e) => return (events, Err(e)),
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamEvent::Finish(response)) => {
                assert!(stream.next().await.is_none(), "nothing after Finish");
                return (events, Ok(response));
            }
            Ok(event) => events.push(event),
            Err(e) => {
                assert!(stream.next().await.is_none(), "nothing after an error");
                return (events, Err(e));
            }
        }
    }
    panic!("the stream ended with neither Finish nor an error: {events:?}")
}

fn check_usage(kind: ProviderKind, r: &Response) {
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.cached_tokens
        ),
        USAGE,
        "{kind}"
    );
}

#[tokio::test]
async fn text_only_answers_stream_for_every_provider() {
    for kind in ALL {
        let server = MockLlm::start().await;
        server.push(stream(kind, &Answer::Text(vec!["Hel", "lo ", "world"])));
        let (events, response) = collect(&client(kind, &server)).await;
        let response = response.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(response.text, "Hello world", "{kind}");
        assert_eq!(response.finish_reason, FinishReason::Stop, "{kind}");
        assert!(response.tool_calls.is_empty());
        check_usage(kind, &response);
        assert_eq!(
            events.first(),
            Some(&StreamEvent::TextStart),
            "{kind}: {events:?}"
        );
        assert_eq!(
            events.last(),
            Some(&StreamEvent::TextEnd),
            "{kind}: {events:?}"
        );
        let deltas: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, "Hello world", "{kind}");
        assert!(
            !response.id.is_empty() && !response.model.is_empty(),
            "{kind}: {response:?}"
        );
    }
}

#[tokio::test]
async fn a_tool_call_with_fragmented_arguments_is_assembled() {
    for kind in ALL {
        let server = MockLlm::start().await;
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool(
                "call_1",
                "read_file",
                json!({"file_path": "src/main.rs"}),
            )]),
        ));
        let (events, response) = collect(&client(kind, &server)).await;
        let response = response.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(response.finish_reason, FinishReason::ToolCalls, "{kind}");
        assert_eq!(response.tool_calls.len(), 1, "{kind}");
        let call = &response.tool_calls[0];
        assert_eq!(
            (call.name.as_str(), &call.arguments),
            ("read_file", &json!({"file_path": "src/main.rs"})),
            "{kind}"
        );
        if kind != ProviderKind::Gemini {
            assert_eq!(call.id, "call_1", "{kind}");
        }
        assert!(
            matches!(events.first(), Some(StreamEvent::ToolCallStart { name, .. }) if name == "read_file"),
            "{kind}: {events:?}"
        );
        let fragments = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. }))
            .count();
        assert!(fragments >= 1, "{kind}");
        assert!(
            matches!(events.last(), Some(StreamEvent::ToolCallEnd(c)) if c == call),
            "{kind}: {events:?}"
        );
    }
}

#[tokio::test]
async fn two_parallel_tool_calls_keep_their_order() {
    for kind in ALL {
        let server = MockLlm::start().await;
        server.push(stream(
            kind,
            &Answer::Tools(vec![
                tool("call_a", "read_file", json!({"file_path": "a.txt"})),
                tool("call_b", "grep", json!({"pattern": "fn main"})),
            ]),
        ));
        let (_, response) = collect(&client(kind, &server)).await;
        let response = response.unwrap_or_else(|e| panic!("{kind}: {e}"));
        let calls: Vec<(&str, &serde_json::Value)> = response
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.arguments))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("read_file", &json!({"file_path": "a.txt"})),
                ("grep", &json!({"pattern": "fn main"}))
            ],
            "{kind}"
        );
        let ids: std::collections::HashSet<&str> =
            response.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), 2, "{kind}: call ids are distinct");
    }
}

#[tokio::test]
async fn reasoning_is_streamed_separately_from_text() {
    for kind in ALL {
        let server = MockLlm::start().await;
        server.push(stream(
            kind,
            &Answer::Reasoned("Let me think.", "Done thinking."),
        ));
        let (events, response) = collect(&client(kind, &server)).await;
        let response = response.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(response.text, "Done thinking.", "{kind}");
        assert_eq!(
            response.reasoning.as_ref().map(|r| r.text.as_str()),
            Some("Let me think."),
            "{kind}"
        );
        assert!(
            events.contains(&StreamEvent::ReasoningDelta("Let me think.".into())),
            "{kind}: {events:?}"
        );
        if kind == ProviderKind::Anthropic {
            assert_eq!(
                response.reasoning.unwrap().parts,
                vec![sandcrab::llm::ReasoningPart::Thinking {
                    thinking: "Let me think.".into(),
                    signature: "sig-abc".into()
                }]
            );
        }
    }
}

#[tokio::test]
async fn complete_answers_parse_for_every_provider() {
    for kind in ALL {
        for (answer, check) in [
            (Answer::Text(vec!["Hello ", "world"]), "text"),
            (
                Answer::Tools(vec![tool("call_1", "read_file", json!({"file_path": "x"}))]),
                "tool",
            ),
            (Answer::Reasoned("Hmm.", "Answer."), "reasoning"),
        ] {
            let server = MockLlm::start().await;
            server.push(complete(kind, &answer));
            let r = client(kind, &server)
                .complete(&request())
                .await
                .unwrap_or_else(|e| panic!("{kind} {check}: {e}"));
            check_usage(kind, &r);
            match check {
                "text" => assert_eq!(
                    (r.text.as_str(), &r.finish_reason),
                    ("Hello world", &FinishReason::Stop),
                    "{kind}"
                ),
                "tool" => {
                    assert_eq!(r.finish_reason, FinishReason::ToolCalls, "{kind}");
                    assert_eq!(
                        r.tool_calls[0].arguments,
                        json!({"file_path": "x"}),
                        "{kind}"
                    );
                }
                _ => assert_eq!(
                    r.reasoning.map(|x| x.text),
                    Some("Hmm.".to_string()),
                    "{kind}"
                ),
            }
            let req = &server.requests()[0];
            assert!(
                !req.body
                    .get("stream")
                    .and_then(|s| s.as_bool())
                    .unwrap_or(false),
                "{kind}"
            );
        }
    }
}

#[tokio::test]
async fn frames_split_one_byte_at_a_time_give_the_same_answer() {
    for kind in ALL {
        let server = MockLlm::start().await;
        let answer = Answer::Tools(vec![tool(
            "call_1",
            "write_file",
            json!({"file_path": "ü.txt", "content": "héllo → 世界"}),
        )]);
        server.push(stream(kind, &answer).bytewise());
        let (_, response) = collect(&client(kind, &server)).await;
        let response = response.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            response.tool_calls[0].arguments,
            json!({"file_path": "ü.txt", "content": "héllo → 世界"}),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_stream_cut_off_mid_event_is_a_stream_error() {
    for kind in ALL {
        let full = stream(kind, &Answer::Text(vec!["Hello ", "world"]));
        let len: usize = full.chunks.iter().map(|c| c.len()).sum();
        // Ends cleanly but early (the terminal events are missing).
        let server = MockLlm::start().await;
        server.push(full.clone().truncated(len * 2 / 3));
        let (_, result) = collect(&client(kind, &server)).await;
        let err = result.expect_err(&format!("{kind}: a partial stream must not succeed"));
        assert_eq!(err.kind, ErrorKind::Stream, "{kind}: {err}");
        assert_eq!(
            server.requests().len(),
            1,
            "{kind}: a started stream is not retried"
        );
        // The connection breaks.
        let server = MockLlm::start().await;
        server.push(
            full.truncated(len / 2)
                .delayed(Duration::from_millis(30))
                .aborted(),
        );
        let (_, result) = collect(&client(kind, &server)).await;
        assert_eq!(
            result.expect_err(&format!("{kind}")).kind,
            ErrorKind::Stream,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn each_error_status_maps_to_its_kind() {
    let cases = [
        (401, ErrorKind::Authentication, "bad key"),
        (403, ErrorKind::AccessDenied, "forbidden"),
        (404, ErrorKind::NotFound, "no such model"),
        (400, ErrorKind::InvalidRequest, "field x is wrong"),
        (422, ErrorKind::InvalidRequest, "unprocessable"),
        (413, ErrorKind::ContextLength, "request too large"),
        (
            400,
            ErrorKind::ContextLength,
            "This model's maximum context length is 8192 tokens",
        ),
        // llama.cpp's own words for the same refusal.
        (
            400,
            ErrorKind::ContextLength,
            "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
        ),
        (429, ErrorKind::RateLimit, "slow down"),
        (500, ErrorKind::Server, "internal"),
        (503, ErrorKind::Server, "overloaded"),
    ];
    for kind in ALL {
        for (status, expected, message) in cases {
            let server = MockLlm::start().await;
            server.push(Reply::json(status, error_body(kind, status, message)));
            let client = HttpClient::new(config(kind, &server, RetryPolicy::none())).unwrap();
            let err = client.complete(&request()).await.unwrap_err();
            assert_eq!(err.kind, expected, "{kind} {status}: {err}");
            assert_eq!(err.status, Some(status));
            assert_eq!(err.provider, kind.id());
            assert_eq!(err.message, message, "{kind} {status}");
            assert_eq!(
                err.retryable(),
                matches!(expected, ErrorKind::RateLimit | ErrorKind::Server)
            );
            // Streams fail the same way at connection time.
            server.push(Reply::json(status, error_body(kind, status, message)));
            let (_, result) = collect(&client).await;
            assert_eq!(
                result.unwrap_err().kind,
                expected,
                "{kind} {status} (stream)"
            );
        }
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured_then_succeeds() {
    for kind in [ProviderKind::Anthropic, ProviderKind::Gemini] {
        let server = MockLlm::start().await;
        server
            .push(Reply::json(429, error_body(kind, 429, "slow down")).header("retry-after", "1"));
        server.push(stream(kind, &Answer::Text(vec!["ok"])));
        let (_, response) = collect(&client(kind, &server)).await;
        assert_eq!(response.unwrap().text, "ok");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let waited = reqs[1].at - reqs[0].at;
        assert!(
            waited >= Duration::from_millis(950),
            "{kind}: retried after {waited:?}, not the 1 s asked"
        );
    }
}

#[tokio::test]
async fn retry_after_longer_than_the_cap_is_an_error_not_a_sleep() {
    let server = MockLlm::start().await;
    server.push(
        Reply::json(429, error_body(ProviderKind::OpenAi, 429, "later"))
            .header("retry-after", "3600"),
    );
    let started = std::time::Instant::now();
    let err = client(ProviderKind::OpenAi, &server)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.kind, ErrorKind::RateLimit);
    assert!(err.message.contains("3600"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_twice_then_reported() {
    for kind in ALL {
        let server = MockLlm::start().await;
        server.push(Reply::json(500, error_body(kind, 500, "boom")));
        server.push(complete(kind, &Answer::Text(vec!["recovered"])));
        let r = client(kind, &server)
            .complete(&request())
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(r.text, "recovered", "{kind}");

        let server = MockLlm::start().await;
        server.push(Reply::json(502, error_body(kind, 502, "boom")));
        server.push(stream(kind, &Answer::Text(vec!["streamed"])));
        let (_, r) = collect(&client(kind, &server)).await;
        assert_eq!(
            r.unwrap().text,
            "streamed",
            "{kind}: the stream's connection is retried"
        );

        let server = MockLlm::start().await;
        for _ in 0..3 {
            server.push(Reply::json(500, error_body(kind, 500, "still down")));
        }
        let err = client(kind, &server)
            .complete(&request())
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind, server.requests().len()),
            (ErrorKind::Server, 3),
            "{kind}: 1 try + 2 retries"
        );
    }
}

/// The reply's SSE lines as separate chunks, each after `delay`.
fn line_by_line(reply: crate::mock_llm::Reply, delay: Duration) -> crate::mock_llm::Reply {
    let chunks = reply.chunks[0]
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    crate::mock_llm::Reply { chunks, ..reply }.delayed(delay)
}

#[tokio::test]
async fn a_slow_first_answer_waits_for_the_first_byte_timeout_not_the_idle_one() {
    let server = MockLlm::start().await;
    // A local model thinking for a while before anything arrives.
    server.push(
        stream(ProviderKind::Anthropic, &Answer::Text(vec!["a", "b"]))
            .delayed(Duration::from_millis(400)),
    );
    let mut cfg = config(ProviderKind::Anthropic, &server, RetryPolicy::none());
    cfg.read_timeout = Duration::from_millis(150);
    cfg.first_byte_timeout = Duration::from_secs(5);
    let (_, result) = collect(&HttpClient::new(cfg.clone()).unwrap()).await;
    assert_eq!(result.unwrap().text, "ab");

    // Nothing at all within the first-byte timeout.
    server.push(
        stream(ProviderKind::Anthropic, &Answer::Text(vec!["a"]))
            .delayed(Duration::from_millis(600)),
    );
    cfg.first_byte_timeout = Duration::from_millis(200);
    let (_, result) = collect(&HttpClient::new(cfg).unwrap()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.message.contains("no answer began within"), "{err}");
}

#[tokio::test]
async fn a_stream_that_goes_silent_times_out() {
    let server = MockLlm::start().await;
    server.push(line_by_line(
        stream(ProviderKind::Anthropic, &Answer::Text(vec!["a", "b"])),
        Duration::from_millis(400),
    ));
    let mut cfg = config(ProviderKind::Anthropic, &server, RetryPolicy::none());
    cfg.read_timeout = Duration::from_millis(150);
    cfg.first_byte_timeout = Duration::from_secs(5);
    let (_, result) = collect(&HttpClient::new(cfg).unwrap()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.message.contains("no data for"), "{err}");
}

#[tokio::test]
async fn unreachable_provider_is_a_network_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut cfg = ProviderConfig::new(ProviderKind::OpenAiCompatible);
    cfg.base_url = format!("http://{addr}");
    cfg.retry = RetryPolicy::none();
    let err = HttpClient::new(cfg)
        .unwrap()
        .complete(&request())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Network, "{err}");
}

#[tokio::test]
async fn without_a_key_the_stub_fails_every_call_with_a_configuration_error() {
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::Gemini,
    ] {
        let client: Arc<dyn LlmClient> = client_for(ProviderConfig::from_env(kind, None, |_| None));
        let err = client.complete(&request()).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Configuration);
        assert!(
            err.message.starts_with("LLM provider not configured: set"),
            "{err}"
        );
        assert!(err.message.contains(kind.key_vars()[0]), "{err}");
        assert!(client.stream(&request()).await.is_err());
    }
}

#[test]
fn keys_and_base_urls_come_from_the_environment_and_flags() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let c = ProviderConfig::from_env(
        ProviderKind::Gemini,
        None,
        env(&[
            ("GOOGLE_API_KEY", "g"),
            ("GEMINI_BASE_URL", "http://x/v1beta/"),
        ]),
    );
    assert_eq!(c.api_key.as_deref(), Some("g"));
    assert_eq!(c.root(), "http://x");
    let c = ProviderConfig::from_env(
        ProviderKind::Anthropic,
        Some("http://flag"),
        env(&[
            ("ANTHROPIC_API_KEY", "a"),
            ("ANTHROPIC_BASE_URL", "http://env"),
        ]),
    );
    assert_eq!(c.base_url, "http://flag", "the flag wins");
    assert!(
        !format!("{c:?}").contains("\"a\""),
        "Debug never prints the key"
    );
    let c = ProviderConfig::from_env(
        ProviderKind::OpenAiCompatible,
        None,
        env(&[("OPENAI_BASE_URL", "http://localhost:8080/v1")]),
    );
    assert_eq!(c.root(), "http://localhost:8080");
}

#[tokio::test]
async fn garbage_from_a_provider_is_a_clear_error() {
    for kind in ALL {
        // An SSE stream whose data is not JSON.
        let server = MockLlm::start().await;
        server.push(Reply::sse("data: {this is not json\n\n"));
        let (_, result) = collect(&client(kind, &server)).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Stream, "{kind}: {err}");
        assert!(
            err.message.contains("malformed event data"),
            "{kind}: {err}"
        );
        // A 200 answer that is HTML, not a stream.
        let server = MockLlm::start().await;
        server.push(Reply::sse("<html><body>Welcome to nginx!</body></html>"));
        let (_, result) = collect(&client(kind, &server)).await;
        assert_eq!(result.unwrap_err().kind, ErrorKind::Stream, "{kind}");
        // A complete answer that is not JSON.
        let server = MockLlm::start().await;
        server.push(Reply::sse("Service Unavailable"));
        let err = client(kind, &server)
            .complete(&request())
            .await
            .unwrap_err();
        assert!(
            err.message.contains("not JSON") && err.message.contains("Service Unavailable"),
            "{kind}: {err}"
        );
    }
}
