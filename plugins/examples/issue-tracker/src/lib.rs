//! issue-tracker: the Rust example of a plugin that calls an authenticated
//! web API.
//!
//! - `list_issues`: `GET {api}/issues?state=…`, answered as one line per
//!   issue;
//! - `open_issue`: `POST {api}/issues` with a JSON body.
//!
//! The requests go through `sandcrab_sdk::http` (the host's
//! `wasi:http/outgoing-handler`). Where they may go is the operator's call:
//! the manifest asks for `https://tracker.example.com`, the operator grants
//! it (and may limit the methods). The API token is not the plugin's
//! business at all: the operator's `credentials` table makes the host add
//! `Authorization: Bearer …` to every request to that origin, from its own
//! environment; the plugin never sees the value, not even when the server
//! echoes it back (the host withholds it from the response).
//!
//! Build: `cargo build --release --target wasm32-wasip2` (from `plugins/`).
use sandcrab_sdk::http::{self, Request};
use sandcrab_sdk::prelude::*;
use serde::Serialize;

/// Where the API is: `ISSUE_TRACKER_URL` (granted by name), else the
/// tracker's public address.
fn api() -> String {
    std::env::var("ISSUE_TRACKER_URL")
        .unwrap_or_else(|_| "https://tracker.example.com".into())
        .trim_end_matches('/')
        .to_string()
}

/// One issue, as the API answers it (other fields are ignored).
#[derive(Deserialize)]
struct Issue {
    id: u64,
    title: String,
    #[serde(default)]
    state: String,
}

/// A failed answer, with what the server said.
fn api_error(what: &str, response: &http::Response) -> ToolError {
    let mut body = response.text();
    body.truncate(500);
    ToolError::Failed(format!(
        "{what}: the tracker answered {}: {body}",
        response.status
    ))
}

struct ListIssues;

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    state: Option<String>,
}

impl Tool for ListIssues {
    const NAME: &'static str = "list_issues";
    const DESCRIPTION: &'static str = "List the tracker's issues (open by default).";
    type Args = ListArgs;

    fn parameters() -> Schema {
        Schema::object()
            .optional(
                "state",
                Schema::string_enum(&["open", "closed", "all"], "Which issues"),
            )
            .into()
    }

    fn run(args: ListArgs, _ctx: &CallContext) -> ToolResult {
        let state = args.state.as_deref().unwrap_or("open");
        let response = http::get(&format!("{}/issues?state={state}", api()))?;
        if !response.ok() {
            return Err(api_error("listing issues", &response));
        }
        let issues: Vec<Issue> = response.json()?;
        if issues.is_empty() {
            return Ok(format!("No {state} issues."));
        }
        Ok(issues
            .iter()
            .map(|i| format!("#{} [{}] {}\n", i.id, i.state, i.title))
            .collect())
    }
}

struct OpenIssue;

#[derive(Deserialize, Serialize)]
struct OpenArgs {
    title: String,
    #[serde(default)]
    body: String,
}

impl Tool for OpenIssue {
    const NAME: &'static str = "open_issue";
    const DESCRIPTION: &'static str = "Open a new issue in the tracker.";
    type Args = OpenArgs;

    fn parameters() -> Schema {
        Schema::object()
            .required("title", Schema::string("One-line summary"))
            .optional("body", Schema::string("Details"))
            .into()
    }

    fn run(args: OpenArgs, _ctx: &CallContext) -> ToolResult {
        let response = Request::post(&format!("{}/issues", api()))
            .json(&args)
            .send()?;
        if !response.ok() {
            return Err(api_error("opening the issue", &response));
        }
        let created: Issue = response.json()?;
        Ok(format!("Opened #{}: {}", created.id, created.title))
    }
}

export_tools!(ListIssues, OpenIssue);
