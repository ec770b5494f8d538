//! `sandcrab agent …`: drive a running `sandcrab serve` from a shell.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::server::token;

#[derive(Debug, Args)]
pub struct AgentClientArgs {
    #[command(subcommand)]
    op: Op,
    /// The bridge.
    #[arg(long, global = true, default_value = "http://127.0.0.1:9990")]
    url: String,
    /// The bridge's token file (default: where `sandcrab serve` keeps it).
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Op {
    /// Open a workspace on the bridge.
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
        None => token::default_file().context("no token file: pass --token-file")?,
    };
    let token = token::read(&file)?;
    let client = reqwest::Client::new();
    let base = args.url.trim_end_matches('/');
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
        Op::Events { after } => return events(&client, base, &token, *after).await,
    };
    let url = format!("{base}{path}");
    let request = match method {
        "GET" => client.get(&url),
        _ => client.post(&url).json(&body.unwrap_or(json!({}))),
    };
    let response = request.bearer_auth(&token).send().await.with_context(|| {
        format!("cannot reach the bridge at {base} (is `sandcrab serve` running?)")
    })?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        eprintln!(
            "sandcrab: {} (HTTP {})",
            super::terminal::sanitize(&message),
            status.as_u16()
        );
        return Ok(ExitCode::FAILURE);
    }
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// Tail `/events`, one JSON object per event.
async fn events(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    after: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let mut request = client.get(format!("{base}/events")).bearer_auth(token);
    if let Some(id) = after {
        request = request.header("Last-Event-ID", id.to_string());
    }
    let response = request.send().await.context("cannot reach the bridge")?;
    if !response.status().is_success() {
        eprintln!(
            "sandcrab: the bridge refused the event stream (HTTP {})",
            response.status().as_u16()
        );
        return Ok(ExitCode::FAILURE);
    }
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let mut event = json!({});
            for line in frame.lines() {
                if let Some((field, value)) = line.split_once(':') {
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => event["id"] = json!(value.parse::<u64>().unwrap_or(0)),
                        "event" => event["event"] = json!(value),
                        "data" => {
                            event["data"] = serde_json::from_str(value).unwrap_or(json!(value))
                        }
                        _ => {}
                    }
                }
            }
            if event.get("event").is_some() {
                println!("{event}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
