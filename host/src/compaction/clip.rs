//! The clip-archive: the system message that stands for the compacted
//! history, showing the earliest and the most recent summary batches.

use super::batch::SummaryBatch;

/// How the message starts (and how it is recognized).
pub const CLIP_HEADER: &str = "[Context Summary";

/// The summary message for `batches` (oldest first): the first
/// `clip_first` under "Earliest context", the last `clip_last` under
/// "Recent context", and how many were left out between them.
pub fn build_clip_archive(batches: &[SummaryBatch], clip_first: usize, clip_last: usize) -> String {
    let total: usize = batches.iter().map(|b| b.message_count).sum();
    let mut out = format!(
        "{CLIP_HEADER} — {} earlier messages were compacted into {} summary batches]\n",
        total,
        batches.len()
    );
    let (first, omitted, last) = if batches.len() <= clip_first + clip_last {
        let split = clip_first.min(batches.len());
        (&batches[..split], 0, &batches[split..])
    } else {
        (
            &batches[..clip_first],
            batches.len() - clip_first - clip_last,
            &batches[batches.len() - clip_last..],
        )
    };
    out.push_str("\n## Earliest context\n");
    for b in first {
        out.push_str(&format!("\n{}\n", b.to_text()));
    }
    if omitted > 0 {
        out.push_str(&format!(
            "\n({omitted} earlier summaries omitted — use memory_read to search them)\n"
        ));
    }
    if !last.is_empty() {
        out.push_str("\n## Recent context\n");
        for b in last {
            out.push_str(&format!("\n{}\n", b.to_text()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batches(n: usize) -> Vec<SummaryBatch> {
        (1..=n)
            .map(|i| SummaryBatch {
                depth: 0,
                start_time: format!("2026-01-01T00:{i:02}:00Z"),
                end_time: format!("2026-01-01T00:{i:02}:59Z"),
                message_count: 3,
                summary: format!("summary {i}"),
            })
            .collect()
    }

    fn section<'a>(text: &'a str, name: &str) -> &'a str {
        let start = text.find(name).unwrap();
        let rest = &text[start..];
        let end = rest[name.len()..]
            .find("## ")
            .map_or(rest.len(), |e| e + name.len());
        &rest[..end]
    }

    #[test]
    fn ac3_1_the_first_and_last_batches_are_shown() {
        let text = build_clip_archive(&batches(6), 2, 2);
        let early = section(&text, "## Earliest context");
        let recent = section(&text, "## Recent context");
        assert!(
            early.contains("summary 1") && early.contains("summary 2"),
            "{text}"
        );
        assert!(
            recent.contains("summary 5") && recent.contains("summary 6"),
            "{text}"
        );
        for hidden in ["summary 3", "summary 4"] {
            assert!(!text.contains(hidden), "{text}");
        }
    }

    #[test]
    fn ac3_2_omitted_count_and_memory_read_hint() {
        let text = build_clip_archive(&batches(6), 2, 2);
        assert!(text.contains("2 earlier summaries omitted"), "{text}");
        assert!(text.contains("memory_read"), "{text}");
    }

    #[test]
    fn ac3_4_few_batches_are_all_shown_without_omission() {
        let text = build_clip_archive(&batches(3), 2, 2);
        for i in 1..=3 {
            assert!(text.contains(&format!("summary {i}")), "{text}");
        }
        assert!(!text.contains("omitted"), "{text}");
        assert!(text.starts_with(CLIP_HEADER));
        assert!(text.contains("depth 0 | 2026-01-01T00:01:00Z to"), "{text}");
    }
}
