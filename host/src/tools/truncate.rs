//! Truncating tool output before the model sees it: characters first, then
//! lines. Limits are per tool (what the tool declares, overridable in the config's
//! `[truncation]` table); markers say how much was removed and that the
//! full output is in the event stream.

use std::collections::BTreeMap;

pub use crate::plugin::{TruncateMode, TruncationLimits};

/// Limits for every tool: the operator's `[truncation]` for a tool, else
/// what the tool declared in its spec, else the fallback.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TruncationPolicy {
    overrides: BTreeMap<String, TruncationLimits>,
    /// For tools that declare nothing and are not named.
    pub fallback: TruncationLimits,
}

impl Default for TruncationPolicy {
    fn default() -> Self {
        TruncationPolicy {
            overrides: BTreeMap::new(),
            fallback: TruncationLimits::new(30_000, TruncateMode::HeadTail, Some(1_000)),
        }
    }
}

impl TruncationPolicy {
    /// Defaults with `[truncation]` overrides applied, e.g.
    /// `shell = { chars = 60000, mode = "head_tail", lines = 512 }`.
    pub fn with_overrides(overrides: &BTreeMap<String, TruncationLimits>) -> Self {
        let mut policy = TruncationPolicy::default();
        for (tool, limits) in overrides {
            if tool == "default" {
                policy.fallback = *limits;
            } else {
                policy.overrides.insert(tool.clone(), *limits);
            }
        }
        policy
    }

    /// The limits of `tool`, which declared `declared` in its spec.
    pub fn limits(&self, tool: &str, declared: Option<TruncationLimits>) -> TruncationLimits {
        self.overrides
            .get(tool)
            .copied()
            .or(declared)
            .unwrap_or(self.fallback)
    }

    /// Truncate the output of `tool` (which declared `declared`).
    pub fn apply(&self, tool: &str, declared: Option<TruncationLimits>, output: &str) -> String {
        truncate(output, self.limits(tool, declared))
    }
}

/// Truncate `output` to `limits`: characters first, then lines. Output
/// within the limits is returned unchanged.
pub fn truncate(output: &str, limits: TruncationLimits) -> String {
    let by_chars = truncate_chars(output, limits.chars, limits.mode);
    match limits.lines {
        Some(max_lines) => truncate_lines(&by_chars, max_lines, limits.mode).unwrap_or(by_chars),
        None => by_chars,
    }
}

fn truncate_chars(output: &str, max: usize, mode: TruncateMode) -> String {
    // Fast path: fewer bytes than the limit means fewer characters.
    if output.len() <= max {
        return output.to_string();
    }
    let total = output.chars().count();
    if total <= max {
        return output.to_string();
    }
    let removed = total - max;
    match mode {
        TruncateMode::HeadTail => {
            let head = max / 2;
            let tail = max - head;
            format!(
                "{}\n\n[WARNING: Tool output was truncated. {removed} characters were removed from the middle. The full output is available in the event stream. If you need specific parts, re-run the tool with more targeted parameters.]\n\n{}",
                &output[..byte_at_char(output, head)],
                &output[byte_from_end(output, tail)..]
            )
        }
        TruncateMode::Tail => format!(
            "[WARNING: Tool output was truncated. The first {removed} characters were removed. The full output is available in the event stream.]\n\n{}",
            &output[byte_from_end(output, max)..]
        ),
    }
}

/// None when `output` has at most `max` lines.
fn truncate_lines(output: &str, max: usize, mode: TruncateMode) -> Option<String> {
    let total = output.split('\n').count();
    if total <= max {
        return None;
    }
    let lines: Vec<&str> = output.split('\n').collect();
    let omitted = total - max;
    Some(match mode {
        TruncateMode::HeadTail => {
            let head = max / 2;
            let tail = max - head;
            format!(
                "{}\n[WARNING: Tool output was truncated. {omitted} lines were removed from the middle. The full output is available in the event stream.]\n{}",
                lines[..head].join("\n"),
                lines[total - tail..].join("\n")
            )
        }
        TruncateMode::Tail => format!(
            "[WARNING: Tool output was truncated. The first {omitted} lines were removed. The full output is available in the event stream.]\n{}",
            lines[total - max..].join("\n")
        ),
    })
}

/// Byte offset of the `n`th character.
fn byte_at_char(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// Byte offset where the last `n` characters start.
fn byte_from_end(s: &str, n: usize) -> usize {
    if n == 0 {
        return s.len();
    }
    s.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TruncateMode::{HeadTail, Tail};

    fn limits(chars: usize, mode: TruncateMode, lines: Option<usize>) -> TruncationLimits {
        TruncationLimits { chars, mode, lines }
    }

    /// What the shell and read_file tools declare in their specs.
    const SHELL: Option<TruncationLimits> =
        Some(TruncationLimits::new(30_000, HeadTail, Some(256)));
    const READ_FILE: Option<TruncationLimits> = Some(TruncationLimits::new(50_000, HeadTail, None));

    #[test]
    fn short_output_is_untouched() {
        let short = "x".repeat(100);
        assert_eq!(
            TruncationPolicy::default().apply("shell", SHELL, &short),
            short
        );
        assert!(
            !TruncationPolicy::default()
                .apply("shell", SHELL, &short)
                .contains("WARNING")
        );
    }

    #[test]
    fn exactly_at_the_limit_stays_one_over_truncates() {
        for mode in [HeadTail, Tail] {
            let at = "a".repeat(1000);
            assert_eq!(truncate(&at, limits(1000, mode, None)), at);
            let over = "a".repeat(1001);
            let out = truncate(&over, limits(1000, mode, None));
            assert!(
                out.contains("WARNING: Tool output was truncated"),
                "{mode:?}"
            );
            assert!(
                out.contains("1 characters were removed") || out.contains("first 1 characters"),
                "{out}"
            );
        }
        let lines_at = vec!["l"; 256].join("\n");
        assert_eq!(
            truncate(&lines_at, limits(100_000, HeadTail, Some(256))),
            lines_at
        );
        let lines_over = vec!["l"; 257].join("\n");
        assert!(
            truncate(&lines_over, limits(100_000, HeadTail, Some(256)))
                .contains("1 lines were removed")
        );
    }

    #[test]
    fn head_tail_keeps_both_ends_and_tail_keeps_the_end() {
        let text: String = (0..2000).map(|i| format!("{i:05}")).collect();
        let ht = truncate(&text, limits(100, HeadTail, None));
        assert!(
            ht.starts_with("00000000010") && ht.ends_with("0199801999"),
            "{ht}"
        );
        assert!(ht.contains("9900 characters were removed from the middle"));
        let tail = truncate(&text, limits(100, Tail, None));
        assert!(tail.ends_with("0199801999") && !tail.contains("00000"));
    }

    #[test]
    fn shell_defaults_200k_chars_then_256_lines() {
        // Seed phase 4 step 1: characters first, then lines, with a marker.
        let text: String = (0..40_000).map(|i| format!("{i}\n")).collect::<String>();
        assert!(text.len() > 200_000);
        let out = TruncationPolicy::default().apply("shell", SHELL, &text);
        assert!(
            out.contains("[WARNING: Tool output was truncated."),
            "{out}"
        );
        assert!(
            out.contains("lines were removed from the middle"),
            "line marker present"
        );
        // 256 kept lines plus the marker line.
        assert!(
            out.split('\n').count() <= 257,
            "{}",
            out.split('\n').count()
        );
        assert!(out.chars().count() < 31_000);
    }

    #[test]
    fn huge_outputs_are_truncated_without_crashing() {
        let ten_mb = "y".repeat(10_000_000);
        let out = TruncationPolicy::default().apply("read_file", READ_FILE, &ten_mb);
        assert!(out.len() < 51_000);
        let two_long_lines = format!("{}\n{}", "a".repeat(5_000_000), "b".repeat(5_000_000));
        let out2 = TruncationPolicy::default().apply("shell", SHELL, &two_long_lines);
        assert!(out2.starts_with('a') && out2.ends_with('b'));
        assert!(out2.len() < 31_000);
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let text = "é".repeat(3000);
        for mode in [HeadTail, Tail] {
            let out = truncate(&text, limits(1001, mode, None));
            assert_eq!(out.matches('é').count(), 1001);
        }
    }

    #[test]
    fn overrides_replace_defaults() {
        let overrides: BTreeMap<String, TruncationLimits> = toml::from_str("shell = { chars = 10, mode = \"tail\", lines = 2 }\ndefault = { chars = 5, mode = \"tail\" }").unwrap();
        let policy = TruncationPolicy::with_overrides(&overrides);
        let declared = limits(99, HeadTail, None);
        assert_eq!(
            policy.limits("shell", Some(declared)),
            limits(10, Tail, Some(2))
        );
        assert_eq!(policy.limits("third_party", None), limits(5, Tail, None));
        // What a tool declares beats the fallback, not the operator.
        assert_eq!(policy.limits("third_party", Some(declared)), declared);
    }
}
