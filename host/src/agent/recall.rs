//! `memory_read`: a conversation's archived summaries found by words (FTS5
//! BM25) and, with `[embeddings]`, by meaning (cosine over stored vectors),
//! the two rankings fused by reciprocal rank. The endpoint failing or slow
//! leaves words alone, with one warning: never a failed call.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::embeddings::fuse::{Found, fuse};
use crate::embeddings::vector::{Query, to_blob};
use crate::embeddings::{EmbedError, Embedder};
use crate::store::{ArchivalBlock, Store, StoreError};

/// How long `memory_read` waits for the endpoint before answering by
/// words alone.
const QUERY_WAIT: Duration = Duration::from_secs(5);
/// Candidates each ranking contributes, per result asked for.
const CANDIDATES_PER_RESULT: usize = 4;

/// Why vectors could not be made or kept.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Search by meaning for one session: the endpoint, its query vectors
/// (cached per session), whether the operator was already warned.
pub struct Semantic {
    embedder: Embedder,
    queries: std::sync::Mutex<HashMap<String, Vec<f32>>>,
    warned: AtomicBool,
    /// Every archived batch of the session has its vector (as far as this
    /// session knows: set by a backfill, cleared by a compaction).
    complete: AtomicBool,
}

impl Semantic {
    pub fn new(embedder: Embedder) -> Arc<Self> {
        Arc::new(Semantic {
            embedder,
            queries: Default::default(),
            warned: AtomicBool::new(false),
            complete: AtomicBool::new(false),
        })
    }

    /// Something new was archived: the next search makes its vectors
    /// first.
    pub fn archived(&self) {
        self.complete.store(false, Ordering::Release);
    }

    /// Make and keep the vectors archived blocks lack (of `conversation`,
    /// or all): never embedded, or made by another model or length. How
    /// many were made.
    pub async fn backfill(
        &self,
        store: &dyn Store,
        conversation: Option<&str>,
    ) -> Result<usize, BackfillError> {
        let (model, dims) = (self.embedder.model(), self.embedder.dimensions());
        let mut made = 0;
        loop {
            let blocks = store.unembedded(conversation, model, dims, self.embedder.batch_size())?;
            if blocks.is_empty() {
                if conversation.is_some() {
                    self.complete.store(true, Ordering::Release);
                }
                return Ok(made);
            }
            let texts: Vec<String> = blocks.iter().map(|b| b.content.clone()).collect();
            let vectors = self.embedder.embed(&texts).await?;
            for (block, vector) in blocks.iter().zip(&vectors) {
                store.set_embedding(block.id, model, dims, &to_blob(vector))?;
            }
            made += blocks.len();
        }
    }

    async fn query_vector(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        if let Some(v) = self.queries.lock().ok().and_then(|q| q.get(query).cloned()) {
            return Ok(v);
        }
        let v = self
            .embedder
            .embed(&[query.to_string()])
            .await?
            .pop()
            .unwrap_or_default();
        if let Ok(mut q) = self.queries.lock() {
            if q.len() > 256 {
                q.clear();
            }
            q.insert(query.to_string(), v.clone());
        }
        Ok(v)
    }

    /// The warning to show, the first time only.
    fn warn_once(&self, why: &str) -> Option<String> {
        (!self.warned.swap(true, Ordering::Relaxed))
            .then(|| format!("memory_read searches by words only for now: {why}"))
    }
}

/// What `memory_read` found.
pub struct Recall {
    /// Best first, each with the rankings that found it.
    pub hits: Vec<(ArchivalBlock, Found)>,
    /// For the operator, once: why meaning was not searched.
    pub warning: Option<String>,
}

/// Search `conversation`'s archived summaries for `query`.
pub async fn recall(
    store: &dyn Store,
    conversation: &str,
    semantic: Option<&Semantic>,
    query: &str,
    limit: usize,
) -> Result<Recall, StoreError> {
    let candidates = limit * CANDIDATES_PER_RESULT;
    let words = store.search(Some(conversation), query, candidates)?;
    let Some(semantic) = semantic else {
        return Ok(Recall {
            hits: words
                .into_iter()
                .take(limit)
                .map(|b| {
                    (
                        b,
                        Found {
                            by_words: true,
                            by_meaning: false,
                        },
                    )
                })
                .collect(),
            warning: None,
        });
    };
    let by_meaning = async {
        if !semantic.complete.load(Ordering::Acquire) {
            semantic.backfill(store, Some(conversation)).await?;
        }
        let q = semantic.query_vector(query).await?;
        let (model, dims) = (semantic.embedder.model(), semantic.embedder.dimensions());
        let q = Query::new(q);
        let mut scored: Vec<(i64, f32)> = Vec::new();
        store.scan_embeddings(conversation, model, dims, &mut |id, blob| {
            let score = q.cosine_blob(blob);
            if score > 0.0 {
                scored.push((id, score));
            }
        })?;
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(candidates);
        Ok::<_, BackfillError>(scored.into_iter().map(|(id, _)| id).collect::<Vec<_>>())
    };
    let meaning = match tokio::time::timeout(QUERY_WAIT, by_meaning).await {
        Ok(Ok(ids)) => Ok(ids),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "the embedding endpoint did not answer within {} s",
            QUERY_WAIT.as_secs()
        )),
    };
    let (meaning, warning) = match meaning {
        Ok(ids) => (ids, None),
        Err(why) => (Vec::new(), semantic.warn_once(&why)),
    };
    let word_ids: Vec<i64> = words.iter().map(|b| b.id).collect();
    let mut known: HashMap<i64, ArchivalBlock> = words.into_iter().map(|b| (b.id, b)).collect();
    let fused = fuse(&word_ids, &meaning);
    let wanted: Vec<i64> = fused
        .iter()
        .take(limit)
        .map(|(id, _)| *id)
        .filter(|id| !known.contains_key(id))
        .collect();
    for block in store.archival_blocks(&wanted)? {
        known.insert(block.id, block);
    }
    let hits = fused
        .into_iter()
        .take(limit)
        .filter_map(|(id, found)| known.remove(&id).map(|b| (b, found)))
        .collect();
    Ok(Recall { hits, warning })
}
