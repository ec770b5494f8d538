//! What a local server said about itself (the models it serves, the
//! window it runs with), kept for an hour per address and model in the
//! data folder (with what else sandcrab learned): runs within the hour
//! ask nothing, so a run is one request. A plain server that refuses the
//! questions (a 404 to llama.cpp's and Ollama's) said so, and that is kept
//! too; one that did not answer at all may not be running yet, and is
//! asked again next time.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::llm::ProviderConfig;
use crate::llm::local::{LocalServer, describe};

/// How long what a server said is believed.
const KEPT_FOR: Duration = Duration::from_secs(3600);

#[derive(Serialize, Deserialize)]
struct Kept {
    /// Seconds since the epoch when it was asked.
    asked_at: u64,
    server: LocalServer,
}

/// What the server at `config`'s address says about itself and `model`:
/// from the cache when it was asked within the hour, else asked (and kept).
pub async fn described(config: &ProviderConfig, model: Option<&str>) -> LocalServer {
    let file = file_for(config, model);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Some(file) = &file
        && let Ok(text) = std::fs::read_to_string(file)
        && let Ok(kept) = serde_json::from_str::<Kept>(&text)
        && now.saturating_sub(kept.asked_at) < KEPT_FOR.as_secs()
    {
        return kept.server;
    }
    let server = describe(config, model).await;
    // A server that did not answer at all may not be running yet: ask
    // again next time rather than believe the silence for an hour.
    let said_something =
        server.answered || !server.models.is_empty() || server.context_window.is_some();
    if let Some(file) = &file
        && said_something
    {
        keep(
            file,
            &Kept {
                asked_at: now,
                server: server.clone(),
            },
        );
    }
    server
}

/// `DATA/servers/HASH.json`, HASH of the address and the model.
fn file_for(config: &ProviderConfig, model: Option<&str>) -> Option<PathBuf> {
    let key = blake3::hash(format!("{}\n{}", config.root(), model.unwrap_or("")).as_bytes());
    Some(
        crate::user_files::data_dir()?
            .join("servers")
            .join(format!("{}.json", &key.to_hex()[..24])),
    )
}

fn keep(file: &std::path::Path, kept: &Kept) {
    if let Ok(text) = serde_json::to_string(kept) {
        let _ = crate::user_files::write_private(file, &text);
    }
}
