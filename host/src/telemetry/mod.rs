//! OpenTelemetry export, off by default: spans for each input
//! (`invoke_agent`), model call (`chat`) and tool call (`execute_tool`)
//! in the GenAI semantic conventions' terms, with sandcrab's own
//! attributes from each call's receipt (the principal, the sandbox, the
//! verdict and the rule that allowed it, programs and HTTP requests), and
//! metrics for tokens, durations, calls and denials; sent as OTLP/HTTP
//! protobuf to the collector `[telemetry]` or `OTEL_EXPORTER_OTLP_*`
//! names. Never a prompt, an argument or an output unless `capture` lists
//! it; never a secret the host knows (see `secrets`).

mod export;
pub mod genai;
pub mod metrics;
pub mod names;
mod proto;
mod secrets;
pub mod settings;
mod trace;

use std::sync::OnceLock;
use std::time::Duration;

pub use metrics::Kind as MetricKind;
pub use proto::Value;
pub use settings::{Content, SettingsError, TelemetryToml};
pub use trace::{Span, SpanContext, SpanKind};

static EXPORTER: OnceLock<export::Exporter> = OnceLock::new();
static CAPTURE: OnceLock<Vec<Content>> = OnceLock::new();

/// Whether spans are being exported.
pub fn enabled() -> bool {
    EXPORTER.get().is_some()
}

fn exporter() -> Option<&'static export::Exporter> {
    EXPORTER.get()
}

/// Turn export on as `settings` and the environment `env` say (once per
/// process; later calls change nothing). True when it is on.
pub fn init(
    settings: &TelemetryToml,
    env: impl Fn(&str) -> Option<String>,
) -> Result<bool, SettingsError> {
    if enabled() {
        return Ok(true);
    }
    let Some(resolved) = settings.resolve(&env)? else {
        return Ok(false);
    };
    let resource = vec![
        (
            "service.name".to_string(),
            Value::from(resolved.service_name),
        ),
        (
            "service.version".to_string(),
            Value::from(env!("CARGO_PKG_VERSION")),
        ),
    ];
    let _ = CAPTURE.set(resolved.capture);
    match export::Exporter::start(resolved.endpoints, resource) {
        Ok(exporter) => {
            let _ = EXPORTER.set(exporter);
            Ok(true)
        }
        Err(e) => {
            tracing::warn!("telemetry is off: the exporter thread did not start: {e}");
            Ok(false)
        }
    }
}

/// Send what is waiting, at most `limit`; the spans dropped because the
/// queue was full (the collector slow or gone).
pub fn shutdown(limit: Duration) -> u64 {
    exporter().map_or(0, |e| e.flush(limit))
}

/// Whether the operator turned the capture of `content` on.
pub fn captures(content: Content) -> bool {
    enabled() && CAPTURE.get().is_some_and(|c| c.contains(&content))
}

/// Record `value` for metric `name`.
pub fn record(name: &str, kind: MetricKind, attributes: &[(&str, Value)], value: f64) {
    if let Some(exporter) = exporter() {
        exporter.metrics.record(name, kind, attributes, value);
    }
}

tokio::task_local! {
    static CURRENT: Option<SpanContext>;
}

/// Run `work` with `context` as the parent of the spans it starts.
pub async fn within<F: std::future::Future>(context: Option<SpanContext>, work: F) -> F::Output {
    CURRENT.scope(context, work).await
}

/// The span the current work is part of, if any.
pub fn current() -> Option<SpanContext> {
    CURRENT.try_with(|c| *c).ok().flatten()
}
