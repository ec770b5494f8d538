//! What a local OpenAI-compatible server says about itself: the models it
//! serves (`GET /v1/models`) and the context window the model runs with
//! (llama.cpp: `GET /props`; Ollama: `POST /api/show`); and what Gemini's
//! model metadata says of a model's window (`GET /v1beta/models/{model}`).
//! Every question is short-timed and optional: a server that does not
//! answer is simply not
//! described.

use std::time::Duration;

use serde_json::{Value, json};

use super::config::ProviderConfig;

/// Longest wait for each question.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Ollama runs a model with this context unless its parameters say
/// otherwise (the model's own maximum is usually much larger).
const OLLAMA_DEFAULT_CONTEXT: u64 = 4096;

/// What the server said.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LocalServer {
    /// Model ids it serves.
    pub models: Vec<String>,
    /// The context window the model runs with, in tokens.
    pub context_window: Option<u64>,
    /// Whether it answered any question, if only with a refusal (a plain
    /// server's 404; a 5xx is no answer): it was running, so its silence
    /// is news worth keeping.
    #[serde(default)]
    pub answered: bool,
}

/// Ask the server at `config`'s base URL about itself and `model` (or the
/// one model it serves).
pub async fn describe(config: &ProviderConfig, model: Option<&str>) -> LocalServer {
    let Ok(builder) = super::config::keyed_http(config.proxy.as_deref()) else {
        return LocalServer::default();
    };
    let Ok(http) = builder
        .connect_timeout(ASK_TIMEOUT)
        .timeout(ASK_TIMEOUT)
        .build()
    else {
        return LocalServer::default();
    };
    let root = config.root();
    if config.kind == super::config::ProviderKind::Gemini {
        return LocalServer {
            models: Vec::new(),
            context_window: match model {
                Some(model) => gemini_window(&http, &root, config, model).await,
                None => None,
            },
            answered: false,
        };
    }
    let auth = |r: reqwest::RequestBuilder| match &config.api_key {
        Some(key) => r.bearer_auth(key),
        None => r,
    };
    let answered = std::sync::atomic::AtomicBool::new(false);
    let get_json = |request| get_json(request, &answered);
    // The list is asked for only to pick the model; it also says whose
    // server this is, and so which one question gives the window.
    let listed = match model {
        Some(_) => None,
        None => get_json(auth(http.get(format!("{root}/v1/models")))).await,
    };
    let models: Vec<String> = listed
        .as_ref()
        .map(|v| {
            v["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let model = model
        .map(str::to_string)
        .or_else(|| (models.len() == 1).then(|| models[0].clone()));
    let props = || async {
        get_json(auth(http.get(format!("{root}/props"))))
            .await
            .and_then(|v| llama_cpp_context(&v))
    };
    let show = |model: Option<String>| async {
        let model = model?;
        get_json(auth(http.post(format!("{root}/api/show"))).json(&json!({ "model": model })))
            .await
            .and_then(|v| ollama_context(&v))
    };
    let context_window = match listed.as_ref().map(|v| server_of(v, model.as_deref())) {
        Some(Server::LlamaCpp) => props().await,
        Some(Server::Ollama) => show(model.clone()).await,
        Some(Server::Says(Some(window))) => Some(window),
        // Unknown, or not listed (the model was named): llama.cpp, then
        // Ollama.
        Some(Server::Says(None)) | None => match props().await {
            Some(window) => Some(window),
            None => show(model.clone()).await,
        },
    };
    LocalServer {
        models,
        context_window,
        answered: answered.load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// Whose server answered `GET /v1/models`, as far as it matters here.
enum Server {
    /// llama.cpp (`owned_by: "llamacpp"`): `/props` has the window.
    LlamaCpp,
    /// Ollama (`owned_by: "library"` and the like): `/api/show` has it.
    Ollama,
    /// Anything else: the window its list gives (vLLM's
    /// `max_model_len`), if any (then nothing more is asked).
    Says(Option<u64>),
}

fn server_of(list: &Value, model: Option<&str>) -> Server {
    let entries: Vec<&Value> = list["data"].as_array().into_iter().flatten().collect();
    let entry = entries
        .iter()
        .find(|m| model.is_some_and(|id| m["id"].as_str() == Some(id)))
        .or(entries.first());
    let Some(entry) = entry else {
        return Server::Says(None);
    };
    match entry["owned_by"].as_str() {
        Some("llamacpp") => Server::LlamaCpp,
        Some("library" | "ollama") => Server::Ollama,
        _ => Server::Says(
            ["max_model_len", "context_length", "context_window"]
                .iter()
                .find_map(|key| entry[*key].as_u64())
                .filter(|n| *n > 0),
        ),
    }
}

/// Gemini's model metadata: `GET /v1beta/models/{model}`,
/// `inputTokenLimit`.
async fn gemini_window(
    http: &reqwest::Client,
    root: &str,
    config: &ProviderConfig,
    model: &str,
) -> Option<u64> {
    let mut request = http.get(format!("{root}/v1beta/models/{model}"));
    if let Some(key) = &config.api_key {
        request = request.header("x-goog-api-key", key);
    }
    get_json(request, &std::sync::atomic::AtomicBool::new(false))
        .await?
        .get("inputTokenLimit")?
        .as_u64()
        .filter(|n| *n > 0)
}

async fn get_json(
    request: reqwest::RequestBuilder,
    answered: &std::sync::atomic::AtomicBool,
) -> Option<Value> {
    let response = request.send().await.ok()?;
    // A refusal (404, 405, 400) is an answer about the server; a 5xx is
    // not (llama-server answers 503 while its model loads).
    if !response.status().is_server_error() {
        answered.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if !response.status().is_success() {
        return None;
    }
    let bytes = super::body::read_capped(response, 1 << 20).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// llama.cpp's `/props`: `default_generation_settings.n_ctx` (or `n_ctx`).
pub fn llama_cpp_context(props: &Value) -> Option<u64> {
    props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
}

/// Ollama's `/api/show`: `num_ctx` from the parameters when set, else the
/// server default (never more than the model's own context length).
pub fn ollama_context(show: &Value) -> Option<u64> {
    let model_max = show["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    let num_ctx = show["parameters"].as_str().and_then(|params| {
        params.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok())?
        })
    });
    match (num_ctx, model_max) {
        (Some(n), _) => Some(n),
        (None, Some(max)) => Some(max.min(OLLAMA_DEFAULT_CONTEXT)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    /// A loopback server that answers every request with `status`.
    fn answering(status: &'static str) -> std::net::SocketAddr {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        addr
    }

    /// A server that refuses every question (404) answered; one still
    /// loading its model (503) and a port nobody listens on did not, so
    /// their silence is not kept.
    #[tokio::test]
    async fn a_refusal_is_an_answer_and_a_loading_server_or_a_closed_port_is_not() {
        let mut config = ProviderConfig::new(super::super::config::ProviderKind::OpenAiCompatible);
        config.base_url = format!("http://{}", answering("404 Not Found"));
        let said = describe(&config, Some("m")).await;
        assert!(said.answered && said.context_window.is_none(), "{said:?}");

        config.base_url = format!("http://{}", answering("503 Service Unavailable"));
        assert!(!describe(&config, Some("m")).await.answered);

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        config.base_url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        assert!(!describe(&config, Some("m")).await.answered);
    }

    use super::*;

    #[test]
    fn context_windows_are_read_from_each_server() {
        assert_eq!(
            llama_cpp_context(&json!({"default_generation_settings": {"n_ctx": 32768}})),
            Some(32768)
        );
        assert_eq!(llama_cpp_context(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(llama_cpp_context(&json!({})), None);
        let show = json!({"model_info": {"qwen2.context_length": 32768}, "parameters": "stop \"<|im_end|>\"\nnum_ctx 16384"});
        assert_eq!(ollama_context(&show), Some(16384));
        let show = json!({"model_info": {"llama.context_length": 131072}});
        assert_eq!(ollama_context(&show), Some(4096));
    }
}
