//! Host-side views of what plugins export, independent of the ABI version
//! they were built against.

use serde::{Deserialize, Serialize};

/// A tool as the model sees it, and how the host may run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
    /// What calls write and whether they may run in the background.
    #[serde(default, skip_serializing_if = "ToolTraits::is_default")]
    pub traits: ToolTraits,
}

impl ToolSpec {
    /// A tool that writes nothing and runs in the foreground.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: serde_json::Value,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            traits: ToolTraits::default(),
        }
    }
}

/// Which part of an over-long output is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TruncateMode {
    /// Keep the beginning and the end, drop the middle.
    HeadTail,
    /// Keep the end.
    Tail,
}

/// Limits for one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TruncationLimits {
    /// Maximum characters.
    pub chars: usize,
    pub mode: TruncateMode,
    /// Maximum lines, applied after characters.
    #[serde(default)]
    pub lines: Option<usize>,
}

impl TruncationLimits {
    /// Most characters a tool may ask the model to be shown (more would
    /// crowd the context window; the operator may still allow more).
    pub const MAX_DECLARED_CHARS: usize = 200_000;

    /// The limits a plugin declared, brought within the host's bounds (at
    /// least one character and one line, at most [`Self::MAX_DECLARED_CHARS`]).
    pub fn declared(chars: u32, lines: Option<u32>, mode: TruncateMode) -> Self {
        TruncationLimits {
            chars: (chars as usize).clamp(1, Self::MAX_DECLARED_CHARS),
            mode,
            lines: lines.map(|l| (l as usize).max(1)),
        }
    }

    /// Limits of `chars` characters (then `lines` lines), keeping `mode`.
    pub const fn new(chars: usize, mode: TruncateMode, lines: Option<usize>) -> Self {
        TruncationLimits { chars, mode, lines }
    }
}

/// How the host may run a tool's calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ToolTraits {
    pub writes: Writes,
    /// The model may start a call as a background job
    /// (`run_in_background: true`).
    pub background: bool,
    /// A call may run as several shards at once (`sandcrab:shards`).
    pub shardable: bool,
    /// A call may ask for the network for its programs (`network: true`;
    /// the plugin's programs have it on request, and its schema declares
    /// the boolean).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// How much of a call's output the model sees by default (the
    /// operator's `[truncation]` overrides it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<TruncationLimits>,
}

impl ToolTraits {
    fn is_default(&self) -> bool {
        *self == ToolTraits::default()
    }
}

/// What a tool call may write (calls writing the same path run in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind", content = "args")]
pub enum Writes {
    #[default]
    Nothing,
    /// The workspace paths given in these string arguments.
    Paths(Vec<String>),
    /// Anywhere in the workspace.
    Workspace,
}

/// Context handed to a tool call.
#[derive(Debug, Clone, Default)]
pub struct ToolCallContext {
    /// Session (thread) id.
    pub session_id: String,
    /// The model's tool call id.
    pub call_id: String,
    /// Where the agent works, on the host (None: the workspace root).
    pub working_dir: Option<std::path::PathBuf>,
    /// Turns true when the call moves to the background: it then frees its
    /// instance slot for foreground calls (and holds a background one).
    pub detach: Option<tokio::sync::watch::Receiver<bool>>,
    /// Where the programs the call starts (or is refused) are recorded.
    pub programs: Option<ActivityLog>,
    /// Nobody waits for the call to end: the model started it as a
    /// background job, or it runs where a long call moves to one. A tool
    /// may then use its whole time budget instead of a short default.
    pub background: bool,
    /// The call was given the network: its programs have it when the
    /// plugin's are on request (a rule or the operator's approval gave it
    /// to this call). Without it, they run with no network.
    pub network: bool,
}

/// What one call did that its receipt records, as it happened.
pub type ActivityLog = std::sync::Arc<std::sync::Mutex<CallActivity>>;

/// The programs one call started (or was refused) and the HTTP requests
/// it made (or was refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallActivity {
    pub programs: Vec<ProgramRun>,
    pub http: Vec<HttpExchange>,
    /// Requests past the most a receipt lists, counted.
    pub http_unlisted: u64,
    /// File accesses the host refused (what the host keeps, protected
    /// paths), each with why; at most [`MAX_REFUSALS`] listed.
    pub files_refused: Vec<String>,
    /// Model calls made for the call's MCP server (sampling).
    pub model_calls: Vec<ModelUse>,
}

/// One model call an MCP server asked sandcrab to make while it answered
/// a call (sampling): who asked, the model, what it took. No prompt, no
/// answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelUse {
    /// `MCP server NAME`.
    pub asker: String,
    pub model: String,
    /// The tokens charged to the session for it (input, of which cached,
    /// and output): a replay charges the same.
    pub input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// The cost the provider reported, in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
    pub duration_ms: u64,
    /// Why it was refused or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl ModelUse {
    /// One line for receipts.
    pub fn line(&self) -> String {
        match &self.refused {
            Some(why) => format!("{} asked {} REFUSED ({why})", self.asker, self.model),
            None => format!(
                "{} asked {}: {} in, {} out, {} ms",
                self.asker, self.model, self.input_tokens, self.output_tokens, self.duration_ms
            ),
        }
    }
}

/// Most refused file accesses one receipt lists.
pub const MAX_REFUSALS: usize = 32;

impl CallActivity {
    /// Record a refused file access (once each, within the bound).
    pub fn refuse_file(&mut self, why: String) {
        if self.files_refused.len() < MAX_REFUSALS && !self.files_refused.contains(&why) {
            self.files_refused.push(why);
        }
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}

/// One HTTP request a call made: method, origin, what answered and how
/// much. Names only: no header value, no body, no query string.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HttpExchange {
    pub method: String,
    /// `https://api.github.com` (the scheme, host and port asked for).
    pub origin: String,
    /// The address connected to (after the checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The response's status (None: no response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub duration_ms: u64,
    /// The credential the host added (header, origin and variable names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// Why it was refused or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl HttpExchange {
    /// A record of `request`, before anything is known of its fate: the
    /// method and the scheme and authority (no user name, no path), each
    /// cut to a sane length.
    pub fn started<B>(request: &http::Request<B>) -> Self {
        let uri = request.uri();
        let authority = uri
            .authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default())
            .unwrap_or_default();
        let origin = match uri.scheme_str() {
            Some(scheme) => format!("{scheme}://{authority}"),
            None => authority.to_string(),
        };
        HttpExchange {
            method: clip(request.method().as_str(), 32),
            origin: clip(&origin, 300),
            ..Default::default()
        }
    }

    /// One line: `GET https://api.github.com → 200 (1.2 KiB, 35 ms)`.
    pub fn line(&self) -> String {
        let fate = match (&self.refused, self.status) {
            (Some(why), _) => format!("refused: {why}"),
            (None, Some(status)) => format!(
                "{status} ({} bytes out, {} bytes in, {} ms)",
                self.request_bytes, self.response_bytes, self.duration_ms
            ),
            (None, None) => "no response".into(),
        };
        let credential = self
            .credential
            .as_deref()
            .map(|c| format!(" with {c}"))
            .unwrap_or_default();
        format!("{} {}{credential} → {fate}", self.method, self.origin)
    }
}

/// One program a call asked for: what it was, how it was confined, and
/// how it ended (or why it was refused).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgramRun {
    /// The program as the guest named it.
    pub program: String,
    /// How it was confined (None: refused before it was started).
    pub confinement: Option<ProgramConfinement>,
    /// Exit code (None: ended by a signal, or never ran).
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Why it did not run.
    pub refused: Option<String>,
}

/// What a program's confinement allowed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgramConfinement {
    pub mode: String,
    pub network: bool,
    pub read_everywhere: bool,
    pub read: Vec<String>,
    pub write: Vec<String>,
    pub protected: Vec<String>,
}

impl ProgramConfinement {
    /// From the spec it was confined by.
    pub fn of(spec: &crate::process::ConfinementSpec) -> Self {
        let paths = |v: &[std::path::PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
        ProgramConfinement {
            mode: spec.mode.to_string(),
            network: spec.network,
            read_everywhere: spec.read_everywhere,
            read: paths(&spec.read),
            write: paths(&spec.write),
            protected: spec
                .protected
                .as_ref()
                .map(|ws| ws.paths.written().to_vec())
                .unwrap_or_default(),
        }
    }
}

/// A tool's successful answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub text: String,
    /// The tool stopped its work because it ran out of time.
    pub timed_out: bool,
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput {
            text,
            timed_out: false,
        }
    }
}

/// A failure the tool itself reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolFailure {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("denied: {0}")]
    Denied(String),
    #[error("{0}")]
    Failed(String),
}

/// Facts a provider profile plugin exports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileInfo {
    pub id: String,
    /// Empty: the operator names the model (or the server is asked).
    pub default_model: String,
    pub context_window: u64,
    pub parallel_tool_calls: bool,
    pub tool_names: Vec<String>,
    pub project_doc_files: Vec<String>,
    /// Output token limit of an answer (0: the host's default for the model).
    pub max_output_tokens: u32,
}

/// A message handed to a summarizer plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryMessage {
    pub role: String,
    pub content: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_output_limits_stay_within_the_hosts_bounds() {
        let huge = TruncationLimits::declared(u32::MAX, Some(0), TruncateMode::Tail);
        assert_eq!(huge.chars, TruncationLimits::MAX_DECLARED_CHARS);
        assert_eq!(huge.lines, Some(1));
        assert_eq!(
            TruncationLimits::declared(0, None, TruncateMode::HeadTail).chars,
            1
        );
    }
}
