//! Metrics, kept in the process as cumulative sums and histograms and
//! exported with every batch: tokens and operation durations as the GenAI
//! conventions name them, tool calls and denials as sandcrab's own.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::proto::{self, Message, Value};

/// The GenAI conventions' advised buckets for token counts.
const TOKEN_BOUNDS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// And for durations in seconds.
const DURATION_BOUNDS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The most sets of attributes one metric keeps apart.
const MAX_POINTS: usize = 256;
/// The attribute of the point that counts the rest.
const OVERFLOW: &str = "otel.metric.overflow";

/// How a metric is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A monotonic cumulative sum of whole numbers.
    Counter,
    /// A histogram of token counts.
    Tokens,
    /// A histogram of seconds.
    Seconds,
}

impl Kind {
    fn bounds(self) -> &'static [f64] {
        match self {
            Kind::Counter => &[],
            Kind::Tokens => TOKEN_BOUNDS,
            Kind::Seconds => DURATION_BOUNDS,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Kind::Counter => "{call}",
            Kind::Tokens => "{token}",
            Kind::Seconds => "s",
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Point {
    attributes: Vec<(String, Value)>,
    count: u64,
    sum: f64,
    buckets: Vec<u64>,
}

type Series = BTreeMap<(String, Kind), BTreeMap<String, Point>>;

/// Every metric of the process.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<Series>,
    started_ns: u64,
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            series: Mutex::default(),
            started_ns: super::trace::now_ns(),
        }
    }

    /// Record `value` for metric `name` with `attributes`.
    pub fn record(&self, name: &str, kind: Kind, attributes: &[(&str, Value)], value: f64) {
        let Ok(mut series) = self.series.lock() else {
            return;
        };
        let mut key: String = attributes
            .iter()
            .map(|(k, v)| format!("{k}={v:?};"))
            .collect();
        let points = series.entry((name.to_string(), kind)).or_default();
        let mut attributes: Vec<(String, Value)> = attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        // Names the model chooses (a tool's) could grow a metric without
        // end: past the limit, every new set of attributes is counted as
        // one, as OpenTelemetry's SDKs do.
        if points.len() >= MAX_POINTS && !points.contains_key(&key) {
            key = OVERFLOW.to_string();
            attributes = vec![(OVERFLOW.to_string(), Value::Bool(true))];
        }
        let point = points.entry(key).or_insert_with(|| Point {
            attributes,
            buckets: vec![0; kind.bounds().len() + 1],
            ..Point::default()
        });
        point.count += 1;
        point.sum += if value.is_finite() { value } else { 0.0 };
        if kind != Kind::Counter {
            let at = kind.bounds().iter().take_while(|b| value > **b).count();
            point.buckets[at] += 1;
        } else {
            // A counter's count is its sum.
            point.count = point.sum as u64;
        }
    }

    /// `collector.metrics.v1.ExportMetricsServiceRequest` of everything
    /// so far (None: nothing recorded yet).
    pub fn encode(&self, resource: &[(String, Value)]) -> Option<Vec<u8>> {
        let series = self.series.lock().ok()?;
        if series.is_empty() {
            return None;
        }
        let now = super::trace::now_ns();
        Some(proto::export_request(
            resource,
            series
                .iter()
                .map(|((name, kind), points)| self.metric(name, *kind, points, now)),
        ))
    }

    fn metric(
        &self,
        name: &str,
        kind: Kind,
        points: &BTreeMap<String, Point>,
        now: u64,
    ) -> Message {
        const CUMULATIVE: u64 = 2;
        let mut metric = Message::new();
        metric.string(1, name).string(3, kind.unit());
        let mut data = Message::new();
        for point in points.values() {
            let mut p = Message::new();
            p.fixed64(2, self.started_ns).fixed64(3, now);
            if kind == Kind::Counter {
                p.sfixed64(6, point.count as i64);
                proto::attributes(&mut p, 7, &point.attributes);
            } else {
                p.fixed64(4, point.count)
                    .double(5, point.sum)
                    .packed_fixed64(6, &point.buckets)
                    .packed_double(7, kind.bounds());
                proto::attributes(&mut p, 9, &point.attributes);
            }
            data.message(1, p);
        }
        data.varint(2, CUMULATIVE);
        if kind == Kind::Counter {
            data.varint(3, 1);
            metric.message(7, data);
        } else {
            metric.message(9, data);
        }
        metric
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_keeps_a_bounded_number_of_attribute_sets() {
        let metrics = Metrics::new();
        for i in 0..1000 {
            let name = Value::from(format!("tool-{i}"));
            metrics.record("calls", Kind::Counter, &[("tool", name)], 1.0);
        }
        let series = metrics.series.lock().unwrap();
        let points = &series[&("calls".to_string(), Kind::Counter)];
        assert_eq!(points.len(), MAX_POINTS + 1);
        assert_eq!(points[OVERFLOW].count, 1000 - MAX_POINTS as u64);
    }
}
