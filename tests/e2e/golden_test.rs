//! Golden sessions: one recorded session per wire format in
//! `tests/golden/`, made against the loopback providers through the real
//! adapters — a tool round, a call that became a background job and the
//! turn its completion woke, an answer interrupted while it streamed, a
//! compaction the operator asked for — replayed through the binary on
//! every test run. A change to how the host builds requests shows up as a
//! replay difference here. Re-recording them is deliberate:
//! `scripts/record-golden`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sandcrab::agent::recorder::{RecordingSettings, recorded_compactor};
use sandcrab::agent::{
    Profile, Session, SessionConfig, SessionInfo, SessionJobs, SessionMemory, SessionParts,
};
use sandcrab::compaction::{Entry, SummarizationConfig, Summarizer};
use sandcrab::jobs::{BackgroundSettings, JobRegistry};
use sandcrab::llm::{ProviderConfig, ProviderKind, client_for};
use sandcrab::plugin::ToolTraits;
use sandcrab::plugin::{ProfileInfo, ToolSpec};
use sandcrab::store::SqliteStore;
use sandcrab::store::export::SessionExport;
use sandcrab::tools::{FnTool, ToolRegistry, TruncationPolicy};
use serde_json::{Value, json};

use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::support::{Scene, sandcrab_cmd};

fn golden(kind: ProviderKind) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden")
        .join(format!("{}.jsonl", kind.id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_sessions_of_every_wire_format_replay_the_same() {
    for kind in ProviderKind::ALL {
        let path = golden(kind);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (make it with scripts/record-golden)",
                path.display()
            )
        });
        for kind_of_entry in [
            "\\\"jobs\\\"",
            "\\\"interrupted\\\":true",
            "\\\"compact\\\"",
            "\\\"tool\\\"",
        ] {
            assert!(
                text.contains(kind_of_entry),
                "{kind:?}: no {kind_of_entry} in the golden session"
            );
        }
        let id = text
            .lines()
            .next()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v["id"].as_str().map(str::to_string))
            .expect("a session record first");
        let scene = Scene::new();
        let run = |args: &[&str]| {
            let out = sandcrab_cmd(&scene)
                .args(args)
                .arg("-w")
                .arg(scene.workspace())
                .output()
                .unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), said)
        };
        let (ok, said) = run(&["sessions", "import", path.to_str().unwrap()]);
        assert!(ok, "{kind:?}: {said}");
        assert!(said.contains(&id), "{kind:?}: the origin is named: {said}");
        let id = crate::cli_support::imported_id(&said);
        let (ok, said) = run(&["replay", &id]);
        assert!(
            ok && said.contains("every request the host built is the recorded one"),
            "{kind:?}: {said}"
        );
    }
}

/// Summarizes deterministically (its answers are recorded anyway).
struct Brief;

#[async_trait::async_trait]
impl Summarizer for Brief {
    async fn summarize(&self, existing: &str, messages: &[Entry]) -> Result<String, String> {
        let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
        Ok(format!("{existing} then: {}", texts.join(" / ")))
    }
}

fn golden_tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    r.register(
        ToolSpec::new("echo", "Echo text", schema.clone()),
        Arc::new(FnTool(|args: Value, _| async move {
            Ok(format!("echo: {}", args["text"].as_str().unwrap_or("")))
        })),
    );
    r.register(
        ToolSpec {
            traits: ToolTraits {
                background: true,
                ..ToolTraits::default()
            },
            ..ToolSpec::new("slow", "Takes a while", schema)
        },
        Arc::new(FnTool(|_, _| async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok("slow work finished".to_string())
        })),
    );
    r
}

/// Make the golden sessions again (`scripts/record-golden`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records tests/golden: run it deliberately with scripts/record-golden"]
async fn record_golden_sessions() {
    for kind in ProviderKind::ALL {
        let server = MockLlm::strict(kind).await;
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool("c1", "echo", json!({"text": "one"}))]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["echoed ", "one"])));
        server.push(stream(
            kind,
            &Answer::Tools(vec![tool("c2", "slow", json!({"text": "two"}))]),
        ));
        server.push(stream(
            kind,
            &Answer::Text(vec!["it runs in the background"]),
        ));
        server.push(stream(kind, &Answer::Text(vec!["the slow work finished"])));
        let slow: Vec<&str> = vec![
            "this ", "answer ", "is ", "cut ", "short ", "by ", "the ", "operator",
        ];
        server.push(
            stream(kind, &Answer::Text(slow))
                .bytewise()
                .delayed(Duration::from_millis(3)),
        );
        server.push(stream(kind, &Answer::Text(vec!["after the compaction"])));

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("golden.db")).unwrap());
        let (recorder, compactor) = recorded_compactor(
            RecordingSettings::default(),
            0,
            Arc::new(Brief),
            store.clone(),
            SummarizationConfig {
                chunk_size: 2,
                keep_recent: 2,
                ..SummarizationConfig::default()
            },
        );
        let memory = SessionMemory::create(
            store.clone(),
            compactor,
            &SessionInfo {
                workspace: "/golden".into(),
                provider: kind.id().into(),
                profile: "golden".into(),
                model: "test-model".into(),
            },
        )
        .unwrap();
        memory.record_with(recorder.unwrap());
        let config = ProviderConfig::from_env(kind, Some(&server.base_url()), |var| {
            kind.key_vars()
                .contains(&var)
                .then(|| "sk-test-secret-4242".to_string())
        });
        let session = Session::new(SessionParts {
            jobs: Some(SessionJobs {
                registry: JobRegistry::new(TruncationPolicy::default()),
                settings: BackgroundSettings {
                    after: Duration::from_millis(100),
                    max_duration: Duration::from_secs(30),
                },
            }),
            memory: Some(memory),
            host_tools: vec![Arc::new(
                sandcrab::agent::session_memory::tools::MemoryTools,
            )],
            world: Some(sandcrab::agent::world::World {
                working_dir: "/golden".into(),
                platform: "linux".into(),
                os_version: "golden".into(),
                today: "2026-11-24".into(),
                ..Default::default()
            }),
            ..SessionParts::new(
                client_for(config),
                Arc::new(Profile {
                    info: ProfileInfo {
                        id: "golden".into(),
                        default_model: "test-model".into(),
                        context_window: 200_000,
                        parallel_tool_calls: true,
                        tool_names: vec![],
                        project_doc_files: vec![],
                        max_output_tokens: 0,
                    },
                    base_instructions: "You are the golden test agent.".into(),
                }),
                golden_tools().into(),
                SessionConfig::new("test-model"),
                PathBuf::from("/golden"),
            )
        });
        session.submit("echo one").await.unwrap();
        session.submit("run the slow one").await.unwrap();
        assert!(
            session.settle(Duration::from_secs(10)).await.unwrap(),
            "{kind:?}: the job settles"
        );
        // Interrupted once the answer has begun to stream.
        let mut events = session.subscribe();
        let cut = tokio::spawn({
            let session = session.clone();
            async move { session.submit("say something long").await }
        });
        while let Some(event) = futures::StreamExt::next(&mut events).await {
            if event.kind() == sandcrab::agent::EventKind::AssistantTextDelta {
                break;
            }
        }
        session.interrupt();
        cut.await.unwrap().unwrap();
        session.compact_on_request().await;
        session.submit("go on").await.unwrap();
        session.abort().await;
        assert!(
            server.rejections().is_empty(),
            "{kind:?}: {:?}",
            server.rejections()
        );
        assert_eq!(
            server.pending(),
            0,
            "{kind:?}: every scripted answer was asked for"
        );
        let export = SessionExport::of(store.as_ref(), session.id()).unwrap();
        std::fs::write(golden(kind), export.to_jsonl()).unwrap();
    }
}
