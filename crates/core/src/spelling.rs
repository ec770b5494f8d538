//! The known name closest to a mistyped one, for the "did you mean"
//! of an error (a configuration key, a tool name).

/// The candidate closest to `given`, when it is close enough to be a typo
/// of it (at most 2 changes, or a third of its length); never `given`
/// itself.
pub fn closest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = 2.max(given.chars().count() / 3);
    candidates
        .into_iter()
        .map(|name| (edit_distance(given, name), name))
        .filter(|(d, _)| *d > 0 && *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// Levenshtein distance between `a` and `b`, by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_changes() {
        assert_eq!(edit_distance("mdoe", "mode"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn the_closest_name_is_offered_only_when_it_could_be_a_typo() {
        let names = ["read_file", "write_file", "grep"];
        assert_eq!(closest("read_fil", names), Some("read_file"));
        assert_eq!(closest("zzzzzzzz", names), None);
        assert_eq!(closest("grep", names), None);
    }
}
