//! `memory_read`: a conversation's archived summaries found by words (FTS5
//! BM25) and, with `[embeddings]`, by meaning (cosine over stored vectors),
//! the two rankings fused by reciprocal rank. The endpoint failing or slow
//! leaves words alone, with one warning: never a failed call.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::embeddings::fuse::{Found, fuse};
use crate::embeddings::vector::{Query, to_blob};
use crate::embeddings::{EmbedError, Embedder};
use crate::store::{ArchivalBlock, ArchiveStore, StoreError};

/// How long `memory_read` waits for the query's vector before answering
/// by words alone.
const QUERY_WAIT: Duration = Duration::from_secs(5);
/// How long `memory_read` spends embedding batches still without vectors
/// before searching the ones that have them.
const BACKFILL_WAIT: Duration = Duration::from_secs(3);
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
/// (cached per session), whether the operator was already warned, and how
/// far its archive is embedded.
pub struct Semantic {
    embedder: Embedder,
    queries: std::sync::Mutex<HashMap<String, Vec<f32>>>,
    warned: AtomicBool,
    /// Bumped by each compaction of the session.
    archived: AtomicU64,
    /// The `archived` count the last complete backfill started at.
    embedded: AtomicU64,
}

/// What a backfill did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Backfill {
    /// Vectors made and kept.
    pub made: usize,
    /// Blocks the endpoint refused one by one (too long for it, say):
    /// skipped, tried again next time.
    pub skipped: usize,
    /// Why the first of them was refused.
    pub first_refusal: Option<String>,
}

impl Semantic {
    pub fn new(embedder: Embedder) -> Arc<Self> {
        Arc::new(Semantic {
            embedder,
            queries: Default::default(),
            warned: AtomicBool::new(false),
            archived: AtomicU64::new(1),
            embedded: AtomicU64::new(0),
        })
    }

    /// Something new was archived: the next search makes its vectors
    /// first.
    pub fn archived(&self) {
        self.archived.fetch_add(1, Ordering::AcqRel);
    }

    /// Make and keep the vectors archived blocks lack (of `conversation`,
    /// or all): never embedded, or made by another model or length. A batch
    /// the endpoint refuses is tried text by text, and a text it still
    /// refuses is skipped; an endpoint that cannot be reached ends the run.
    pub async fn backfill(
        &self,
        store: &dyn ArchiveStore,
        conversation: Option<&str>,
    ) -> Result<Backfill, BackfillError> {
        let generation = self.archived.load(Ordering::Acquire);
        let (model, dims) = (self.embedder.model(), self.embedder.dimensions());
        let mut done = Backfill::default();
        let mut after = 0;
        loop {
            let blocks =
                store.unembedded(conversation, model, dims, after, self.embedder.batch_size())?;
            let Some(last) = blocks.last() else { break };
            after = last.id;
            let texts: Vec<String> = blocks.iter().map(|b| b.content.clone()).collect();
            match self.embedder.embed(&texts).await {
                Ok(vectors) => {
                    for (block, vector) in blocks.iter().zip(&vectors) {
                        store.set_embedding(block.id, model, dims, &to_blob(vector))?;
                    }
                    done.made += blocks.len();
                }
                Err(e) if e.refused_input() => {
                    for block in &blocks {
                        match self
                            .embedder
                            .embed(std::slice::from_ref(&block.content))
                            .await
                        {
                            Ok(v) => {
                                store.set_embedding(block.id, model, dims, &to_blob(&v[0]))?;
                                done.made += 1;
                            }
                            Err(e) if e.refused_input() => {
                                done.skipped += 1;
                                done.first_refusal.get_or_insert_with(|| {
                                    format!("summary block {}: {e}", block.id)
                                });
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        if conversation.is_some() && done.skipped == 0 {
            self.embedded.store(generation, Ordering::Release);
        }
        Ok(done)
    }

    /// Whether something archived may still lack its vector.
    fn behind(&self) -> bool {
        self.embedded.load(Ordering::Acquire) != self.archived.load(Ordering::Acquire)
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
        self.warn_once_about(&format!(
            "memory_read searches by words only for now: {why}"
        ))
    }

    fn warn_once_about(&self, text: &str) -> Option<String> {
        (!self.warned.swap(true, Ordering::Relaxed)).then(|| text.to_string())
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
    store: &dyn ArchiveStore,
    conversation: &str,
    semantic: Option<&Semantic>,
    query: &str,
    limit: usize,
) -> Result<Recall, StoreError> {
    let candidates = limit * CANDIDATES_PER_RESULT;
    let words = store.search(Some(conversation), query, candidates)?;
    let Some(semantic) = semantic else {
        return Ok(words_only(words, limit));
    };
    if query.trim().is_empty() || !query.chars().any(char::is_alphanumeric) {
        return Ok(words_only(words, limit));
    }
    // Archived batches still without vectors get them first, within a
    // budget; whatever vectors exist are searched either way.
    let mut trouble = None;
    if semantic.behind() {
        match tokio::time::timeout(BACKFILL_WAIT, semantic.backfill(store, Some(conversation)))
            .await
        {
            Ok(Ok(done)) => trouble = done.first_refusal,
            Ok(Err(e)) => trouble = Some(e.to_string()),
            Err(_) => {} // slow, not down: the rest is made next time
        }
    }
    let by_meaning = async {
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
        Ok(ids) => (
            ids,
            trouble.and_then(|why| {
                semantic.warn_once_about(&format!(
                    "some archived summaries have no vector yet: {why}"
                ))
            }),
        ),
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

/// The word matches alone.
fn words_only(words: Vec<ArchivalBlock>, limit: usize) -> Recall {
    let by_words = Found {
        by_words: true,
        by_meaning: false,
    };
    Recall {
        hits: words
            .into_iter()
            .take(limit)
            .map(|b| (b, by_words))
            .collect(),
        warning: None,
    }
}
