//! The summarization prompt from a template (`[summarization] prompt`).

/// What `{existing_summary}` becomes when there is none.
pub const NO_PRIOR_SUMMARY: &str = "(no prior summary)";

/// Fill `template`: every `{persona}`, `{existing_summary}` and
/// `{messages}` is replaced.
pub fn interpolate_prompt(
    template: &str,
    persona: &str,
    existing_summary: &str,
    messages: &str,
) -> String {
    let existing = if existing_summary.trim().is_empty() {
        NO_PRIOR_SUMMARY
    } else {
        existing_summary
    };
    // One pass, so a placeholder inside a substituted value stays as is.
    let mut out = String::with_capacity(template.len() + messages.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let (value, len) = if tail.starts_with("{persona}") {
            (persona, "{persona}".len())
        } else if tail.starts_with("{existing_summary}") {
            (existing, "{existing_summary}".len())
        } else if tail.starts_with("{messages}") {
            (messages, "{messages}".len())
        } else {
            ("{", 1)
        };
        out.push_str(value);
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ac6_3_a_custom_template_is_used() {
        let out = interpolate_prompt("Summarize: {messages}", "", "", "[user] hi");
        assert_eq!(out, "Summarize: [user] hi");
    }

    #[test]
    fn ac6_4_every_placeholder_and_occurrence_is_replaced() {
        let out = interpolate_prompt(
            "{persona}|{existing_summary}|{messages}|{messages}|{persona}",
            "",
            "",
            "M",
        );
        assert_eq!(out, format!("|{NO_PRIOR_SUMMARY}|M|M|"));
        let out = interpolate_prompt("{existing_summary} {other}", "p", "S", "m");
        assert_eq!(out, "S {other}");
        // A value holding a placeholder is not expanded again.
        let out = interpolate_prompt("{messages}", "P", "", "{persona}");
        assert_eq!(out, "{persona}");
    }
}
