//! The bridge's event fan-out on loopback, in one process (server and
//! clients): latency from publishing an event to an SSE client reading it
//! (p50/p99, 50 clients, paced), delivery rate to 50 clients (burst), and
//! memory per idle client (RSS growth over 1,000 open streams; client and
//! server side together). Run: `cargo bench -p sandcrab --bench bridge_events`.

// A benchmark report and test diagnostics are our own text, not a peer's.
#![allow(clippy::disallowed_macros)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use sandcrab::agent::AgentKit;
use sandcrab::harness::{AgentFactory, Harness, Workspaces};
use sandcrab::server::{ServerConfig, router};
use serde_json::json;

struct NoAgent;

#[async_trait::async_trait]
impl AgentFactory for NoAgent {
    async fn build(
        &self,
        _: &std::path::Path,
    ) -> anyhow::Result<(AgentKit, Box<dyn std::any::Any + Send + Sync>)> {
        anyhow::bail!("not used")
    }
}

const TOKEN: &str = "bench-token-0123456789-0123456789-abcdef";

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

/// Open a stream; a task that reports (event id, latency) per data line.
async fn client(
    url: &str,
    epoch: Instant,
    out: tokio::sync::mpsc::UnboundedSender<(u64, Duration)>,
) -> tokio::task::JoinHandle<()> {
    let response = reqwest::Client::new()
        .get(format!("{url}/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let v: serde_json::Value = serde_json::from_str(data).unwrap();
                let sent = Duration::from_nanos(v["t"].as_u64().unwrap());
                let _ = out.send((v["n"].as_u64().unwrap(), epoch.elapsed() - sent));
            }
        }
    })
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let harness = Arc::new(Harness::new(Arc::new(NoAgent), None, Workspaces::default()));
        let app = router(
            harness.clone(),
            ServerConfig {
                token: TOKEN.into(),
                cors: vec![],
                allow_remote: false,
                heartbeat: Duration::from_secs(15),
                shutdown: tokio_util::sync::CancellationToken::new(),
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            sandcrab::server::serve(listener, app, Default::default(), std::future::pending())
                .await
                .unwrap()
        });
        let epoch = Instant::now();
        let log = harness.events().clone();
        let publish = |n: u64| {
            log.publish(
                "agent:message-chunk",
                json!({"n": n, "t": epoch.elapsed().as_nanos() as u64, "text": "some streamed text"}),
            );
        };

        // Latency: 50 clients, one event every 2 ms.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for _ in 0..50 {
            tasks.push(client(&url, epoch, tx.clone()).await);
        }
        let paced = 2_000u64;
        for n in 0..paced {
            publish(n);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut latencies = Vec::new();
        while latencies.len() < (paced * 50) as usize {
            latencies.push(rx.recv().await.unwrap().1);
        }
        latencies.sort();
        let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
        println!(
            "bridge/event_latency_50_clients: p50 {:?}, p99 {:?}, max {:?} ({} deliveries)",
            pct(0.50),
            pct(0.99),
            latencies.last().unwrap(),
            latencies.len()
        );

        // Burst: 20,000 events as fast as they can be published.
        let burst = 20_000u64;
        let start = Instant::now();
        for n in 0..burst {
            publish(paced + n);
        }
        let mut got = 0u64;
        while got < burst * 50 {
            rx.recv().await.unwrap();
            got += 1;
        }
        let elapsed = start.elapsed();
        println!(
            "bridge/burst_50_clients: {} events to each of 50 clients in {:?} = {:.0} deliveries/s",
            burst,
            elapsed,
            (burst * 50) as f64 / elapsed.as_secs_f64()
        );
        for t in tasks {
            t.abort();
        }

        // Memory per idle client.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = rss_kib();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let mut idle = Vec::new();
        for _ in 0..1000 {
            idle.push(client(&url, epoch, tx.clone()).await);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = rss_kib();
        println!(
            "bridge/idle_client_memory: {:.1} KiB per open stream (1,000 streams, RSS {} → {} KiB, both ends)",
            (after.saturating_sub(before)) as f64 / 1000.0,
            before,
            after
        );
    });
}
