//! `sandcrab agent …`: drive a running `sandcrab serve` from a shell.
//!
//! The token goes only to a bridge on this machine's loopback that first
//! proved it holds the token (see [`token::proof`]): a process squatting
//! the port while the bridge is down, or a relay on another address, gets
//! nothing. What the bridge answers is printed through the terminal
//! sanitizer, and read with a size cap.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::llm::sse::SseParser;
use crate::server::{guard, token};

/// Largest answer read from the bridge.
const MAX_ANSWER: usize = 16 << 20;

#[derive(Debug, Args)]
pub struct AgentClientArgs {
    #[command(subcommand)]
    op: Op,
    /// The bridge (on this machine's loopback).
    #[arg(long, global = true, default_value = "http://127.0.0.1:9990")]
    url: String,
    /// The bridge's token file (default: where `sandcrab serve` keeps it).
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Op {
    /// Open a workspace on the bridge (one the operator allowed).
    Init { path: PathBuf },
    /// Start the agent.
    Start,
    /// Stop the agent.
    Stop,
    /// Send a message (returns at once; follow with `sandcrab agent events`).
    Send { message: String },
    /// Interrupt the turn in flight.
    Interrupt,
    /// `{lifecycle, is_streaming}`.
    Status,
    /// Start a new conversation.
    Clear,
    /// The current conversation's turns.
    History,
    /// The calls waiting for your approval.
    Permissions,
    /// Allow a waiting call (`--session`: and what its offered rule
    /// names, for the rest of the conversation; `--always`: from now on in
    /// this workspace, written to the operator's configuration).
    Approve {
        id: String,
        #[arg(long, conflicts_with = "always")]
        session: bool,
        #[arg(long)]
        always: bool,
    },
    /// Deny a waiting call, with a note the model sees.
    Deny {
        id: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Print the event stream as JSON lines (Ctrl-C to stop).
    Events {
        /// Resume after this event id.
        #[arg(long)]
        after: Option<u64>,
    },
}

pub async fn run(args: AgentClientArgs) -> anyhow::Result<ExitCode> {
    let file = match &args.token_file {
        Some(f) => f.clone(),
        None => token::default_file("serve.token").context("no token file: pass --token-file")?,
    };
    let token = token::read(&file)?;
    let bridge = Bridge::verify(&args.url, &token).await?;
    let (method, path, body) = match &args.op {
        Op::Init { path } => {
            let abs = std::path::absolute(path)?;
            ("POST", "/workspace/initialize", Some(json!({"path": abs})))
        }
        Op::Start => ("POST", "/agent/start", None),
        Op::Stop => ("POST", "/agent/stop", None),
        Op::Send { message } => ("POST", "/agent/messages", Some(json!({"message": message}))),
        Op::Interrupt => ("POST", "/agent/interrupt", None),
        Op::Status => ("GET", "/agent/status", None),
        Op::Clear => ("POST", "/agent/clear", None),
        Op::History => ("GET", "/agent/history", None),
        Op::Permissions => ("GET", "/agent/permissions", None),
        Op::Approve {
            id,
            session,
            always,
        } => {
            let scope = match (session, always) {
                (_, true) => "workspace",
                (true, _) => "session",
                _ => "once",
            };
            let body = json!({"decision": "allow", "scope": scope});
            return post_answer(&bridge, &token, id, body).await;
        }
        Op::Deny { id, note } => {
            let body = json!({"decision": "deny", "note": note});
            return post_answer(&bridge, &token, id, body).await;
        }
        Op::Events { after } => return bridge.events(&token, *after).await,
    };
    call(&bridge, &token, method, path, body).await
}

/// Answer permission request `id` with `body`.
async fn post_answer(
    bridge: &Bridge,
    token: &str,
    id: &str,
    mut body: Value,
) -> anyhow::Result<ExitCode> {
    if body["note"].is_null() {
        body.as_object_mut().map(|o| o.remove("note"));
    }
    // The id goes into the path: only the characters ids are made of.
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        anyhow::bail!("{id:?} is not a permission request id (see `sandcrab agent permissions`)");
    }
    let path = format!("/agent/permissions/{id}");
    call(bridge, token, "POST", &path, Some(body)).await
}

/// One request to the bridge; its JSON answer on stdout, or its error.
async fn call(
    bridge: &Bridge,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<ExitCode> {
    let url = format!("{}{path}", bridge.base);
    let request = match method {
        "GET" => bridge.http.get(&url),
        _ => bridge.http.post(&url).json(&body.unwrap_or(json!({}))),
    };
    let response = request.bearer_auth(token).send().await.with_context(|| {
        format!(
            "cannot reach the bridge at {} (is `sandcrab serve` running?)",
            bridge.base
        )
    })?;
    let status = response.status();
    let text = capped_text(response).await?;
    let answer = serde_json::from_str::<Value>(&text).ok();
    if !status.is_success() {
        let message = answer
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        errln!("sandcrab: {message} (HTTP {})", status.as_u16());
        return Ok(ExitCode::FAILURE);
    }
    match answer {
        Some(value) => outln!("{}", super::terminal::json(&value)),
        None => outln!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// A bridge that proved it holds the token, and a client pinned to the
/// address it proved it on.
struct Bridge {
    base: String,
    http: reqwest::Client,
}

impl Bridge {
    /// Check `url` names this machine's loopback over plain http, then ask
    /// each of its addresses for a proof; the first that gives a valid one
    /// is the bridge.
    async fn verify(url: &str, token: &str) -> anyhow::Result<Bridge> {
        let parsed = url::Url::parse(url).with_context(|| format!("--url {url} is not a URL"))?;
        let host = parsed.host_str().unwrap_or_default().to_string();
        let host_header = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        if parsed.scheme() != "http" || !guard::loopback_host(&host_header) {
            bail!(
                "--url {url}: `sandcrab agent` sends the bridge's token only to a bridge on this machine's loopback over http (http://127.0.0.1:PORT, http://localhost:PORT or http://[::1]:PORT)"
            );
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        let base = format!("http://{host_header}");
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
            .await
            .with_context(|| format!("cannot resolve {host}"))?
            .filter(|a| a.ip().is_loopback())
            .collect();
        let mut last = None;
        for addr in addrs {
            let http = reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .resolve(host.trim_matches(['[', ']']), addr)
                .build()?;
            match prove(&http, &base, token).await {
                Ok(()) => return Ok(Bridge { base, http }),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("{host} has no loopback address")))
    }

    /// Tail `/events`, one JSON object per event.
    async fn events(&self, token: &str, after: Option<u64>) -> anyhow::Result<ExitCode> {
        let mut request = self
            .http
            .get(format!("{}/events", self.base))
            .bearer_auth(token);
        if let Some(id) = after {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.context("cannot reach the bridge")?;
        if !response.status().is_success() {
            errln!(
                "sandcrab: the bridge refused the event stream (HTTP {})",
                response.status().as_u16()
            );
            return Ok(ExitCode::FAILURE);
        }
        let mut body = response.bytes_stream();
        let mut parser = SseParser::new();
        while let Some(chunk) = body.next().await {
            for frame in parser.feed(&chunk?)? {
                if frame.event.is_empty() {
                    continue;
                }
                let event = json!({
                    "id": frame.id.as_deref().and_then(|id| id.parse::<u64>().ok()).unwrap_or(0),
                    "event": frame.event,
                    "data": serde_json::from_str::<Value>(&frame.data).unwrap_or(json!(frame.data)),
                });
                outln!("{}", super::terminal::json(&event));
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Ask the server at `base` to prove it holds `token` for a fresh
/// challenge, on the address this client reached.
async fn prove(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<()> {
    let challenge = token::challenge();
    let response = http
        .get(format!(
            "{base}{}?challenge={challenge}",
            guard::PROOF_ROUTE
        ))
        .send()
        .await
        .with_context(|| {
            format!("cannot reach the bridge at {base} (is `sandcrab serve` running?)")
        })?;
    let reached = response.remote_addr();
    let answer: Value = serde_json::from_str(&capped_text(response).await?).unwrap_or_default();
    let expected = reached.map(|addr| token::proof(token, &challenge, &addr));
    match (answer["proof"].as_str(), expected) {
        (Some(proof), Some(expected)) if proof == expected => Ok(()),
        _ => bail!(
            "the server at {base} is not the bridge whose token is in the token file (it could not prove it holds the token): the token was not sent. Is another program listening on that port, or was the bridge restarted with another token file?"
        ),
    }
}

/// The body as text, at most [`MAX_ANSWER`] bytes.
async fn capped_text(response: reqwest::Response) -> anyhow::Result<String> {
    crate::llm::body::text_capped(response, MAX_ANSWER)
        .await
        .context("the bridge's answer could not be read")
}
