//! Test fixture: HTTP requests through `sandcrab_sdk::http`, and a look
//! through the plugin's own memory for a secret the host must never hand
//! it.

use sandcrab_sdk::http::{HttpError, Request};
use sandcrab_sdk::prelude::*;

struct Fetch;

#[derive(Deserialize)]
struct FetchArgs {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    no_redirects: bool,
    /// Also look for this secret (XOR 0x5a, hex) in memory afterwards.
    #[serde(default)]
    scan_for: Option<String>,
}

impl Tool for Fetch {
    const NAME: &'static str = "fetch";
    const DESCRIPTION: &'static str =
        "Make an HTTP request; answer status, headers and body as JSON.";
    type Args = FetchArgs;

    fn parameters() -> Schema {
        Schema::object()
            .required("url", Schema::string("URL"))
            .into()
    }

    fn run(args: FetchArgs, _ctx: &CallContext) -> ToolResult {
        let mut request = Request::new(args.method.as_deref().unwrap_or("GET"), &args.url);
        for (name, value) in &args.headers {
            request = request.header(name, value);
        }
        if let Some(body) = args.body {
            request = request.body(body.into_bytes());
        }
        if args.no_redirects {
            request = request.no_redirects();
        }
        let answer = match request.send() {
            Ok(response) => {
                // The plugin's own log sees what it got, too.
                eprintln!("fetched {}: {}", args.url, response.text());
                json!({
                    "status": response.status,
                    "headers": response
                        .headers
                        .iter()
                        .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
                        .collect::<Vec<_>>(),
                    "body": response.text(),
                })
            }
            Err(HttpError::Refused(why)) => json!({ "refused": why }),
            Err(other) => json!({ "error": other.to_string() }),
        };
        let found = args.scan_for.as_deref().map(memory_holds);
        Ok(json!({ "answer": answer, "secret_in_memory": found }).to_string())
    }
}

/// Whether the bytes whose XOR with 0x5a are `hex` appear anywhere in
/// this instance's linear memory. The secret itself is never built in
/// memory: each byte is compared as it is decoded.
fn memory_holds(hex: &str) -> bool {
    let encoded: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect();
    if encoded.is_empty() {
        return false;
    }
    #[cfg(target_arch = "wasm32")]
    let size = core::arch::wasm32::memory_size(0) * 65536;
    #[cfg(not(target_arch = "wasm32"))]
    let size = 0usize;
    let byte = |addr: usize| -> u8 {
        // Every address below the memory's size is readable in wasm; 0 is
        // skipped so no null pointer is formed.
        unsafe { core::ptr::read_volatile(addr as *const u8) }
    };
    (1..size.saturating_sub(encoded.len())).any(|start| {
        encoded
            .iter()
            .enumerate()
            .all(|(i, e)| byte(start + i) == e ^ 0x5a)
    })
}

struct Env;

impl Tool for Env {
    const NAME: &'static str = "env";
    const DESCRIPTION: &'static str = "List the environment as NAME=VALUE lines.";
    type Args = Value;

    fn parameters() -> Schema {
        Schema::object().into()
    }

    fn run(_: Value, _ctx: &CallContext) -> ToolResult {
        Ok(std::env::vars()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect())
    }
}

/// A GET of `url` handed to the host; the pending response.
fn start_get(url: &str) -> Result<wasi::http::types::FutureIncomingResponse, String> {
    use wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let request = OutgoingRequest::new(Fields::new());
    request.set_method(&Method::Get).map_err(|_| "method")?;
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request.set_scheme(Some(&scheme)).map_err(|_| "scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|_| "authority")?;
    request
        .set_path_with_query(Some(if path.is_empty() { "/" } else { path }))
        .map_err(|_| "path")?;
    let body = request.body().map_err(|_| "body")?;
    let pending =
        wasi::http::outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    OutgoingBody::finish(body, None).map_err(|e| format!("{e:?}"))?;
    Ok(pending)
}

struct FireAndForget;

#[derive(Deserialize)]
struct ManyArgs {
    url: String,
    count: u32,
}

impl Tool for FireAndForget {
    const NAME: &'static str = "fire_and_forget";
    const DESCRIPTION: &'static str = "Start `count` GETs and drop each before its answer.";
    type Args = ManyArgs;

    fn parameters() -> Schema {
        Schema::object().into()
    }

    fn run(args: ManyArgs, _ctx: &CallContext) -> ToolResult {
        let mut started = 0;
        for _ in 0..args.count {
            if start_get(&args.url).is_ok() {
                started += 1;
            }
        }
        Ok(format!("{started} started"))
    }
}

struct Hoard;

impl Tool for Hoard {
    const NAME: &'static str = "hoard";
    const DESCRIPTION: &'static str =
        "Make `count` GETs one after another and keep every response unread.";
    type Args = ManyArgs;

    fn parameters() -> Schema {
        Schema::object().into()
    }

    fn run(args: ManyArgs, _ctx: &CallContext) -> ToolResult {
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        for _ in 0..args.count {
            let pending = start_get(&args.url).map_err(ToolError::Failed)?;
            pending.subscribe().block();
            match pending.get() {
                Some(Ok(Ok(response))) => kept.push(response),
                Some(Ok(Err(code))) => refused.push(format!("{code:?}")),
                _ => refused.push("no answer".into()),
            }
        }
        Ok(json!({ "kept": kept.len(), "refused": refused }).to_string())
    }
}

export_tools!(Fetch, Env, FireAndForget, Hoard);
