//! `memory_read` by meaning: a loopback embedding server speaking the real
//! OpenAI-compatible `/v1/embeddings` and Gemini `embedContent` formats,
//! whose vectors put a paraphrase of an archived fact closer to the question
//! than a summary that merely shares its words. Words alone miss the fact;
//! words and meaning together find it. A dead, slow, wrong-sized or
//! malformed endpoint leaves words alone, with one warning, never an error.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::post;
use sandcrab::agent::recall::{Semantic, recall};
use sandcrab::embeddings::{Embedder, EmbeddingProvider, EmbeddingsConfig};
use sandcrab::store::ArchiveStore;
use sandcrab::store::{NewBlock, SqliteStore};
use serde_json::{Value, json};

const FACT: &str = "Decision: the deploy key rotates monthly; Priya owns the rotation.";
const DISTRACTOR: &str =
    "We renamed the credentials file in the changelog; change nothing else about it.";
const OTHER: &str = "The CI job runs the linter before the tests.";
const QUESTION: &str = "how often do we change credentials?";

/// How the server behaves.
#[derive(Clone, Default)]
struct Mode {
    /// Answer vectors of this length instead of 8.
    dims: Option<usize>,
    /// Answer `{"data": "nonsense"}`.
    malformed: bool,
    /// Answer 400 to a request with a text holding this (too long for the
    /// model, say).
    refuse: Option<&'static str>,
    /// Texts embedded so far.
    seen: Arc<Mutex<Vec<String>>>,
}

/// What the text is about, as a vector: the stand-in for a real model.
fn vector(text: &str, dims: usize) -> Vec<f32> {
    let t = text.to_lowercase();
    let mut v = vec![0.0f32; dims];
    if t.contains("how often") && t.contains("credentials") || t.contains("deploy key") {
        v[0] = 1.0; // rotating secrets
        v[1] = 0.1;
    } else if t.contains("changelog") {
        v[2] = 1.0; // documentation chores
    } else {
        v[dims - 1] = 1.0;
    }
    v
}

/// `POST /v1/embeddings` as the OpenAI API answers it.
async fn openai_embeddings(
    State(mode): State<Mode>,
    Json(body): Json<Value>,
) -> (axum::http::StatusCode, Json<Value>) {
    use axum::http::StatusCode;
    if mode.malformed {
        return (StatusCode::OK, Json(json!({"data": "nonsense"})));
    }
    let inputs: Vec<String> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    if let Some(bad) = mode.refuse
        && inputs.iter().any(|t| t.contains(bad))
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "input is too large to process"})),
        );
    }
    mode.seen.lock().unwrap().extend(inputs.clone());
    let dims = mode.dims.unwrap_or(8);
    (
        StatusCode::OK,
        Json(json!({
            "object": "list",
            "model": body["model"],
            "data": inputs.iter().enumerate().map(|(i, t)| json!({
                "object": "embedding", "index": i, "embedding": vector(t, dims)
            })).collect::<Vec<_>>(),
        })),
    )
}

async fn serve(mode: Mode) -> SocketAddr {
    let app =
        axum::Router::new()
            .route("/v1/embeddings", post(openai_embeddings))
            .route(
                "/v1beta/models/{call}",
                post(
                    |State(mode): State<Mode>,
                     Path(call): Path<String>,
                     Json(body): Json<Value>| async move {
                        assert!(call.ends_with(":embedContent"), "{call}");
                        let text = body["content"]["parts"][0]["text"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        mode.seen.lock().unwrap().push(text.clone());
                        Json(
                            json!({"embedding": {"values": vector(&text, mode.dims.unwrap_or(8))}}),
                        )
                    },
                ),
            )
            .with_state(mode);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn config(provider: EmbeddingProvider, addr: SocketAddr, model: &str) -> EmbeddingsConfig {
    EmbeddingsConfig {
        provider,
        base_url: format!("http://{addr}"),
        model: model.into(),
        dimensions: 8,
        api_key_env: None,
        batch_size: Some(2),
        timeout_ms: Some(2000),
        proxy: None,
    }
}

fn store_with_summaries() -> SqliteStore {
    let store = SqliteStore::in_memory().unwrap();
    for (i, text) in [OTHER, DISTRACTOR, FACT].iter().enumerate() {
        store
            .add_block(
                "conv",
                &NewBlock {
                    label: format!("summary:conv:{i}"),
                    content: text.to_string(),
                },
            )
            .unwrap();
    }
    store
}

fn semantic(config: EmbeddingsConfig) -> Arc<Semantic> {
    Semantic::new(Embedder::new(config, |_| None).unwrap())
}

#[tokio::test]
async fn a_paraphrase_is_found_by_meaning_and_missed_by_words_alone() {
    let addr = serve(Mode::default()).await;
    let store = store_with_summaries();

    let words = recall(&store, "conv", None, QUESTION, 3).await.unwrap();
    assert!(
        !words.hits.iter().any(|(b, _)| b.content == FACT),
        "words alone must miss the fact (it shares no word with the question)"
    );
    assert!(words.hits.iter().any(|(b, _)| b.content == DISTRACTOR));

    for provider in [
        EmbeddingProvider::OpenaiCompatible,
        EmbeddingProvider::Gemini,
    ] {
        let semantic = semantic(config(provider, addr, "test-embed"));
        let found = recall(&store, "conv", Some(&semantic), QUESTION, 3)
            .await
            .unwrap();
        assert!(found.warning.is_none(), "{:?}", found.warning);
        // Each ranking's first place scores the same under reciprocal rank
        // fusion: the fact and the word match lead together.
        let fact = found.hits[..2]
            .iter()
            .find(|(b, _)| b.content == FACT)
            .unwrap_or_else(|| panic!("{provider:?}: the fact leads by meaning"));
        assert_eq!(fact.1.describe(), "meaning");
        let distractor = found
            .hits
            .iter()
            .find(|(b, _)| b.content == DISTRACTOR)
            .expect("the word match is still there");
        assert!(distractor.1.by_words);
    }
}

#[tokio::test]
async fn a_dead_wrong_sized_or_malformed_endpoint_leaves_words_with_one_warning() {
    let store = store_with_summaries();
    // Dead: a port nothing listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let wrong = serve(Mode {
        dims: Some(4),
        ..Mode::default()
    })
    .await;
    let malformed = serve(Mode {
        malformed: true,
        ..Mode::default()
    })
    .await;
    for (addr, why) in [
        (dead, "could not be reached"),
        (
            wrong,
            "vectors of 4 dimensions, but [embeddings] dimensions = 8",
        ),
        (malformed, "not embeddings"),
    ] {
        let semantic = semantic(config(EmbeddingProvider::OpenaiCompatible, addr, "m"));
        let found = recall(&store, "conv", Some(&semantic), "changelog", 3)
            .await
            .expect("never a failed call");
        let warning = found.warning.expect("one warning");
        assert!(warning.contains(why), "{warning}");
        assert_eq!(found.hits[0].0.content, DISTRACTOR, "words still answer");
        let again = recall(&store, "conv", Some(&semantic), "changelog", 3)
            .await
            .unwrap();
        assert!(again.warning.is_none(), "warned once, not on every call");
    }
}

#[tokio::test]
async fn vectors_of_another_model_are_not_compared_and_are_made_again() {
    let mode = Mode::default();
    let addr = serve(mode.clone()).await;
    let store = store_with_summaries();
    let old = semantic(config(
        EmbeddingProvider::OpenaiCompatible,
        addr,
        "old-model",
    ));
    assert_eq!(old.backfill(&store, None).await.unwrap().made, 3);
    assert_eq!(
        old.backfill(&store, None).await.unwrap().made,
        0,
        "nothing left to do"
    );
    assert_eq!(store.embeddings("conv", "new-model", 8).unwrap().len(), 0);

    let new = semantic(config(
        EmbeddingProvider::OpenaiCompatible,
        addr,
        "new-model",
    ));
    assert_eq!(new.backfill(&store, Some("conv")).await.unwrap().made, 3);
    assert_eq!(store.embeddings("conv", "new-model", 8).unwrap().len(), 3);
    assert_eq!(store.embeddings("conv", "old-model", 8).unwrap().len(), 0);
    assert_eq!(mode.seen.lock().unwrap().len(), 6);
}

/// A long chat through the binary compacts the fact away; the model then
/// asks `memory_read` a question phrased unlike the fact. The answer the
/// model got, and what `sessions reindex` said afterwards.
async fn chat_asking_by_paraphrase(embeddings: Option<SocketAddr>) -> (String, String) {
    use crate::cli_support::{sandcrab, tool_result};
    use crate::llm_transcripts::{Answer, complete, stream, tool};
    use crate::mock_llm::MockLlm;
    use crate::support::{Scene, sandcrab_cmd};
    use sandcrab::llm::ProviderKind;
    use std::io::Write;

    const KIND: ProviderKind = ProviderKind::OpenAiCompatible;
    const SUMMARY_PROMPT: &str = "New messages to fold into the summary";
    let scene = Scene::new();
    let mut config = "[providers.openai-compatible]\ncontext_window = 4000\n\
         [summarization]\nkeep_recent = 2\nchunk_size = 4\n"
        .to_string();
    if let Some(addr) = embeddings {
        config.push_str(&format!(
            "[embeddings]\nprovider = \"openai-compatible\"\nbase_url = \"http://{addr}\"\nmodel = \"test-embed\"\ndimensions = 8\n"
        ));
    }
    scene.write_user_config(&config);
    let server = MockLlm::strict(KIND).await;
    for _ in 0..10 {
        server.push_for(
            SUMMARY_PROMPT,
            complete(
                KIND,
                &Answer::Text(vec!["Decision: the deploy key rotates monthly."]),
            ),
        );
    }
    for i in 0..6 {
        server.push_for(
            &format!("Step {i}:"),
            stream(KIND, &Answer::Text(vec!["Noted."])),
        );
    }
    server.push_for(
        QUESTION,
        stream(
            KIND,
            &Answer::Tools(vec![tool("m1", "memory_read", json!({"query": QUESTION}))]),
        ),
    );
    server.push_for(QUESTION, stream(KIND, &Answer::Text(vec!["Monthly."])));
    let mut child = sandcrab(&scene, KIND, &server, "chat")
        .args(["--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..6 {
        let fact = if i == 0 {
            "the deploy key rotates monthly."
        } else {
            "a detail."
        };
        writeln!(
            stdin,
            "Step {i}: {fact} {}",
            "Some detail about the task. ".repeat(55)
        )
        .unwrap();
    }
    writeln!(stdin, "{QUESTION}\n/exit").unwrap();
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    let last = requests.last().unwrap();
    let answer = tool_result(KIND, last, "m1", "memory_read");
    let reindex = sandcrab_cmd(&scene)
        .args(["sessions", "reindex"])
        .output()
        .unwrap();
    let mut said = String::from_utf8_lossy(&reindex.stdout).to_string()
        + &String::from_utf8_lossy(&reindex.stderr);
    // The session replays offline: memory_read's answer is played back,
    // not searched again (a replay calls no endpoint).
    let listed = sandcrab_cmd(&scene)
        .args(["sessions", "list", "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let replay = sandcrab_cmd(&scene)
        .args(["replay", &id, "-w"])
        .arg(scene.workspace())
        .output()
        .unwrap();
    said.push_str(&format!(
        "\nreplay: {} {}{}",
        replay.status.success(),
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    ));
    (answer, said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_binary_a_compacted_fact_comes_back_for_a_paraphrased_question() {
    let (words_only, said) = chat_asking_by_paraphrase(None).await;
    assert!(
        words_only.contains("No archived summary matches"),
        "{words_only}"
    );
    assert!(said.contains("no [embeddings]"), "{said}");

    let mode = Mode::default();
    let addr = serve(mode.clone()).await;
    let (answer, said) = chat_asking_by_paraphrase(Some(addr)).await;
    assert!(said.contains("replay: true"), "{said}");
    assert!(answer.contains("deploy key rotates monthly"), "{answer}");
    assert!(answer.contains("found by meaning"), "{answer}");
    assert!(
        said.starts_with("0 archived summaries embedded"),
        "all were embedded already: {said}"
    );
}

#[test]
fn an_embeddings_block_that_would_leak_the_key_or_cannot_work_is_refused() {
    let base = |url: &str, key: Option<&str>| EmbeddingsConfig {
        provider: EmbeddingProvider::OpenaiCompatible,
        base_url: url.into(),
        model: "m".into(),
        dimensions: 8,
        api_key_env: key.map(str::to_string),
        batch_size: None,
        timeout_ms: None,
        proxy: None,
    };
    let env = |v: &str| (v == "EMBED_KEY").then(|| "sk-embed".to_string());
    let err = Embedder::new(base("http://embed.example.com", Some("EMBED_KEY")), env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("refusing to send the API key over plain http"),
        "{err}"
    );
    assert!(Embedder::new(base("http://127.0.0.1:8080", Some("EMBED_KEY")), env).is_ok());
    assert!(Embedder::new(base("https://api.openai.com", Some("EMBED_KEY")), env).is_ok());
    let err = Embedder::new(base("https://api.openai.com", Some("MISSING")), env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("MISSING"), "{err}");
    let mut zero = base("http://127.0.0.1:8080", None);
    zero.dimensions = 0;
    assert!(
        Embedder::new(zero, env)
            .unwrap_err()
            .to_string()
            .contains("dimensions")
    );
}

/// A summary the endpoint refuses (too long for the model) is skipped: the
/// others get their vectors, the search by meaning still runs over them,
/// and the operator hears which one is missing, once.
#[tokio::test]
async fn a_summary_the_endpoint_refuses_does_not_stop_the_others() {
    let store = store_with_summaries();
    store
        .add_block(
            "conv",
            &NewBlock {
                label: "summary:conv:huge".into(),
                content: "TOO LONG for this model".into(),
            },
        )
        .unwrap();
    let addr = serve(Mode {
        refuse: Some("TOO LONG"),
        ..Mode::default()
    })
    .await;
    let semantic = semantic(config(EmbeddingProvider::OpenaiCompatible, addr, "m"));
    let found = recall(&store, "conv", Some(&semantic), QUESTION, 3)
        .await
        .unwrap();
    assert!(
        found
            .hits
            .iter()
            .any(|(b, by)| b.content == FACT && by.by_meaning),
        "meaning still searched"
    );
    let warning = found.warning.expect("told once");
    assert!(
        warning.contains("no vector yet") && warning.contains("too large"),
        "{warning}"
    );
    assert_eq!(store.embeddings("conv", "m", 8).unwrap().len(), 3);
    let again = semantic.backfill(&store, None).await.unwrap();
    assert_eq!((again.made, again.skipped), (0, 1));
}

/// A question with no words is answered without asking the endpoint.
#[tokio::test]
async fn an_empty_question_does_not_reach_the_endpoint() {
    let mode = Mode::default();
    let addr = serve(mode.clone()).await;
    let store = store_with_summaries();
    let semantic = semantic(config(EmbeddingProvider::OpenaiCompatible, addr, "m"));
    let found = recall(&store, "conv", Some(&semantic), " ?! ", 3)
        .await
        .unwrap();
    assert!(found.hits.is_empty() && found.warning.is_none());
    assert!(mode.seen.lock().unwrap().is_empty());
}
