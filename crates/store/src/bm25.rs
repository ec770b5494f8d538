//! BM25 ranking of full-text matches, for a backend whose own ranking is
//! not BM25 (PostgreSQL's `ts_rank` has no inverse document frequency):
//! the database finds the blocks that hold any query word, this ranks
//! them as SQLite's FTS5 would (k1 = 1.2, b = 0.75).

use std::collections::HashMap;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The words of `text` as both backends index them: lower case, split at
/// anything not a letter or digit.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The collection a query is ranked against.
pub struct Collection {
    /// Documents in scope (the conversation, or all).
    pub documents: u64,
    /// Their average length in words.
    pub average_length: f64,
}

/// `candidates` (id, content) ranked best first for `query`'s words;
/// a candidate without any of them is left out.
pub fn rank(query: &[String], candidates: &[(i64, String)], all: &Collection) -> Vec<i64> {
    let mut docs: Vec<(i64, HashMap<&str, u32>, usize)> = Vec::new();
    let texts: Vec<(i64, Vec<String>)> = candidates
        .iter()
        .map(|(id, content)| (*id, words(content)))
        .collect();
    for (id, ws) in &texts {
        let mut tf: HashMap<&str, u32> = HashMap::new();
        for w in ws {
            *tf.entry(w.as_str()).or_default() += 1;
        }
        docs.push((*id, tf, ws.len()));
    }
    let n = (all.documents as f64).max(docs.len() as f64);
    let avg = if all.average_length > 0.0 {
        all.average_length
    } else {
        1.0
    };
    let mut terms: Vec<&str> = query.iter().map(String::as_str).collect();
    terms.sort_unstable();
    terms.dedup();
    let idf: Vec<f64> = terms
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|(_, tf, _)| tf.contains_key(t)).count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    let mut scored: Vec<(f64, usize, i64)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, (id, tf, len))| {
            let mut score = 0.0;
            let mut any = false;
            for (t, idf) in terms.iter().zip(&idf) {
                if let Some(&f) = tf.get(t) {
                    any = true;
                    let f = f as f64;
                    score += idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * *len as f64 / avg));
                }
            }
            any.then_some((score, i, *id))
        })
        .collect();
    // Best first; ties keep the database's order.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, _, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_words_and_more_occurrences_rank_higher() {
        let docs = vec![
            (1, "the deploy script uses rsync".to_string()),
            (2, "rsync rsync rsync to the staging host".to_string()),
            (3, "the the the the".to_string()),
            (4, "nothing relevant".to_string()),
        ];
        let all = Collection {
            documents: 4,
            average_length: 4.5,
        };
        assert_eq!(rank(&words("RSYNC"), &docs, &all), [2, 1]);
        // `deploy` is in one document, `the` in three: the rare word wins.
        assert_eq!(rank(&words("the deploy"), &docs, &all)[0], 1);
        assert!(rank(&words("absent"), &docs, &all).is_empty());
    }
}
