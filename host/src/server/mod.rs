//! The HTTP bridge (`sandcrab serve`): the harness's operations as JSON
//! routes and its events as Server-Sent Events, on loopback, behind a
//! bearer token, a loopback `Host` check and an `Origin` check.
//!
//! | route | operation |
//! |---|---|
//! | `POST /workspace/initialize` `{path}` | open a workspace |
//! | `POST /agent/start` | start the agent |
//! | `POST /agent/stop` | stop it (no-op when stopped) |
//! | `POST /agent/messages` `{message}` | send a message (202; results as events) |
//! | `POST /agent/interrupt` | interrupt the turn in flight (no-op when idle) |
//! | `GET /agent/status` | `{lifecycle, is_streaming}` |
//! | `POST /agent/clear` | start a new conversation |
//! | `GET /agent/history` | the stored turns |
//! | `GET /events` | SSE; `Last-Event-ID` resumes |
//! | `GET /openapi.json` | this API |
//! | `GET /bridge/proof?challenge=` | proof the server holds the token (no token needed) |

pub mod guard;
mod listen;
pub mod openapi;
mod routes;
mod sse;
pub mod token;

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::harness::{Harness, HarnessError};
pub use listen::{Connection, ConnectionLimits, serve};

/// Largest request body.
pub const MAX_BODY: usize = 256 * 1024;

/// How the bridge guards itself.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The bearer token every request must carry.
    pub token: String,
    /// Origins allowed to call (browser apps); others are refused.
    pub cors: Vec<String>,
    /// Listening beyond loopback: the `Host` check is off (the token stays).
    pub allow_remote: bool,
    /// Interval of SSE heartbeats.
    pub heartbeat: std::time::Duration,
    /// Cancelled at shutdown: event streams end so the server can stop.
    pub shutdown: tokio_util::sync::CancellationToken,
}

#[derive(Clone)]
pub(crate) struct Shared {
    harness: Arc<Harness>,
    config: Arc<ServerConfig>,
}

/// The bridge's routes for `harness`.
pub fn router(harness: Arc<Harness>, config: ServerConfig) -> axum::Router {
    let guard = Arc::new(guard::Guard {
        token: config.token.clone(),
        cors: config.cors.clone(),
        allow_remote: config.allow_remote,
        max_body: MAX_BODY,
    });
    let shared = Shared {
        harness,
        config: Arc::new(config),
    };
    routes::router()
        .route("/events", axum::routing::get(sse::events))
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

/// `{"error": {"code", "message"}}` with a status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: &str) -> Self {
        ApiError {
            status,
            code: code.to_string(),
            message: message.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response()
    }
}

impl From<HarnessError> for ApiError {
    fn from(err: HarnessError) -> Self {
        let status = match err {
            HarnessError::AlreadyRunning | HarnessError::NotRunning => StatusCode::CONFLICT,
            HarnessError::NotInitialized | HarnessError::Leased(_) => StatusCode::CONFLICT,
            HarnessError::Workspace(_) => StatusCode::BAD_REQUEST,
            HarnessError::NotAllowed(_) => StatusCode::FORBIDDEN,
            HarnessError::Start(_) | HarnessError::History(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, err.code(), &err.to_string())
    }
}
