//! Limits: the operator's override, else the request. A third-party
//! plugin's request above the host default needs the operator's grant;
//! nothing above the engine's ceiling is possible.

use super::decide::{Asking, Decided};
use super::grants::EffectiveLimits;
use super::schema::{PluginOrigin, limits};

pub(super) fn decide(asking: &Asking) -> Decided<EffectiveLimits> {
    let requested = &asking.manifest.limits;
    let origin = asking.origin;
    let op = asking.explicit.map(|g| g.limits).unwrap_or_default();
    let mut denied = Vec::new();
    let mut pick = |key: &str, asked: Option<u64>, granted: Option<u64>, default: u64, max: u64| {
        if let Some(granted) = granted {
            return granted.min(max);
        }
        let asked = asked.unwrap_or(default).min(max);
        if origin == PluginOrigin::ThirdParty && asked > default {
            denied.push(format!(
                "limits: {key} {asked} requested, {default} granted{}",
                asking.hint(&format!("limits = {{ {key} = {asked} }}"))
            ));
            return default;
        }
        asked
    };
    let granted = EffectiveLimits {
        memory_mb: pick(
            "memory_mb",
            requested.memory_mb,
            op.memory_mb,
            limits::DEFAULT_MEMORY_MB,
            limits::MAX_MEMORY_MB,
        ),
        timeout_ms: pick(
            "timeout_ms",
            requested.timeout_ms,
            op.timeout_ms,
            limits::DEFAULT_TIMEOUT_MS,
            limits::MAX_TIMEOUT_MS,
        ),
        max_instances: pick(
            "max_instances",
            requested.max_instances.map(u64::from),
            op.max_instances.map(u64::from),
            u64::from(limits::DEFAULT_MAX_INSTANCES),
            u64::from(limits::MAX_INSTANCES),
        ) as u32,
        http_request_kb: pick(
            "http_request_kb",
            requested.http_request_kb,
            op.http_request_kb,
            limits::DEFAULT_HTTP_REQUEST_KB,
            limits::MAX_HTTP_REQUEST_KB,
        ),
        http_response_kb: pick(
            "http_response_kb",
            requested.http_response_kb,
            op.http_response_kb,
            limits::DEFAULT_HTTP_RESPONSE_KB,
            limits::MAX_HTTP_RESPONSE_KB,
        ),
        http_timeout_ms: pick(
            "http_timeout_ms",
            requested.http_timeout_ms,
            op.http_timeout_ms,
            limits::DEFAULT_HTTP_TIMEOUT_MS,
            limits::MAX_TIMEOUT_MS,
        ),
        http_concurrent: pick(
            "http_concurrent",
            requested.http_concurrent.map(u64::from),
            op.http_concurrent.map(u64::from),
            u64::from(limits::DEFAULT_HTTP_CONCURRENT),
            u64::from(limits::MAX_HTTP_CONCURRENT),
        ) as u32,
        reuse: requested.reuse == Some(true) && op.reuse != Some(false),
    };
    Decided { granted, denied }
}
