//! Path globs inside the workspace: `*` and `?` within one name, `**` for
//! any number of names. Paths are relative to the workspace and
//! `/`-separated; a glob never reaches outside it.

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    parts: Vec<String>,
}

impl Glob {
    /// A glob from its text, or why it cannot be one (absolute, or
    /// climbing out of the workspace with `..`).
    pub fn new(text: &str) -> Result<Glob, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("the path glob is empty".into());
        }
        if trimmed.starts_with('/') || trimmed.starts_with('~') {
            return Err(format!(
                "the path glob '{trimmed}' is outside the workspace: write it relative to the workspace root (for example 'src/**')"
            ));
        }
        let parts: Vec<String> = trimmed
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(String::from)
            .collect();
        if parts.iter().any(|p| p == "..") {
            return Err(format!(
                "the path glob '{trimmed}' climbs out of the workspace with '..'"
            ));
        }
        Ok(Glob {
            text: trimmed.to_string(),
            parts,
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the workspace-relative `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        let names: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if names.contains(&"..") {
            return false;
        }
        let parts: Vec<&str> = self.parts.iter().map(String::as_str).collect();
        match_parts(&parts, &names)
    }
}

fn match_parts(parts: &[&str], names: &[&str]) -> bool {
    match parts.split_first() {
        None => names.is_empty(),
        Some((&"**", rest)) => (0..=names.len()).any(|skip| match_parts(rest, &names[skip..])),
        Some((part, rest)) => match names.split_first() {
            Some((name, more)) => {
                match_name(part.as_bytes(), name.as_bytes()) && match_parts(rest, more)
            }
            None => false,
        },
    }
}

fn match_name(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| match_name(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && match_name(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && match_name(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_and_folders() {
        let src = Glob::new("src/**").unwrap();
        assert!(src.matches("src/main.rs") && src.matches("src/a/b/c.rs"));
        assert!(!src.matches("tests/a.rs") && !src.matches("srcx/a.rs"));
        let rs = Glob::new("**/*.rs").unwrap();
        assert!(rs.matches("main.rs") && rs.matches("a/b/lib.rs"));
        assert!(!rs.matches("a/b/lib.rsx"));
        let one = Glob::new("docs/?.md").unwrap();
        assert!(one.matches("docs/a.md") && !one.matches("docs/ab.md"));
        assert!(!src.matches("src/../etc/passwd"));
    }

    #[test]
    fn a_glob_outside_the_workspace_is_refused() {
        for bad in ["/etc/**", "../**", "src/../../x", "~/x", ""] {
            assert!(Glob::new(bad).is_err(), "{bad}");
        }
    }
}
