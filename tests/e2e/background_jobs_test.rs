//! The background tool jobs matrix: every N, E and B row, named after it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sandcrab::agent::{
    Profile, Session, SessionConfig, SessionJobs, SessionParts, SessionState, TurnKind,
};
use sandcrab::jobs::{
    Actor, BackgroundSettings, CallMode, JobError, JobOutcome, JobRegistry, JobStatus, Payload,
    TERMINAL_RETENTION, run_call,
};
use sandcrab::llm::scripted::{ScriptedClient, text, tool_calls};
use sandcrab::llm::{HttpClient, LlmClient, ProviderConfig, ProviderKind, Request, RetryPolicy};
use sandcrab::plugin::{ProfileInfo, ToolSpec};
use sandcrab::tools::{
    FnTool, ToolCallRequest, ToolContext, ToolRegistry, TruncationLimits, TruncationPolicy,
};
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, complete};
use crate::mock_llm::{MockLlm, Reply};

const THREAD: &str = "thread-a";
const OTHER: &str = "thread-b";

fn registry() -> Arc<JobRegistry> {
    JobRegistry::new(TruncationPolicy::default())
}

/// Tools: `quick` returns at once; `slow` sleeps `ms` (default 200) then
/// returns; `broken` fails.
fn tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let schema = json!({"type": "object"});
    r.register(
        ToolSpec {
            name: "quick".into(),
            description: "quick".into(),
            parameters: schema.clone(),
            traits: Default::default(),
        },
        Arc::new(FnTool(|_, _| async { Ok("quick result".to_string()) })),
    );
    r.register(
        ToolSpec {
            name: "slow".into(),
            description: "slow".into(),
            parameters: schema.clone(),
            traits: Default::default(),
        },
        Arc::new(FnTool(|args: Value, _| async move {
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(200))).await;
            Ok(format!("slept {}", args["ms"].as_u64().unwrap_or(200)))
        })),
    );
    r.register(
        ToolSpec {
            name: "broken".into(),
            description: "fails".into(),
            parameters: schema,
            traits: Default::default(),
        },
        Arc::new(FnTool(|_, _| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Err("it broke".to_string())
        })),
    );
    r
}

fn ctx(thread: &str, call: &str) -> ToolContext {
    ToolContext {
        session_id: thread.into(),
        call_id: call.into(),
        ..Default::default()
    }
}

fn request(call: &str, name: &str, args: Value) -> ToolCallRequest {
    ToolCallRequest {
        id: call.into(),
        name: name.into(),
        arguments: args,
    }
}

fn settings(after_ms: u64) -> BackgroundSettings {
    BackgroundSettings {
        after: Duration::from_millis(after_ms),
        max_duration: Duration::from_secs(60),
    }
}

/// Wait until `job` is terminal (or fail after 10 s).
async fn terminal(jobs: &JobRegistry, thread: &str, job: &str) -> sandcrab::jobs::JobRecord {
    for _ in 0..1000 {
        let r = jobs.inspect(thread, job).unwrap();
        if r.status.is_terminal() {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("job {job} never finished");
}

async fn background(
    jobs: &Arc<JobRegistry>,
    call: &str,
    name: &str,
    args: Value,
) -> sandcrab::jobs::JobRecord {
    match run_call(
        jobs,
        tools(),
        request(call, name, args),
        ctx(THREAD, call),
        settings(20),
    )
    .await
    .unwrap()
    {
        CallMode::Background(r) => *r,
        CallMode::Inline(o) => panic!("expected a background job, got inline {o:?}"),
    }
}

fn start(jobs: &JobRegistry, thread: &str, call: &str) -> String {
    jobs.start(thread, call, "shell").unwrap().record.job_id
}

// ---- Nominal ----

#[tokio::test]
async fn n1_synchronous_tool_completion() {
    let jobs = registry();
    let mode = run_call(
        &jobs,
        tools(),
        request("c1", "quick", json!({})),
        ctx(THREAD, "c1"),
        settings(1000),
    )
    .await
    .unwrap();
    match mode {
        CallMode::Inline(outcome) => {
            assert_eq!(outcome.content, "quick result");
            assert!(!outcome.content.contains("job_id"));
        }
        CallMode::Background(_) => panic!("a quick call must complete inline"),
    }
    assert!(jobs.is_empty(), "no background job record");
}

#[tokio::test]
async fn n2_background_start_response() {
    let jobs = registry();
    let record = background(&jobs, "c1", "slow", json!({"ms": 300})).await;
    let response: Value = serde_json::from_str(&CallMode::background_result(&record)).unwrap();
    assert_eq!(response["mode"], "background");
    assert_eq!(response["status"], "running");
    assert_eq!(response["job_id"], record.job_id.as_str());
    assert_eq!(record.status, JobStatus::Running);
    assert_eq!(jobs.len(), 1, "one job record");
}

#[tokio::test]
async fn n3_terminal_status_transition() {
    let jobs = registry();
    let done = background(&jobs, "c1", "slow", json!({"ms": 50})).await;
    let failed = background(&jobs, "c2", "broken", json!({})).await;
    let cancelled = background(&jobs, "c3", "slow", json!({"ms": 5000})).await;
    jobs.cancel(THREAD, &cancelled.job_id, Actor::User).unwrap();
    let timed_out = match run_call(
        &jobs,
        tools(),
        request("c4", "slow", json!({"ms": 5000})),
        ctx(THREAD, "c4"),
        BackgroundSettings {
            after: Duration::ZERO,
            max_duration: Duration::from_millis(100),
        },
    )
    .await
    .unwrap()
    {
        CallMode::Background(r) => *r,
        CallMode::Inline(_) => panic!(),
    };
    for (job, status) in [
        (&done, JobStatus::Completed),
        (&failed, JobStatus::Failed),
        (&cancelled, JobStatus::Cancelled),
        (&timed_out, JobStatus::TimedOut),
    ] {
        let r = terminal(&jobs, THREAD, &job.job_id).await;
        assert_eq!(r.status, status);
        assert!(
            r.completed_at.is_some() && r.completion_seq.is_some(),
            "{status:?}"
        );
        assert!(r.payload.is_some(), "{status:?}: terminal payload recorded");
    }
    let r = jobs.inspect(THREAD, &done.job_id).unwrap();
    assert_eq!(
        r.payload,
        Some(Payload::Inline {
            text: "slept 50".into()
        })
    );
}

fn job_session(
    jobs: &Arc<JobRegistry>,
    client: Arc<ScriptedClient>,
    after_ms: u64,
) -> Arc<Session> {
    Session::new(SessionParts {
        jobs: Some(SessionJobs {
            registry: jobs.clone(),
            settings: settings(after_ms),
        }),
        ..SessionParts::new(
            client,
            Arc::new(Profile {
                info: ProfileInfo {
                    id: "anthropic".into(),
                    default_model: "m".into(),
                    context_window: 200_000,
                    parallel_tool_calls: true,
                    tool_names: vec![],
                    project_doc_files: vec![],
                    max_output_tokens: 0,
                },
                base_instructions: "test".into(),
            }),
            tools().into(),
            SessionConfig::new("m"),
            std::env::temp_dir(),
        )
    })
}

async fn wait_for_requests(client: &ScriptedClient, n: usize) {
    for _ in 0..1000 {
        if client.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "only {} model requests arrived, expected {n}",
        client.requests().len()
    );
}

/// Wait until `cond` holds (or fail after 5 s).
async fn eventually(cond: impl Fn() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the condition never held");
}

fn job_messages(session: &Session) -> Vec<String> {
    session
        .history()
        .iter()
        .filter_map(|t| match &t.kind {
            TurnKind::Assistant { text, .. } if text.starts_with("[job ") => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn n4_single_terminal_injection() {
    let jobs = registry();
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[("c1", "slow", json!({"ms": 300}))]),
        text("Started it; waiting."),
        text("The job finished."),
    ]));
    let session = job_session(&jobs, client.clone(), 20);
    session.submit("go").await.unwrap();
    wait_for_requests(&client, 3).await;
    let third = &client.requests()[2];
    let injected: Vec<&str> = third
        .messages
        .iter()
        .filter_map(|m| match m {
            sandcrab::llm::Message::Assistant { text, .. } if text.starts_with("[job ") => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(injected.len(), 1, "exactly one synthetic message");
    assert!(
        injected[0].contains("slow completed") && injected[0].contains("slept 300"),
        "{}",
        injected[0]
    );
    eventually(|| session.last_assistant_text().as_deref() == Some("The job finished.")).await;
    assert_eq!(job_messages(&session).len(), 1);
}

#[tokio::test]
async fn n5_ordered_multi_job_injection() {
    let jobs = registry();
    let a = start(&jobs, THREAD, "a");
    let b = start(&jobs, THREAD, "b");
    let c = start(&jobs, THREAD, "c");
    jobs.finish(&b, JobOutcome::Succeeded("B".into()));
    jobs.finish(&c, JobOutcome::Succeeded("C".into()));
    jobs.finish(&a, JobOutcome::Succeeded("A".into()));
    let messages = jobs.drain_messages(THREAD);
    let order: Vec<&str> = messages.iter().map(|m| m.lines().nth(1).unwrap()).collect();
    assert_eq!(order, vec!["B", "C", "A"], "completion order, oldest first");
}

#[tokio::test]
async fn n6_cancel_request_user_and_agent() {
    let jobs = registry();
    let by_user = background(&jobs, "c1", "slow", json!({"ms": 5000})).await;
    let r = jobs.cancel(THREAD, &by_user.job_id, Actor::User).unwrap();
    assert_eq!(
        (r.status, r.cancel_requested_by),
        (JobStatus::PendingCancel, Some(Actor::User))
    );

    let by_agent = background(&jobs, "c2", "slow", json!({"ms": 5000})).await;
    let mut agent_tools = ToolRegistry::new();
    sandcrab::jobs::register_tools(&mut agent_tools, &jobs);
    let out = sandcrab::tools::dispatch(
        &agent_tools,
        &request("x", "cancel_job", json!({"job_id": by_agent.job_id})),
        &ctx(THREAD, "x"),
    )
    .await;
    assert!(!out.is_error(), "{}", out.content);
    assert_eq!(
        serde_json::from_str::<Value>(&out.content).unwrap()["status"],
        "pending_cancel"
    );
    assert_eq!(
        jobs.inspect(THREAD, &by_agent.job_id)
            .unwrap()
            .cancel_requested_by,
        Some(Actor::Agent)
    );
    // The request reached the tool runtime: both stop long before 5 s.
    for job in [&by_user, &by_agent] {
        assert_eq!(
            terminal(&jobs, THREAD, &job.job_id).await.status,
            JobStatus::Cancelled
        );
    }
}

#[tokio::test]
async fn n7_oversize_payload_path() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    let big: String = (0..100_000).map(|i| format!("{i}\n")).collect();
    jobs.finish(&id, JobOutcome::Succeeded(big.clone()));
    let record = jobs.inspect(THREAD, &id).unwrap();
    let Some(Payload::File { path, bytes, .. }) = &record.payload else {
        panic!("{:?}", record.payload)
    };
    assert_eq!(*bytes, big.len());
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        big,
        "the whole payload is in the file"
    );
    let message = jobs.drain_messages(THREAD).remove(0);
    assert!(
        message.contains(path.as_str()),
        "the message references the file"
    );
    assert!(message.len() < 5000, "the message carries only a preview");
}

fn mixed(jobs: &JobRegistry) -> (String, String, String, String) {
    let running = start(jobs, THREAD, "r");
    let pending = start(jobs, THREAD, "p");
    jobs.cancel(THREAD, &pending, Actor::User).unwrap();
    let done = start(jobs, THREAD, "d");
    jobs.finish(&done, JobOutcome::Succeeded("ok".into()));
    let failed = start(jobs, THREAD, "f");
    jobs.finish(&failed, JobOutcome::Failed("no".into()));
    (running, pending, done, failed)
}

#[tokio::test]
async fn n8_default_list_behavior() {
    let jobs = registry();
    let (running, pending, _, _) = mixed(&jobs);
    let listed: Vec<String> = jobs
        .list(THREAD, None)
        .into_iter()
        .map(|r| r.job_id)
        .collect();
    assert_eq!(listed, vec![running, pending]);
}

#[tokio::test]
async fn n9_explicit_status_filter() {
    let jobs = registry();
    let (_, _, done, failed) = mixed(&jobs);
    let listed: Vec<String> = jobs
        .list(THREAD, Some(&[JobStatus::Completed, JobStatus::Failed]))
        .into_iter()
        .map(|r| r.job_id)
        .collect();
    assert_eq!(listed, vec![done.clone(), failed]);
    let only: Vec<String> = jobs
        .list(THREAD, Some(&[JobStatus::Completed]))
        .into_iter()
        .map(|r| r.job_id)
        .collect();
    assert_eq!(only, vec![done]);
}

#[tokio::test]
async fn n10_inspect_in_thread() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    jobs.finish(&id, JobOutcome::Succeeded("out".into()));
    let record = jobs.inspect(THREAD, &id).unwrap();
    assert_eq!(record.job_id, id);
    assert_eq!(record.tool_call_id, "c1");
    assert_eq!(record.thread_id, THREAD);
    assert_eq!(record.tool_name, "shell");
    assert_eq!(record.status, JobStatus::Completed);
    assert_eq!(record.payload, Some(Payload::Inline { text: "out".into() }));
    assert!(record.completed_at.is_some() && !record.started_at.is_empty());
}

// ---- Edge ----

#[tokio::test]
async fn e1_second_background_job_for_same_tool_call() {
    let jobs = registry();
    jobs.start(THREAD, "call-1", "shell").unwrap();
    assert_eq!(
        jobs.start(THREAD, "call-1", "shell").unwrap_err(),
        JobError::DuplicateToolCall("call-1".into())
    );
    let second = run_call(
        &jobs,
        tools(),
        request("call-1", "slow", json!({})),
        ctx(THREAD, "call-1"),
        settings(0),
    )
    .await;
    assert!(matches!(second, Err(JobError::DuplicateToolCall(_))));
    assert_eq!(jobs.len(), 1, "still at most one job for the call");
}

#[tokio::test]
async fn e2_duplicate_job_id_collision() {
    let jobs = registry();
    jobs.start_with_id("job-x", THREAD, "c1", "shell").unwrap();
    assert_eq!(
        jobs.start_with_id("job-x", THREAD, "c2", "shell")
            .unwrap_err(),
        JobError::DuplicateJobId("job-x".into())
    );
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        jobs.inspect(THREAD, "job-x").unwrap().tool_call_id,
        "c1",
        "the original is untouched"
    );
}

#[tokio::test]
async fn e3_non_terminal_updates_do_not_inject() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    assert!(
        jobs.drain_messages(THREAD).is_empty(),
        "running injects nothing"
    );
    jobs.cancel(THREAD, &id, Actor::Agent).unwrap();
    assert!(
        jobs.drain_messages(THREAD).is_empty(),
        "pending_cancel injects nothing"
    );
    assert!(!jobs.has_pending(THREAD));
}

#[tokio::test]
async fn e4_duplicate_emit_attempt() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    jobs.finish(&id, JobOutcome::Succeeded("once".into()));
    assert_eq!(jobs.drain_messages(THREAD).len(), 1);
    assert!(jobs.inspect(THREAD, &id).unwrap().terminal_message_emitted);
    assert!(jobs.drain_messages(THREAD).is_empty(), "no second message");
    jobs.finish(&id, JobOutcome::Failed("late duplicate".into()));
    assert!(
        jobs.drain_messages(THREAD).is_empty(),
        "a repeated terminal report injects nothing"
    );
    assert_eq!(
        jobs.inspect(THREAD, &id).unwrap().status,
        JobStatus::Completed
    );
}

#[tokio::test]
async fn e5_best_effort_cancel_still_completes() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    assert_eq!(
        jobs.cancel(THREAD, &id, Actor::User).unwrap().status,
        JobStatus::PendingCancel
    );
    jobs.finish(&id, JobOutcome::Succeeded("finished anyway".into()));
    assert_eq!(
        jobs.inspect(THREAD, &id).unwrap().status,
        JobStatus::Completed
    );
}

#[tokio::test]
async fn e6_cancel_complete_race() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    jobs.finish(&id, JobOutcome::Succeeded("done".into()));
    let after = jobs.cancel(THREAD, &id, Actor::User).unwrap();
    assert_eq!(after.status, JobStatus::Completed);
    assert_eq!(after.cancel_requested_by, None);
}

#[tokio::test]
async fn e7_idle_completion_wake_up() {
    let jobs = registry();
    let client = Arc::new(ScriptedClient::new(vec![
        tool_calls(&[("c1", "slow", json!({"ms": 400}))]),
        text("I'll wait for it."),
        text("Now I know the result."),
    ]));
    let session = job_session(&jobs, client.clone(), 20);
    session.submit("start the job").await.unwrap();
    assert_eq!(session.state(), SessionState::Idle);
    assert_eq!(
        client.requests().len(),
        2,
        "idle, with the job still running"
    );
    wait_for_requests(&client, 3).await;
    eventually(|| session.last_assistant_text().as_deref() == Some("Now I know the result.")).await;
    assert_eq!(job_messages(&session).len(), 1);
    assert_eq!(session.state(), SessionState::Idle);
}

#[tokio::test]
async fn e8_cross_thread_list_cancel_isolation() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    assert!(jobs.list(OTHER, None).is_empty());
    assert!(
        jobs.list(OTHER, Some(&[JobStatus::Running, JobStatus::Completed]))
            .is_empty()
    );
    assert_eq!(
        jobs.cancel(OTHER, &id, Actor::User).unwrap_err(),
        JobError::NotFoundInThread(id.clone())
    );
    assert_eq!(
        jobs.inspect(THREAD, &id).unwrap().status,
        JobStatus::Running,
        "cancel denied"
    );
}

#[tokio::test]
async fn e9_inspect_outside_thread() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    let err = jobs.inspect(OTHER, &id).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("job not found in this thread: {id}")
    );
    assert_eq!(
        jobs.inspect(THREAD, "no-such-job").unwrap_err(),
        JobError::NotFoundInThread("no-such-job".into())
    );
}

#[tokio::test]
async fn e10_payload_exactly_over_limit_formatting() {
    let policy = TruncationPolicy::with_overrides(
        &toml::from_str("shell = { chars = 100, mode = \"head_tail\", lines = 5 }").unwrap(),
    );
    let jobs = JobRegistry::new(policy);
    let at = start(&jobs, THREAD, "at");
    jobs.finish(&at, JobOutcome::Succeeded("x".repeat(100)));
    let over = start(&jobs, THREAD, "over");
    jobs.finish(&over, JobOutcome::Succeeded("x".repeat(101)));
    let messages = jobs.drain_messages(THREAD);
    assert_eq!(
        messages[0],
        format!("[job {at} shell completed]\n{}", "x".repeat(100)),
        "inline branch"
    );
    assert!(
        messages[1].starts_with(&format!(
            "[job {over} shell completed]\nThe output (101 bytes, 1 lines) is too large"
        )),
        "{}",
        messages[1]
    );
    assert!(matches!(
        jobs.inspect(THREAD, &over).unwrap().payload,
        Some(Payload::File { .. })
    ));
}

#[tokio::test]
async fn e11_manual_retry_request() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    jobs.finish(&id, JobOutcome::Failed("x".into()));
    assert_eq!(
        jobs.retry(THREAD, &id).unwrap_err().to_string(),
        "manual retry not supported"
    );
    let mut agent_tools = ToolRegistry::new();
    sandcrab::jobs::register_tools(&mut agent_tools, &jobs);
    let out = sandcrab::tools::dispatch(
        &agent_tools,
        &request("x", "retry_job", json!({"job_id": id})),
        &ctx(THREAD, "x"),
    )
    .await;
    assert!(
        out.is_error() && out.content == "manual retry not supported",
        "{}",
        out.content
    );
}

#[tokio::test]
async fn e12_process_restart() {
    let before = registry();
    let id = start(&before, THREAD, "c1");
    drop(before);
    let after = registry();
    assert!(after.is_empty(), "the registry starts empty");
    assert!(
        after.inspect(THREAD, &id).is_err(),
        "prior jobs are not recovered"
    );
    assert!(after.list(THREAD, None).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e13_retryable_llm_error_injects_nothing() {
    let jobs = registry();
    let id = start(&jobs, THREAD, "c1");
    let mut e = sandcrab::llm::LlmError::new(sandcrab::llm::ErrorKind::Server, "p", "503 upstream");
    e.status = Some(503);
    jobs.note_internal_error(&id, &e);
    let record = jobs.inspect(THREAD, &id).unwrap();
    assert_eq!(
        record.status,
        JobStatus::Running,
        "external status unchanged"
    );
    assert_eq!(record.internal_errors.len(), 1);
    assert!(
        jobs.drain_messages(THREAD).is_empty(),
        "no injection queued"
    );

    // For real: a job whose work calls a provider that fails once with a
    // retryable 503; the client retries internally and the job completes.
    let server = MockLlm::start().await;
    server.push(Reply::json(
        503,
        json!({"error": {"message": "overloaded"}}),
    ));
    server.push(complete(
        ProviderKind::OpenAiCompatible,
        &Answer::Text(vec!["model says hi"]),
    ));
    let mut config = ProviderConfig::new(ProviderKind::OpenAiCompatible);
    config.base_url = server.base_url();
    config.retry = RetryPolicy {
        base_delay: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    };
    let client = Arc::new(HttpClient::new(config).unwrap());
    let mut registry_tools = ToolRegistry::new();
    registry_tools.register(
        ToolSpec {
            name: "ask_model".into(),
            description: "asks".into(),
            parameters: json!({"type": "object"}),
            traits: Default::default(),
        },
        Arc::new(FnTool(move |_, _| {
            let client = client.clone();
            async move {
                let r = client
                    .complete(&Request {
                        model: "m".into(),
                        messages: vec![sandcrab::llm::Message::user("hi")],
                        ..Request::default()
                    })
                    .await;
                r.map(|r| r.text).map_err(|e| e.to_string())
            }
        })),
    );
    let mode = run_call(
        &jobs,
        registry_tools,
        request("c2", "ask_model", json!({})),
        ctx(THREAD, "c2"),
        settings(0),
    )
    .await
    .unwrap();
    let CallMode::Background(record) = mode else {
        panic!()
    };
    let done = terminal(&jobs, THREAD, &record.job_id).await;
    assert_eq!(done.status, JobStatus::Completed);
    assert_eq!(
        server.requests().len(),
        2,
        "the 503 was retried inside the job"
    );
    assert_eq!(
        done.internal_errors.len(),
        1,
        "the retried error is on the job's record, internal: {:?}",
        done.internal_errors
    );
    assert!(
        done.internal_errors[0].contains("503"),
        "{:?}",
        done.internal_errors
    );
    let messages = jobs.drain_messages(THREAD);
    assert_eq!(messages.len(), 1);
    // The job id is a random UUID, which may itself contain "503".
    let message = messages[0].replace(&record.job_id, "<job>");
    assert!(
        message.contains("completed")
            && message.contains("model says hi")
            && !message.contains("503")
            && !message.contains("overloaded"),
        "{message}"
    );
}

// ---- Boundary ----

#[tokio::test]
async fn b1_sync_async_boundary() {
    let jobs = registry();
    let mut inline = 0;
    let mut backgrounded = Vec::new();
    for i in 0..40 {
        let call = format!("c{i}");
        // The tool takes as long as the threshold: either branch may win,
        // but only one may.
        match run_call(
            &jobs,
            tools(),
            request(&call, "slow", json!({"ms": 30})),
            ctx(THREAD, &call),
            settings(30),
        )
        .await
        .unwrap()
        {
            CallMode::Inline(outcome) => {
                assert_eq!(outcome.content, "slept 30");
                inline += 1;
            }
            CallMode::Background(record) => backgrounded.push(record.job_id),
        }
    }
    assert_eq!(inline + backgrounded.len(), 40);
    assert_eq!(
        jobs.len(),
        backgrounded.len(),
        "a job record exists only for background answers"
    );
    for id in &backgrounded {
        assert_eq!(
            terminal(&jobs, THREAD, id).await.status,
            JobStatus::Completed
        );
    }
    assert_eq!(
        jobs.drain_messages(THREAD).len(),
        backgrounded.len(),
        "one message per background job, none for inline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn b2_global_uniqueness_at_scale() {
    let jobs = registry();
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let jobs = jobs.clone();
            tokio::spawn(async move {
                (0..2000)
                    .map(|i| {
                        jobs.start(&format!("thread-{t}"), &format!("call-{i}"), "shell")
                            .unwrap()
                            .record
                            .job_id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(ids.insert(id), "duplicate job id");
        }
    }
    assert_eq!(ids.len(), 32_000);
    assert_eq!(jobs.len(), 32_000);
}

#[tokio::test]
async fn b3_same_timestamp_ordering_tie() {
    let run = || {
        let jobs = registry();
        // As many as retention keeps, so every record can be inspected.
        let ids: Vec<String> = (0..20)
            .map(|i| start(&jobs, THREAD, &format!("c{i}")))
            .collect();
        // Finish in a scrambled but fixed order, faster than the clock ticks.
        let order: Vec<usize> = (0..20).map(|i| (i * 7) % 20).collect();
        for &i in &order {
            jobs.finish(&ids[i], JobOutcome::Succeeded(format!("job {i}")));
        }
        let stamps: HashSet<String> = ids
            .iter()
            .map(|id| jobs.inspect(THREAD, id).unwrap().completed_at.unwrap())
            .collect();
        let seqs: Vec<u64> = order
            .iter()
            .map(|&i| {
                jobs.inspect(THREAD, &ids[i])
                    .unwrap()
                    .completion_seq
                    .unwrap()
            })
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "sequence follows completion"
        );
        let injected: Vec<String> = jobs
            .drain_messages(THREAD)
            .iter()
            .map(|m| m.lines().nth(1).unwrap().to_string())
            .collect();
        let expected: Vec<String> = order.iter().map(|i| format!("job {i}")).collect();
        assert_eq!(injected, expected);
        (stamps.len(), injected)
    };
    let (distinct_stamps, first) = run();
    assert!(
        distinct_stamps < 20,
        "several completions share a timestamp"
    );
    assert_eq!(run().1, first, "the tie-break is deterministic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn b4_at_most_once_under_concurrent_emitters() {
    let jobs = registry();
    for i in 0..200 {
        let id = start(&jobs, THREAD, &format!("c{i}"));
        jobs.finish(&id, JobOutcome::Succeeded(format!("r{i}")));
    }
    let emitters: Vec<_> = (0..16)
        .map(|_| {
            let jobs = jobs.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..50 {
                    got.extend(jobs.drain_messages(THREAD));
                    tokio::task::yield_now().await;
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for e in emitters {
        all.extend(e.await.unwrap());
    }
    assert_eq!(all.len(), 200, "every message exactly once");
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 200);
}

#[tokio::test]
async fn b5_payload_size_boundaries() {
    let limits = TruncationLimits {
        chars: 1000,
        mode: sandcrab::tools::TruncateMode::Tail,
        lines: Some(10),
    };
    let policy = TruncationPolicy::with_overrides(
        &toml::from_str("grep = { chars = 1000, mode = \"tail\", lines = 10 }").unwrap(),
    );
    assert_eq!(policy.limits("grep", None), limits);
    let jobs = JobRegistry::new(policy);
    let cases = [
        ("a".repeat(1000), true),
        ("a".repeat(1001), false),
        (["l"; 10].join("\n"), true),
        (["l"; 11].join("\n"), false),
    ];
    for (i, (payload, inline)) in cases.iter().enumerate() {
        let id = jobs
            .start(THREAD, &format!("c{i}"), "grep")
            .unwrap()
            .record
            .job_id;
        jobs.finish(&id, JobOutcome::Succeeded(payload.clone()));
        let record = jobs.inspect(THREAD, &id).unwrap();
        match (&record.payload, inline) {
            (Some(Payload::Inline { text }), true) => assert_eq!(text, payload),
            (Some(Payload::File { path, .. }), false) => {
                assert_eq!(&std::fs::read_to_string(path).unwrap(), payload)
            }
            (other, _) => panic!("case {i}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn b6_retention_at_limit() {
    let jobs = registry();
    let ids: Vec<String> = (0..TERMINAL_RETENTION)
        .map(|i| start(&jobs, THREAD, &format!("c{i}")))
        .collect();
    for id in &ids {
        jobs.finish(id, JobOutcome::Succeeded("x".into()));
    }
    assert_eq!(TERMINAL_RETENTION, 20);
    for id in &ids {
        assert!(
            jobs.inspect(THREAD, id).is_ok(),
            "no eviction at exactly 20"
        );
    }
}

#[tokio::test]
async fn b7_retention_overflow() {
    let jobs = registry();
    let ids: Vec<String> = (0..23)
        .map(|i| start(&jobs, THREAD, &format!("c{i}")))
        .collect();
    // Complete in reverse start order: completion time decides eviction.
    for id in ids.iter().rev() {
        jobs.finish(id, JobOutcome::Succeeded("x".into()));
    }
    let kept: Vec<&String> = ids
        .iter()
        .filter(|id| jobs.inspect(THREAD, id).is_ok())
        .collect();
    assert_eq!(kept.len(), 20);
    for evicted in &ids[20..] {
        assert!(
            jobs.inspect(THREAD, evicted).is_err(),
            "the oldest completions are evicted"
        );
    }
    // Another thread's jobs are not counted against this one.
    let other = start(&jobs, OTHER, "c0");
    jobs.finish(&other, JobOutcome::Succeeded("x".into()));
    assert!(jobs.inspect(OTHER, &other).is_ok());
}

#[tokio::test]
async fn b8_mixed_retention_keeps_non_terminal() {
    let jobs = registry();
    let running: Vec<String> = (0..3)
        .map(|i| start(&jobs, THREAD, &format!("r{i}")))
        .collect();
    let pending = start(&jobs, THREAD, "p");
    jobs.cancel(THREAD, &pending, Actor::User).unwrap();
    let done: Vec<String> = (0..25)
        .map(|i| start(&jobs, THREAD, &format!("d{i}")))
        .collect();
    for id in &done {
        jobs.finish(id, JobOutcome::Succeeded("x".into()));
    }
    for id in running.iter().chain([&pending]) {
        assert!(
            !jobs.inspect(THREAD, id).unwrap().status.is_terminal(),
            "non-terminal jobs are kept"
        );
    }
    let kept_terminal = done
        .iter()
        .filter(|id| jobs.inspect(THREAD, id).is_ok())
        .count();
    assert_eq!(kept_terminal, 20);
    assert!(
        done[..5].iter().all(|id| jobs.inspect(THREAD, id).is_err()),
        "only the oldest terminal jobs go"
    );
}
