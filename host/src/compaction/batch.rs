//! A summary batch: one summary of consecutive turns (depth 0) or of
//! earlier batches (depth n + 1), with the time range and number of
//! messages it covers, stored as text with a header that parses back.

/// One summary batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryBatch {
    /// 0: summarizes turns; n + 1: summarizes batches of depth ≤ n.
    pub depth: u32,
    /// Time of the first and last message covered (RFC 3339).
    pub start_time: String,
    pub end_time: String,
    /// Messages covered (all the way down).
    pub message_count: usize,
    pub summary: String,
}

const OPEN: &str = "[Summary batch | depth ";

impl SummaryBatch {
    /// The stored form: header line, then the summary.
    pub fn to_text(&self) -> String {
        format!(
            "{OPEN}{} | {} to {} | {} messages]\n{}",
            self.depth, self.start_time, self.end_time, self.message_count, self.summary
        )
    }
}

/// Read a batch back from its stored form (None if it is not one).
pub fn parse_batch_metadata(text: &str) -> Option<SummaryBatch> {
    let (header, summary) = text.split_once('\n').unwrap_or((text, ""));
    let inner = header.strip_prefix(OPEN)?.strip_suffix(" messages]")?;
    let mut parts = inner.split(" | ");
    let depth = parts.next()?.parse().ok()?;
    let (start, end) = parts.next()?.split_once(" to ")?;
    let count = parts.next()?.parse().ok()?;
    Some(SummaryBatch {
        depth,
        start_time: start.to_string(),
        end_time: end.to_string(),
        message_count: count,
        summary: summary.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ac2_2_batch_metadata_round_trips() {
        let b = SummaryBatch {
            depth: 2,
            start_time: "2026-01-01T00:00:00Z".into(),
            end_time: "2026-01-01T01:00:00Z".into(),
            message_count: 47,
            summary: "The user wants X.\nDecided Y.".into(),
        };
        assert_eq!(parse_batch_metadata(&b.to_text()), Some(b));
        assert_eq!(parse_batch_metadata("just text"), None);
    }
}
