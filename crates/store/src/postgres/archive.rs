//! Archival memory: summary blocks, their full-text search (BM25 over the
//! blocks PostgreSQL's index finds), their vectors, and compaction.

use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use super::PgStore;
use crate::bm25;
use crate::{ArchivalBlock, NewBlock, StoreError};

const BLOCK_COLUMNS: &str = "id, conversation_id, label, content, created_at";

/// Most blocks a search ranks (the best by PostgreSQL's own measure).
const CANDIDATES: i64 = 2000;

fn block_row(r: &Row) -> ArchivalBlock {
    ArchivalBlock {
        id: r.get(0),
        conversation_id: r.get(1),
        label: r.get(2),
        content: r.get(3),
        created_at: r.get(4),
    }
}

pub(super) async fn insert_block(
    tx: &Transaction<'_>,
    conversation: &str,
    block: &NewBlock,
) -> Result<i64, StoreError> {
    let row = tx
        .query_one(
            "INSERT INTO archival (conversation_id, label, content, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
            &[&conversation, &block.label, &block.content, &crate::time::now_rfc3339()],
        )
        .await?;
    Ok(row.get(0))
}

pub async fn blocks(
    store: &PgStore,
    conversation: &str,
    prefix: &str,
) -> Result<Vec<ArchivalBlock>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {BLOCK_COLUMNS} FROM archival WHERE conversation_id = $1 AND left(label, char_length($2)) = $2 ORDER BY id"
            ),
            &[&conversation, &prefix],
        )
        .await?;
    Ok(rows.iter().map(block_row).collect())
}

pub async fn add(store: &PgStore, conversation: &str, block: &NewBlock) -> Result<i64, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let id = insert_block(&tx, conversation, block).await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn search(
    store: &PgStore,
    conversation: Option<&str>,
    query: &str,
    limit: usize,
) -> Result<Vec<ArchivalBlock>, StoreError> {
    let words = bm25::words(query);
    if words.is_empty() {
        return Ok(Vec::new());
    }
    // Words are letters and digits only: nothing in them is query syntax.
    let tsquery = words.join(" | ");
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {BLOCK_COLUMNS} FROM archival WHERE words @@ to_tsquery('simple', $1) AND ($2::text IS NULL OR conversation_id = $2) ORDER BY ts_rank_cd(words, to_tsquery('simple', $1)) DESC, id LIMIT $3"
            ),
            &[&tsquery, &conversation, &CANDIDATES],
        )
        .await?;
    let stats = client
        .query_one(
            "SELECT COUNT(*), COALESCE(AVG(array_length(regexp_split_to_array(trim(content), '[^[:alnum:]]+'), 1)), 0)::float8 FROM archival WHERE $1::text IS NULL OR conversation_id = $1",
            &[&conversation],
        )
        .await?;
    let collection = bm25::Collection {
        documents: stats.get::<_, i64>(0) as u64,
        average_length: stats.get(1),
    };
    let mut found: Vec<ArchivalBlock> = rows.iter().map(block_row).collect();
    let candidates: Vec<(i64, String)> = found.iter().map(|b| (b.id, b.content.clone())).collect();
    let order = bm25::rank(&words, &candidates, &collection);
    let mut ranked = Vec::with_capacity(limit.min(order.len()));
    for id in order.into_iter().take(limit) {
        if let Some(i) = found.iter().position(|b| b.id == id) {
            ranked.push(found.swap_remove(i));
        }
    }
    Ok(ranked)
}

pub async fn by_ids(store: &PgStore, ids: &[i64]) -> Result<Vec<ArchivalBlock>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!("SELECT {BLOCK_COLUMNS} FROM archival WHERE id = ANY($1)"),
            &[&ids],
        )
        .await?;
    Ok(rows.iter().map(block_row).collect())
}

pub async fn set_embedding(
    store: &PgStore,
    id: i64,
    model: &str,
    dims: usize,
    vector: &[u8],
) -> Result<(), StoreError> {
    let client = store.client().await?;
    client
        .execute(
            "UPDATE archival SET embedding = $2, embedding_model = $3, embedding_dims = $4 WHERE id = $1",
            &[&id, &vector, &model, &(dims as i32)],
        )
        .await?;
    Ok(())
}

pub async fn unembedded(
    store: &PgStore,
    conversation: Option<&str>,
    model: &str,
    dims: usize,
    after: i64,
    limit: usize,
) -> Result<Vec<ArchivalBlock>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {BLOCK_COLUMNS} FROM archival WHERE ($1::text IS NULL OR conversation_id = $1) AND (embedding IS NULL OR embedding_model IS DISTINCT FROM $2 OR embedding_dims IS DISTINCT FROM $3) AND id > $5 ORDER BY id LIMIT $4"
            ),
            &[&conversation, &model, &(dims as i32), &(limit as i64), &after],
        )
        .await?;
    Ok(rows.iter().map(block_row).collect())
}

pub async fn scan_embeddings(
    store: &PgStore,
    conversation: &str,
    model: &str,
    dims: usize,
    visit: &mut dyn FnMut(i64, &[u8]),
) -> Result<(), StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT id, embedding FROM archival WHERE conversation_id = $1 AND embedding IS NOT NULL AND embedding_model = $2 AND embedding_dims = $3",
            &[&conversation, &model, &(dims as i32)],
        )
        .await?;
    for row in &rows {
        let vector: &[u8] = row.get(1);
        visit(row.get(0), vector);
    }
    Ok(())
}
