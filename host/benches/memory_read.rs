//! `memory_read` over a large archive: 10,000 summary batches of one
//! conversation, each with a 384-dimension vector, searched by words alone
//! (FTS5 BM25) and by words and meaning (the cached query vector against
//! every stored vector, fused by reciprocal rank); and how fast archived
//! batches are embedded against a loopback embedding server.
//!
//! Run: `cargo bench -p sandcrab --bench memory_read`.

use std::net::SocketAddr;

use criterion::{Criterion, criterion_group, criterion_main};
use sandcrab::agent::recall::{Semantic, recall};
use sandcrab::embeddings::vector::to_blob;
use sandcrab::embeddings::{Embedder, EmbeddingProvider, EmbeddingsConfig};
use sandcrab::store::ArchiveStore;
use sandcrab::store::{NewBlock, SqliteStore};
use serde_json::{Value, json};

const DIMS: usize = 384;
const BATCHES: usize = 10_000;

/// A vector that depends only on `seed` (a cheap, fixed stand-in).
fn pseudo_vector(seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..DIMS)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

async fn embedding_server() -> SocketAddr {
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(|axum::Json(body): axum::Json<Value>| async move {
            let n = body["input"].as_array().map_or(0, Vec::len);
            axum::Json(json!({"data": (0..n).map(|i| json!({
                "index": i, "embedding": pseudo_vector(i as u64)
            })).collect::<Vec<_>>()}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn config(addr: SocketAddr, model: &str) -> EmbeddingsConfig {
    EmbeddingsConfig {
        provider: EmbeddingProvider::OpenaiCompatible,
        base_url: format!("http://{addr}"),
        model: model.into(),
        dimensions: DIMS,
        api_key_env: None,
        batch_size: Some(64),
        timeout_ms: Some(10_000),
        proxy: None,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(embedding_server());
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bench.db")).unwrap();
    let words = [
        "deploy", "key", "release", "branch", "tests", "linter", "owner", "staging", "logs",
        "cache",
    ];
    for i in 0..BATCHES {
        let content = format!(
            "Batch {i}: decided about the {} and the {}; {} more details follow about step {i}.",
            words[i % words.len()],
            words[(i / 7) % words.len()],
            words[(i / 3) % words.len()]
        );
        let id = store
            .add_block(
                "conv",
                &NewBlock {
                    label: format!("batch-{i}"),
                    content,
                },
            )
            .unwrap();
        store
            .set_embedding(id, "bench-model", DIMS, &to_blob(&pseudo_vector(i as u64)))
            .unwrap();
    }
    let semantic = Semantic::new(Embedder::new(config(addr, "bench-model"), |_| None).unwrap());
    let query = "how often does the deploy key change";
    // Cache the query's vector, as a session does after its first search.
    rt.block_on(recall(&store, "conv", Some(&semantic), query, 5))
        .unwrap();

    let mut group = c.benchmark_group("memory_read");
    group.sample_size(20);
    group.bench_function("words_only_10k", |b| {
        b.to_async(&rt)
            .iter(|| async { recall(&store, "conv", None, query, 5).await.unwrap() })
    });
    group.bench_function("hybrid_10k_384d", |b| {
        b.to_async(&rt).iter(|| async {
            let found = recall(&store, "conv", Some(&semantic), query, 5)
                .await
                .unwrap();
            assert!(found.warning.is_none());
        })
    });
    group.finish();

    // Backfill: 1,000 batches re-embedded for a new model.
    let small = SqliteStore::open(&dir.path().join("backfill.db")).unwrap();
    for i in 0..1000 {
        small
            .add_block(
                "conv",
                &NewBlock {
                    label: format!("b{i}"),
                    content: format!("summary {i}"),
                },
            )
            .unwrap();
    }
    let mut round = 0;
    let mut group = c.benchmark_group("memory_backfill");
    group.sample_size(10);
    group.bench_function("embed_1000_batches", |b| {
        b.to_async(&rt).iter(|| {
            round += 1;
            let semantic = Semantic::new(
                Embedder::new(config(addr, &format!("model-{round}")), |_| None).unwrap(),
            );
            let small = &small;
            async move {
                assert_eq!(semantic.backfill(small, None).await.unwrap().made, 1000);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
