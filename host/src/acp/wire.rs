//! JSON-RPC 2.0 over stdio, one message per line, as ACP frames it: lines
//! read with a byte bound (a longer one is skipped whole and answered
//! with an error), and one writer that owns stdout, fed through a bounded
//! channel (a client that stops reading slows the agent down; nothing
//! queues without end).

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The longest message read, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Messages waiting for stdout at most.
const OUTBOX: usize = 64;

/// JSON-RPC error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    /// ACP: the resource (a session) is not known.
    pub const NOT_FOUND: i64 = -32002;
}

/// One message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The answer to a request the agent sent.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

/// A line that is not a JSON-RPC message: the error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    pub id: Value,
    pub code: i64,
    pub message: String,
}

/// Read one message; None at the end of input.
pub async fn read<R: AsyncBufRead + Unpin>(
    input: &mut R,
) -> std::io::Result<Option<Result<Incoming, Malformed>>> {
    loop {
        let Some(line) = read_line(input).await? else {
            return Ok(None);
        };
        match line {
            Line::Text(text) if text.trim_ascii().is_empty() => continue,
            Line::Text(text) => return Ok(Some(parse(&text))),
            Line::TooLong(bytes) => {
                return Ok(Some(Err(Malformed {
                    id: Value::Null,
                    code: code::INVALID_REQUEST,
                    message: format!(
                        "a message of {bytes} bytes or more was skipped: the most sandcrab reads is {MAX_MESSAGE_BYTES} bytes"
                    ),
                })));
            }
        }
    }
}

enum Line {
    Text(Vec<u8>),
    TooLong(usize),
}

/// Read up to a newline, keeping at most [`MAX_MESSAGE_BYTES`].
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<Option<Line>> {
    let mut kept = Vec::new();
    let mut seen = 0usize;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok((seen > 0).then(|| finish(kept, seen)));
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (&buf[..at], at + 1),
            None => (buf, buf.len()),
        };
        let ends = chunk.len() < done;
        if seen + chunk.len() <= MAX_MESSAGE_BYTES {
            kept.extend_from_slice(chunk);
        }
        seen += chunk.len();
        input.consume(done);
        if ends {
            return Ok(Some(finish(kept, seen.max(1))));
        }
    }
}

fn finish(kept: Vec<u8>, seen: usize) -> Line {
    if seen > MAX_MESSAGE_BYTES {
        Line::TooLong(seen)
    } else {
        Line::Text(kept)
    }
}

/// Read one line as a JSON-RPC message.
fn parse(text: &[u8]) -> Result<Incoming, Malformed> {
    let value: Value = serde_json::from_slice(text).map_err(|e| Malformed {
        id: Value::Null,
        code: code::PARSE_ERROR,
        message: format!("not JSON: {e}"),
    })?;
    let invalid = |why: &str| Malformed {
        id: value.get("id").cloned().unwrap_or(Value::Null),
        code: code::INVALID_REQUEST,
        message: format!("not a JSON-RPC 2.0 message: {why}"),
    };
    if value.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid("\"jsonrpc\": \"2.0\" is missing"));
    }
    let id = value.get("id").cloned();
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null())
    {
        return Err(invalid("the id is neither a number nor a string"));
    }
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    match (value.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request {
            id,
            method: method.clone(),
            params,
        }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification {
            method: method.clone(),
            params,
        }),
        (Some(_), _) => Err(invalid("the method is not a string")),
        (None, Some(id)) => {
            let outcome = match (value.get("result"), value.get("error")) {
                (Some(result), None) => Ok(result.clone()),
                (None, Some(error)) => Err(error.clone()),
                _ => return Err(invalid("a response needs a result or an error")),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err(invalid("neither a method nor an id")),
    }
}

/// The one way to stdout.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Value>,
}

impl Outbox {
    /// An outbox and the task that writes it to `output`, one message per
    /// line; the task ends when every outbox is dropped or `output` fails.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        mut output: W,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Value>(OUTBOX);
        let writer = tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                let mut line = serde_json::to_vec(&message).unwrap_or_default();
                line.push(b'\n');
                if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                    break;
                }
            }
        });
        (Outbox { tx }, writer)
    }

    /// Send `message` (waits while the client is not reading); false when
    /// the client is gone.
    pub async fn send(&self, message: Value) -> bool {
        self.tx.send(message).await.is_ok()
    }

    /// Room for one message, once the client has read enough (None: it
    /// is gone).
    pub async fn reserve(&self) -> Option<mpsc::Permit<'_, Value>> {
        self.tx.reserve().await.ok()
    }

    pub async fn result(&self, id: Value, result: Value) -> bool {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    pub async fn error(&self, id: Value, code: i64, message: &str) -> bool {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
            .await
    }

    pub async fn notify(&self, method: &str, params: Value) -> bool {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8]) -> Vec<Result<Incoming, Malformed>> {
        let mut reader = tokio::io::BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        while let Some(message) = read(&mut reader).await.unwrap() {
            out.push(message);
        }
        out
    }

    #[tokio::test]
    async fn requests_notifications_responses_and_garbage_each_read_as_what_they_are() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n\n\
{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"ok\":true}}\n\
{not json\n\
{\"id\":2,\"method\":\"x\"}\n";
        let read = all(input).await;
        assert_eq!(read.len(), 5, "{read:?}");
        assert!(matches!(&read[0], Ok(Incoming::Request { method, .. }) if method == "initialize"));
        assert!(
            matches!(&read[1], Ok(Incoming::Notification { method, .. }) if method == "session/cancel")
        );
        assert!(matches!(
            &read[2],
            Ok(Incoming::Response { outcome: Ok(_), .. })
        ));
        assert!(matches!(
            &read[3],
            Err(Malformed {
                code: code::PARSE_ERROR,
                ..
            })
        ));
        assert!(
            matches!(&read[4], Err(Malformed { code: code::INVALID_REQUEST, id, .. }) if *id == json!(2))
        );
    }

    #[tokio::test]
    async fn a_message_over_the_bound_is_skipped_whole_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"ok\"}\n");
        let read = all(&input).await;
        assert_eq!(
            read.len(),
            2,
            "{:?}",
            read.iter().map(|r| r.is_ok()).collect::<Vec<_>>()
        );
        assert!(matches!(&read[0], Err(Malformed { message, .. }) if message.contains("skipped")));
        assert!(matches!(&read[1], Ok(Incoming::Notification { method, .. }) if method == "ok"));
    }
}
