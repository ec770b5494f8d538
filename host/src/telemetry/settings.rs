//! Where telemetry goes: `[telemetry]` in the operator's file, else the
//! standard `OTEL_EXPORTER_OTLP_*` variables. Off unless one names an
//! endpoint; only OTLP over HTTP with protobuf is spoken.

use std::collections::BTreeMap;

use serde::Deserialize;

/// What may be captured besides the counts and names (each off unless
/// listed in `capture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// The messages sent to the model (`gen_ai.input.messages`).
    InputMessages,
    /// The model's answer (`gen_ai.output.messages`).
    OutputMessages,
    /// A tool call's arguments (`gen_ai.tool.call.arguments`).
    ToolArguments,
    /// A tool call's result (`gen_ai.tool.call.result`).
    ToolResults,
}

/// `[telemetry]`, operator-only.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TelemetryToml {
    /// The collector's base URL (`/v1/traces` and `/v1/metrics` are added).
    pub endpoint: Option<String>,
    /// The traces URL as is (over `endpoint`).
    pub traces_endpoint: Option<String>,
    /// The metrics URL as is (over `endpoint`).
    pub metrics_endpoint: Option<String>,
    /// Headers sent with every export (a collector's key).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `service.name` (default `sandcrab`).
    pub service_name: Option<String>,
    /// Content to capture; none by default.
    #[serde(default)]
    pub capture: Vec<Content>,
}

/// Where to post.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub traces: String,
    pub metrics: Option<String>,
    pub headers: Vec<(String, String)>,
}

/// The exporter's settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub endpoints: Endpoints,
    pub service_name: String,
    pub capture: Vec<Content>,
}

/// Why telemetry cannot be turned on as asked.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    #[error("{what} = {url:?} is not an http:// or https:// URL")]
    NotHttp { what: &'static str, url: String },
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0} is not spoken: sandcrab exports OTLP over HTTP with protobuf only (set it to http/protobuf, and the endpoint to the collector's HTTP port, usually 4318)"
    )]
    Protocol(String),
}

impl TelemetryToml {
    /// The settings in force with the environment `env` (None: off).
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Resolved>, SettingsError> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        for signal in ["TRACES_", "METRICS_"] {
            if let Some(protocol) = env(&format!("OTEL_EXPORTER_OTLP_{signal}PROTOCOL"))
                .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
                && protocol != "http/protobuf"
            {
                return Err(SettingsError::Protocol(protocol));
            }
        }
        let base = self
            .endpoint
            .clone()
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let below = |path: &str| {
            base.as_ref()
                .map(|b| format!("{}/{path}", b.trim_end_matches('/')))
        };
        let traces = self
            .traces_endpoint
            .clone()
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| below("v1/traces"));
        let Some(traces) = traces else {
            return Ok(None);
        };
        let metrics = self
            .metrics_endpoint
            .clone()
            .or_else(|| env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
            .or_else(|| below("v1/metrics"));
        for (what, url) in [
            ("the traces endpoint", Some(&traces)),
            ("the metrics endpoint", metrics.as_ref()),
        ] {
            if let Some(url) = url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(SettingsError::NotHttp {
                    what,
                    url: url.clone(),
                });
            }
        }
        let mut headers: Vec<(String, String)> = env("OTEL_EXPORTER_OTLP_HEADERS")
            .map(|list| {
                list.split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        headers.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(Some(Resolved {
            endpoints: Endpoints {
                traces,
                metrics,
                headers,
            },
            service_name: self
                .service_name
                .clone()
                .or_else(|| env("OTEL_SERVICE_NAME"))
                .unwrap_or_else(|| "sandcrab".into()),
            capture: self.capture.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn off_unless_an_endpoint_is_named_and_the_file_wins() {
        let file = TelemetryToml::default();
        assert_eq!(file.resolve(env(&[])), Ok(None));
        let on = file
            .resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.endpoints.traces, "http://c:4318/v1/traces");
        assert_eq!(
            on.endpoints.metrics.as_deref(),
            Some("http://c:4318/v1/metrics")
        );
        let file = TelemetryToml {
            traces_endpoint: Some("http://mine/t".into()),
            ..Default::default()
        };
        let on = file
            .resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.endpoints.traces, "http://mine/t");
        assert_eq!(
            file.resolve(env(&[("OTEL_SDK_DISABLED", "true")])),
            Ok(None)
        );
        assert!(matches!(
            file.resolve(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])),
            Err(SettingsError::Protocol(_))
        ));
    }
}
