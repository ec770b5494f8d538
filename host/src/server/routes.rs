//! The JSON routes: one per harness operation.

use crate::approvals::AnswerError;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, Shared};

pub(super) fn router() -> Router<Shared> {
    Router::new()
        .route("/workspace/initialize", post(initialize))
        .route("/agent/start", post(start))
        .route("/agent/stop", post(stop))
        .route("/agent/messages", post(send))
        .route("/agent/interrupt", post(interrupt))
        .route("/agent/status", get(status))
        .route("/agent/clear", post(clear))
        .route("/agent/history", get(history))
        .route("/agent/permissions", get(permissions))
        .route("/agent/permissions/{id}", post(answer_permission))
        .route("/openapi.json", get(openapi))
}

type Reply = Result<Json<Value>, ApiError>;

fn ok() -> Reply {
    Ok(Json(json!({"ok": true})))
}

/// A JSON body, or a 400/413/415 naming what was wrong.
fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    body.map(|Json(b)| b).map_err(|rejection| {
        ApiError::new(rejection.status(), "bad_request", &rejection.body_text())
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Initialize {
    path: String,
}

async fn initialize(
    State(s): State<Shared>,
    request: Result<Json<Initialize>, JsonRejection>,
) -> Reply {
    let request = body(request)?;
    let dir = s
        .harness
        .initialize(std::path::Path::new(&request.path))
        .await?;
    Ok(Json(json!({"ok": true, "workspace": dir})))
}

async fn start(State(s): State<Shared>) -> Reply {
    s.harness.start().await?;
    ok()
}

async fn stop(State(s): State<Shared>) -> Reply {
    s.harness.stop().await;
    ok()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    message: String,
}

async fn send(
    State(s): State<Shared>,
    request: Result<Json<Message>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request = body(request)?;
    if request.message.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "message is empty",
        ));
    }
    s.harness.send(&request.message).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"ok": true}))))
}

async fn interrupt(State(s): State<Shared>) -> Reply {
    s.harness.interrupt().await;
    ok()
}

async fn status(State(s): State<Shared>) -> Reply {
    Ok(Json(
        serde_json::to_value(s.harness.status().await).unwrap_or_default(),
    ))
}

async fn clear(State(s): State<Shared>) -> Reply {
    s.harness.clear().await?;
    ok()
}

async fn history(State(s): State<Shared>) -> Reply {
    let turns = s.harness.history().await?;
    Ok(Json(serde_json::to_value(turns).unwrap_or_default()))
}

async fn permissions(State(s): State<Shared>) -> Reply {
    Ok(Json(
        serde_json::to_value(s.harness.pending_permissions()).unwrap_or_default(),
    ))
}

/// `allow` or `deny`.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Allow,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionAnswer {
    decision: Verdict,
    #[serde(default = "once")]
    scope: crate::approvals::Scope,
    note: Option<String>,
    /// For a form: the values of its fields.
    content: Option<serde_json::Map<String, Value>>,
}

fn once() -> crate::approvals::Scope {
    crate::approvals::Scope::Once
}

async fn answer_permission(
    State(s): State<Shared>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Result<Json<PermissionAnswer>, JsonRejection>,
) -> Reply {
    let request = body(request)?;
    let answer = crate::approvals::Answer {
        allow: matches!(request.decision, Verdict::Allow),
        scope: request.scope,
        note: request.note,
        by: "bridge".into(),
        at: crate::time::now_rfc3339(),
        content: request.content,
    };
    s.harness
        .answer_permission(&id, answer)
        .map_err(|e| match e {
            AnswerError::Unknown(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_permission", &e.to_string())
            }
            AnswerError::Form { .. } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "answer_does_not_fit",
                &e.to_string(),
            ),
        })?;
    ok()
}

async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}
