//! Reading an HTTP body with a byte bound: a server that sends an endless
//! or enormous answer fails the read instead of growing our memory.

use futures::StreamExt;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the answer is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
}

/// The whole body of `response`, at most `limit` bytes.
pub async fn read_capped(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if bytes.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Like [`read_capped`], as text (lossily decoded).
pub async fn text_capped(response: reqwest::Response, limit: usize) -> Result<String, BodyError> {
    read_capped(response, limit)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}
