use serde_json::json;

use super::*;
use crate::llm::{ToolCall, ToolDefinition};

fn result(id: &str, content: String) -> Message {
    Message::ToolResult {
        call_id: id.into(),
        name: "read_file".into(),
        content,
        is_error: false,
    }
}

fn call(id: &str, arguments: Value) -> Message {
    Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall::new(id, "write_file", arguments)],
        reasoning: None,
    }
}

fn brief() -> String {
    "be brief; tools: t0".into()
}

fn request(messages: Vec<Message>) -> Request {
    Request {
        messages,
        ..Request::default()
    }
}

/// Every tool result still follows the call it answers.
fn pairs_intact(request: &Request) -> bool {
    let mut open = std::collections::HashSet::new();
    for m in &request.messages {
        match m {
            Message::Assistant { tool_calls, .. } => {
                open.extend(tool_calls.iter().map(|c| c.id.clone()))
            }
            Message::ToolResult { call_id, .. } if !open.remove(call_id) => return false,
            _ => {}
        }
    }
    true
}

#[test]
fn a_request_that_fits_is_sent_as_it_is() {
    let mut r = request(vec![Message::system("be brief"), Message::user("hello")]);
    let before = r.clone();
    let report = fit(&mut r, Some(1), 1000, brief).unwrap();
    assert!(report.unchanged());
    assert_eq!(r, before);
}

#[test]
fn a_huge_tool_output_is_cut_with_a_marker_and_the_input_stays_whole() {
    let input = "Now summarize what you read. ".repeat(20);
    let mut r = request(vec![
        Message::system("be brief"),
        Message::user("read the log"),
        call("c1", json!({"path": "log.txt"})),
        result("c1", "line of the log\n".repeat(5000)),
        Message::assistant("read it"),
        Message::user(input.clone()),
    ]);
    let report = fit(&mut r, Some(5), 2000, brief).unwrap();
    assert!(report.tokens <= 2000, "{report:?}");
    assert_eq!(report.clipped, 1);
    assert_eq!(report.dropped, 0);
    let Message::ToolResult { content, .. } = &r.messages[3] else {
        panic!("{r:?}")
    };
    assert!(content.starts_with("line of the log"), "{content}");
    assert!(content.contains("bytes cut here"), "{content}");
    assert!(content.ends_with("line of the log\n"));
    assert_eq!(r.messages[5], Message::user(input));
    assert!(pairs_intact(&r));
}

#[test]
fn many_old_exchanges_are_left_out_whole_and_said_to_be() {
    let mut messages = vec![Message::system("be brief")];
    for i in 0..40 {
        messages.push(Message::user(format!(
            "question {i}: {}",
            "detail ".repeat(60)
        )));
        messages.push(call(&format!("c{i}"), json!({"path": format!("f{i}")})));
        messages.push(result(&format!("c{i}"), "content ".repeat(60)));
        messages.push(Message::assistant("answer ".repeat(40)));
    }
    messages.push(Message::user("the question now"));
    let input = messages.len() - 1;
    let mut r = request(messages);
    let report = fit(&mut r, Some(input), 3000, brief).unwrap();
    assert!(report.tokens <= 3000, "{report:?}");
    assert!(report.dropped > 0, "{report:?}");
    assert!(pairs_intact(&r), "{r:#?}");
    let Message::System { text } = &r.messages[1] else {
        panic!("no note: {:?}", r.messages[1])
    };
    assert!(text.contains("earlier messages"), "{text}");
    // What stays starts with the operator, and ends with the input.
    assert!(matches!(r.messages[2], Message::User { .. }), "{r:#?}");
    assert_eq!(r.messages.last(), Some(&Message::user("the question now")));
    // The newest exchange is the one kept.
    assert!(format!("{r:?}").contains("question 39"));
}

#[test]
fn a_huge_tool_argument_is_cut_inside_its_strings_and_stays_json() {
    let content = "x".repeat(40_000);
    let mut r = request(vec![
        Message::system("be brief"),
        Message::user("write it"),
        call("c1", json!({"path": "big.txt", "content": content})),
        result("c1", "written".into()),
        Message::user("and now?"),
    ]);
    let report = fit(&mut r, Some(4), 1500, brief).unwrap();
    assert!(report.tokens <= 1500, "{report:?}");
    let Message::Assistant { tool_calls, .. } = &r.messages[2] else {
        panic!()
    };
    let args = &tool_calls[0].arguments;
    assert_eq!(args["path"], "big.txt");
    let cut = args["content"].as_str().unwrap();
    assert!(
        cut.len() < 5000 && cut.contains("bytes cut …]"),
        "{}",
        cut.len()
    );
}

#[test]
fn an_input_that_cannot_fit_is_refused_with_the_numbers() {
    let mut r = request(vec![
        Message::system("be brief"),
        Message::user("earlier"),
        Message::assistant("ok"),
        Message::user("y".repeat(30_000)),
    ]);
    let too_big = fit(&mut r, Some(3), 4000, brief).unwrap_err();
    assert!(too_big.input > 10_000, "{too_big:?}");
    assert_eq!(too_big.budget, 4000);
    assert!(too_big.fixed < 100, "{too_big:?}");
}

#[test]
fn tools_that_take_a_third_of_the_window_are_described_shortly() {
    let tool = |name: &str| ToolDefinition {
        name: name.into(),
        description: format!(
            "Read a file. {}",
            "It does many careful things, described at length. ".repeat(30)
        ),
        parameters: json!({"type":"object","properties":{
            "path":{"type":"string","description":"The path. ".repeat(20)},
            "description":{"type":"string"}}}),
    };
    let mut r = Request {
        tools: (0..10).map(|i| tool(&format!("t{i}"))).collect(),
        ..request(vec![Message::system("be brief"), Message::user("go")])
    };
    let before = tools_tokens(&r.tools);
    let report = fit(&mut r, Some(1), before, brief).unwrap();
    assert!(report.tools_shortened);
    assert!(
        tools_tokens(&r.tools) * 5 < before,
        "{}",
        tools_tokens(&r.tools)
    );
    assert_eq!(r.tools[0].description, "Read a file.");
    assert_eq!(r.messages[0], Message::system(brief()));
    // A parameter named `description` is a parameter, not a description.
    assert!(r.tools[0].parameters["properties"]["description"].is_object());
    assert!(r.tools[0].parameters["properties"]["path"]["description"].is_null());
}

#[test]
fn a_message_cut_very_short_gets_a_short_marker_so_the_cut_still_fits() {
    let mut r = request(vec![
        Message::system("be brief"),
        Message::system(format!(
            "[Context Summary] {}",
            "what happened. ".repeat(200)
        )),
        Message::user("earlier"),
        Message::assistant("ok"),
        Message::user("now"),
    ]);
    // Room for little more than the prompt, the input and a marker.
    let report = fit(&mut r, Some(4), 100, brief).unwrap();
    assert!(report.tokens <= 100, "{report:?} {r:#?}");
    let Message::System { text } = &r.messages[1] else {
        panic!("{r:#?}")
    };
    assert!(
        text.contains("bytes cut …]") && !text.contains("cut here"),
        "{text}"
    );
    assert_eq!(r.messages.last(), Some(&Message::user("now")));
}

#[test]
fn old_exchanges_go_before_the_newest_tool_output_is_cut() {
    let mut messages = vec![Message::system("be brief")];
    for i in 0..10 {
        messages.push(Message::user(format!(
            "question {i}: {}",
            "detail ".repeat(60)
        )));
        messages.push(Message::assistant("answer ".repeat(60)));
    }
    messages.push(Message::user("read the log"));
    let input = messages.len() - 1;
    messages.push(call("now", json!({"path": "log"})));
    let newest = "line of the log\n".repeat(300);
    messages.push(result("now", newest.clone()));
    let mut r = request(messages);
    let report = fit(&mut r, Some(input), 3000, brief).unwrap();
    assert!(report.dropped > 0, "{report:?}");
    assert_eq!(r.messages.last(), Some(&result("now", newest)), "{r:#?}");
    assert!(pairs_intact(&r));
}

#[test]
fn a_long_tool_loop_leaves_out_its_earlier_rounds_and_keeps_the_latest_whole() {
    let mut messages = vec![Message::system("be brief"), Message::user("fix every file")];
    for i in 0..30 {
        messages.push(call(&format!("c{i}"), json!({"path": format!("f{i}")})));
        messages.push(result(
            &format!("c{i}"),
            format!("file {i}: {}", "code ".repeat(300)),
        ));
    }
    let latest = messages[messages.len() - 2..].to_vec();
    let mut r = request(messages);
    let report = fit(&mut r, Some(1), 4000, brief).unwrap();
    assert!(report.tokens <= 4000, "{report:?}");
    assert!(report.dropped > 0, "{report:?}");
    // The input, then the note, then what stays; the latest round whole.
    assert_eq!(r.messages[1], Message::user("fix every file"));
    let Message::System { text } = &r.messages[2] else {
        panic!("no note: {:?}", r.messages[2])
    };
    assert!(text.contains("tool calls made for this request"), "{text}");
    assert!(matches!(r.messages[3], Message::Assistant { .. }), "{r:#?}");
    assert_eq!(r.messages[r.messages.len() - 2..], latest[..]);
    assert!(pairs_intact(&r), "{r:#?}");
    assert!(
        format!("{r:?}").contains("file 28"),
        "the rounds just before stay too"
    );
}

#[test]
fn reasoning_sent_back_with_older_answers_is_left_out_first() {
    let thinking = |n: usize| crate::llm::Reasoning {
        text: String::new(),
        signature: None,
        parts: vec![crate::llm::ReasoningPart::Thinking {
            thinking: "hmm ".repeat(n),
            signature: "sig".into(),
        }],
    };
    let answer = |text: &str| Message::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        reasoning: Some(thinking(1500)),
    };
    let mut r = request(vec![
        Message::system("be brief"),
        Message::user("first"),
        answer("one"),
        Message::user("second"),
        answer("two"),
        Message::user("now"),
    ]);
    let report = fit(&mut r, Some(5), 2500, brief).unwrap();
    assert_eq!((report.clipped, report.dropped), (2, 0), "{report:?}");
    assert_eq!(r.messages[2], Message::assistant("one"));
    assert_eq!(r.messages[4], Message::assistant("two"));
}
