//! Which files a patch names, so each is kept before the patch is applied.

/// The paths a v4a patch (`*** Add File:`, `*** Update File:`, `*** Delete
/// File:`, `*** Move to:`) or a unified diff (`+++ b/PATH`) names, in
/// order, each once.
pub fn patch_paths(patch: &str) -> Vec<String> {
    const MARKS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let named = MARKS
            .iter()
            .find_map(|mark| line.strip_prefix(mark))
            .or_else(|| line.strip_prefix("+++ b/"))
            .or_else(|| line.strip_prefix("--- a/"))
            .map(str::trim);
        if let Some(path) = named
            && !path.is_empty()
            && !out.iter().any(|p| p == path)
        {
            out.push(path.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_a_patch_names_is_found_once() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n*** Add File: new.txt\n+hi\n*** Delete File: old.txt\n*** Update File: src/a.rs\n*** End Patch\n";
        assert_eq!(
            patch_paths(patch),
            ["src/a.rs", "src/b.rs", "new.txt", "old.txt"]
        );
        assert_eq!(patch_paths("--- a/x.c\n+++ b/x.c\n@@\n"), ["x.c"]);
    }
}
