//! Detecting an agent that repeats itself: the last tool-call signatures
//! (name + canonical arguments) form a repeating pattern of length 1, 2 or
//! 3 across the detection window.

use serde_json::Value;

/// A detected repetition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopFound {
    /// Length of the repeating pattern (1–3).
    pub pattern_length: usize,
    /// How many calls the repetition spans.
    pub calls: usize,
    /// The pattern's signatures.
    pub pattern: Vec<String>,
}

/// Signatures seen since the last detection.
#[derive(Debug, Default)]
pub struct LoopDetector {
    window: usize,
    signatures: Vec<String>,
}

impl LoopDetector {
    /// Detect over the last `window` calls (at least 2).
    pub fn new(window: usize) -> Self {
        LoopDetector {
            window: window.max(2),
            signatures: Vec::new(),
        }
    }

    /// Record one tool call.
    pub fn record(&mut self, name: &str, arguments: &Value) {
        self.signatures.push(signature(name, arguments));
    }

    /// Check for a loop; a found loop starts a fresh window.
    pub fn check(&mut self) -> Option<LoopFound> {
        for len in 1..=3 {
            let span = self.window.max(2 * len);
            if self.signatures.len() < span {
                continue;
            }
            let tail = &self.signatures[self.signatures.len() - span..];
            if (len..span).all(|i| tail[i] == tail[i - len]) {
                let found = LoopFound {
                    pattern_length: len,
                    calls: span,
                    pattern: tail[..len].to_vec(),
                };
                self.signatures.clear();
                return Some(found);
            }
        }
        None
    }
}

/// `name(canonical JSON arguments)`: object keys sorted.
pub fn signature(name: &str, arguments: &Value) -> String {
    format!("{name}({})", canonical(arguments))
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap_or_default(),
                        canonical(&map[*k])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn five_identical_calls_are_a_loop() {
        let mut d = LoopDetector::new(5);
        for i in 1..=4 {
            d.record("read_file", &json!({"file_path": "a", "limit": 5}));
            assert_eq!(d.check(), None, "not after {i}");
        }
        d.record("read_file", &json!({"limit": 5, "file_path": "a"}));
        let found = d.check().expect("the fifth identical call is a loop");
        assert_eq!(found.pattern_length, 1);
        assert_eq!(
            found.pattern,
            vec![r#"read_file({"file_path":"a","limit":5})"#]
        );
        d.record("read_file", &json!({"file_path": "a", "limit": 5}));
        assert_eq!(d.check(), None, "a detection starts a fresh window");
    }

    #[test]
    fn alternating_and_three_step_patterns_are_loops() {
        let mut d = LoopDetector::new(5);
        for sig in ["a", "b", "a", "b", "a"] {
            d.record(sig, &json!({}));
        }
        assert_eq!(d.check().map(|f| f.pattern_length), Some(2));
        let mut d = LoopDetector::new(5);
        for sig in ["a", "b", "c", "a", "b", "c"] {
            assert!(d.check().is_none());
            d.record(sig, &json!({}));
        }
        assert_eq!(d.check().map(|f| f.pattern_length), Some(3));
    }

    #[test]
    fn varied_calls_are_not_loops() {
        let mut d = LoopDetector::new(5);
        for i in 0..20 {
            d.record("read_file", &json!({"file_path": format!("f{i}")}));
            assert!(d.check().is_none());
        }
    }
}
