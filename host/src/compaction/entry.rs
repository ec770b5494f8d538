//! The history as compaction sees it, where it may be cut, and chunks.

/// One turn of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    /// RFC 3339, UTC.
    pub timestamp: String,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// The text the summarizer reads (tool calls and results rendered).
    pub text: String,
    /// Ids of the tool calls this turn makes.
    pub calls: Vec<String>,
    /// Ids of the tool calls this turn answers.
    pub answers: Vec<String>,
}

/// Where to cut `entries`: everything before the returned index is
/// compressed, the rest kept verbatim. At least the last `keep_recent`
/// entries are kept, and the cut never separates a tool call from its
/// result: it moves earlier until every call before it is answered before
/// it (so the kept part is valid on its own for every provider).
pub fn split_history(entries: &[Entry], keep_recent: usize) -> usize {
    let mut cut = entries.len().saturating_sub(keep_recent);
    while cut > 0 {
        let answered_before: std::collections::HashSet<&str> = entries[..cut]
            .iter()
            .flat_map(|e| e.answers.iter().map(String::as_str))
            .collect();
        let open_call = entries[..cut].iter().rposition(|e| {
            e.calls
                .iter()
                .any(|c| !answered_before.contains(c.as_str()))
        });
        match open_call {
            // Keep from the turn whose call is unanswered before the cut.
            Some(i) => cut = i,
            None => break,
        }
    }
    cut
}

/// `entries` in chunks of at most `size` entries and, when given, at most
/// `tokens` estimated tokens (an entry larger than that is a chunk alone).
pub fn chunk_entries(entries: &[Entry], size: usize, tokens: Option<u64>) -> Vec<&[Entry]> {
    let size = size.max(1);
    let limit = tokens.unwrap_or(u64::MAX);
    let mut chunks = Vec::new();
    let (mut start, mut used) = (0, 0u64);
    for (i, entry) in entries.iter().enumerate() {
        let cost = crate::llm::estimate::text_tokens(&entry.text);
        if i > start && (i - start >= size || used + cost > limit) {
            chunks.push(&entries[start..i]);
            (start, used) = (i, 0);
        }
        used += cost;
    }
    if start < entries.len() {
        chunks.push(&entries[start..]);
    }
    chunks
}

/// Estimated tokens of `entries` (characters / 4).
pub fn estimate_tokens(entries: &[Entry]) -> u64 {
    (entries.iter().map(|e| e.text.len()).sum::<usize>() / 4) as u64
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn msg(i: usize) -> Entry {
        Entry {
            id: format!("t{i}"),
            timestamp: format!("2026-01-01T00:00:{i:02}Z"),
            role: if i.is_multiple_of(2) {
                "user"
            } else {
                "assistant"
            }
            .into(),
            text: format!("message number {i}"),
            calls: Vec::new(),
            answers: Vec::new(),
        }
    }

    pub fn msgs(n: usize) -> Vec<Entry> {
        (0..n).map(msg).collect()
    }

    #[test]
    fn ac1_6_the_last_keep_recent_entries_are_kept() {
        assert_eq!(split_history(&msgs(10), 5), 5);
        assert_eq!(split_history(&msgs(3), 5), 0);
    }

    #[test]
    fn the_cut_never_separates_a_call_from_its_result() {
        let mut h = msgs(10);
        h[4].calls = vec!["c1".into()];
        h[5].answers = vec!["c1".into()];
        // keep_recent 5 would cut between 4 (call) and 5 (result).
        assert_eq!(split_history(&h, 5), 4);
        // A call never answered (a round in flight) stays with what follows.
        let mut h = msgs(6);
        h[5].calls = vec!["c2".into()];
        assert_eq!(split_history(&h, 0), 5);
    }

    #[test]
    fn ac1_2_entries_are_chunked_by_chunk_size() {
        let h = msgs(10);
        let sizes: Vec<usize> = chunk_entries(&h, 3, None).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, [3, 3, 3, 1]);
        assert!(chunk_entries(&[], 3, None).is_empty());
        assert_eq!(chunk_entries(&h, 50, None).len(), 1);
    }

    #[test]
    fn a_batch_that_would_not_fit_the_summarizer_is_split() {
        let mut h = msgs(6);
        h[2].text = "x".repeat(400);
        // Each small entry is ~6 tokens, the large one 134.
        let sizes: Vec<usize> = chunk_entries(&h, 20, Some(50))
            .iter()
            .map(|c| c.len())
            .collect();
        assert_eq!(sizes, [2, 1, 3]);
        let all: usize = sizes.iter().sum();
        assert_eq!(all, 6);
    }
}
