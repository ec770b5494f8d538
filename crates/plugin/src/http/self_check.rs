//! `sandcrab sandbox check`'s HTTP rows: the gate plugins' requests go
//! through, tried for real against a server on loopback — what it must
//! refuse never reaches the server, and the credential it adds does.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::egress::{HttpEgress, HttpLimits};
use super::grant::{CredentialGrant, CredentialRule, HttpRule};
use crate::clock::CallClock;

/// One attempt and what came of it.
#[derive(Debug, Clone, Serialize)]
pub struct HttpCheck {
    pub attempt: String,
    /// The attempt did what the gate promises.
    pub held: bool,
    pub detail: String,
}

const PROBE_SECRET: &str = "probe-credential-5e1f";

/// Run the attempts.
pub async fn check() -> Vec<HttpCheck> {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            return vec![HttpCheck {
                attempt: "start a loopback server".into(),
                held: false,
                detail: e.to_string(),
            }];
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let server_seen = seen.clone();
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = vec![0u8; 8192];
            let n = stream.read(&mut head).await.unwrap_or(0);
            server_seen
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head[..n]).into_owned());
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .await;
        }
    });

    let by_address = format!("http://127.0.0.1:{port}");
    let by_name = format!("http://localhost:{port}");
    let rule = |o: &str| HttpRule {
        origin: o.parse().expect("a valid origin"),
        methods: vec!["GET".into()],
        private: false,
    };
    let credential = CredentialGrant {
        origin: by_address.parse().expect("a valid origin"),
        rule: CredentialRule {
            header: "authorization".into(),
            value: "Bearer ${PROBE_TOKEN}".into(),
            vars: vec!["PROBE_TOKEN".into()],
        },
    };
    let egress = Arc::new(HttpEgress::new(
        "sandbox-check",
        vec![
            by_address.parse().expect("valid"),
            by_name.parse().expect("valid"),
        ],
        vec![rule(&by_address), rule(&by_name)],
        &[credential],
        HttpLimits {
            request_bytes: 1024,
            response_bytes: 1024,
            timeout_ms: 3000,
            concurrent: 4,
            held_bytes: 1 << 20,
        },
        &[("PROBE_TOKEN".to_string(), PROBE_SECRET.to_string())].into(),
        match crate::tls::client_config(&[]) {
            Ok(tls) => tls,
            Err(e) => {
                return vec![HttpCheck {
                    attempt: "prepare TLS".into(),
                    held: false,
                    detail: e,
                }];
            }
        },
    ));

    let mut out = Vec::new();
    let mut attempt = |what: &str, result: Result<(u16, Vec<u8>), String>, want_refused: bool| {
        let reached = std::mem::take(&mut *seen.lock().unwrap());
        let (held, detail) = match (&result, want_refused) {
            (Err(why), true) => (reached.is_empty(), format!("refused: {why}")),
            (Ok((status, _)), true) => (false, format!("answered {status}")),
            (Ok((status, body)), false) => {
                let added = reached
                    .iter()
                    .any(|r| r.contains(&format!("Bearer {PROBE_SECRET}")));
                let withheld = !String::from_utf8_lossy(body).contains(PROBE_SECRET);
                (
                    added && withheld,
                    format!("answered {status}; credential added by the host: {added}"),
                )
            }
            (Err(why), false) => (false, format!("failed: {why}")),
        };
        out.push(HttpCheck {
            attempt: what.into(),
            held,
            detail,
        });
    };

    let send = |url: String, method: &str, header: Option<(&str, &str)>| {
        let egress = egress.clone();
        let method = method.to_string();
        let header = header.map(|(n, v)| (n.to_string(), v.to_string()));
        async move {
            let mut request = http::Request::builder().method(method.as_str()).uri(&url);
            if let Some((n, v)) = header {
                request = request.header(n, v);
            }
            let body = Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync();
            let request = request.body(body).map_err(|e| e.to_string())?;
            let clock = CallClock::new(std::time::Duration::from_secs(5));
            let response = super::gate::send_checked(&egress, &clock, request).await?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            Ok::<_, String>((status, body))
        }
    };

    attempt(
        "a request to an origin the plugin was not granted (127.0.0.2)",
        send(format!("http://127.0.0.2:{port}/"), "GET", None).await,
        true,
    );
    attempt(
        "a granted host name that resolves to loopback (localhost)",
        send(format!("{by_name}/"), "GET", None).await,
        true,
    );
    attempt(
        "a method the grant does not list (POST)",
        send(format!("{by_address}/"), "POST", None).await,
        true,
    );
    attempt(
        "the plugin sending its own credential header",
        send(
            format!("{by_address}/"),
            "GET",
            Some(("authorization", "Bearer forged")),
        )
        .await,
        true,
    );
    attempt(
        "a granted request: the host adds the credential",
        send(format!("{by_address}/"), "GET", None).await,
        false,
    );
    server.abort();
    out
}
