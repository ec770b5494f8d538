//! Reciprocal rank fusion: two rankings of the same items merged by
//! `Σ 1 / (K + rank)`, each item remembering which ranking found it.

use std::collections::HashMap;

/// The usual constant: it keeps one list's first place from drowning the
/// other list.
pub const K: f64 = 60.0;

/// Which ranking found an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    pub by_words: bool,
    pub by_meaning: bool,
}

impl Found {
    /// `words`, `meaning` or `words and meaning`.
    pub fn describe(self) -> &'static str {
        match (self.by_words, self.by_meaning) {
            (true, true) => "words and meaning",
            (true, false) => "words",
            (false, true) => "meaning",
            (false, false) => "nothing",
        }
    }
}

/// Fuse `words` and `meaning` (ids, best first); the ids by fused score,
/// best first (ties: the order words found them, then meaning).
pub fn fuse(words: &[i64], meaning: &[i64]) -> Vec<(i64, Found)> {
    let mut score: HashMap<i64, (f64, Found, usize)> = HashMap::new();
    for (rank, id) in words.iter().enumerate() {
        let e = score.entry(*id).or_insert((0.0, Found::default(), rank));
        e.0 += 1.0 / (K + rank as f64 + 1.0);
        e.1.by_words = true;
    }
    for (rank, id) in meaning.iter().enumerate() {
        let e = score
            .entry(*id)
            .or_insert((0.0, Found::default(), words.len() + rank));
        e.0 += 1.0 / (K + rank as f64 + 1.0);
        e.1.by_meaning = true;
    }
    let mut out: Vec<(i64, (f64, Found, usize))> = score.into_iter().collect();
    out.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(a.1.2.cmp(&b.1.2)));
    out.into_iter()
        .map(|(id, (_, found, _))| (id, found))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_both_rankings_found_comes_first_and_says_so() {
        let fused = fuse(&[1, 2, 3], &[3, 4]);
        assert_eq!(fused[0].0, 3);
        assert_eq!(fused[0].1.describe(), "words and meaning");
        let ids: Vec<i64> = fused.iter().map(|f| f.0).collect();
        assert_eq!(ids.len(), 4);
        assert_eq!(
            fused.iter().find(|f| f.0 == 4).unwrap().1.describe(),
            "meaning"
        );
    }
}
