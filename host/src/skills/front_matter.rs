//! A `SKILL.md`'s YAML front matter: the `name` and `description` keys
//! (single-line values, quoted or not; other keys are kept out).

/// What the front matter says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
}

/// Why a `SKILL.md` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("SKILL.md cannot be read: {0}")]
    Unreadable(String),
    #[error("SKILL.md must begin with YAML front matter between `---` lines")]
    NoFrontMatter,
    #[error("SKILL.md's front matter has no `{0}`")]
    Missing(&'static str),
    #[error("the skill name `{0}` must be 1 to 64 lower-case letters, digits and hyphens")]
    BadName(String),
    #[error("the description is longer than 1024 characters")]
    LongDescription,
}

/// Split `text` into its front matter and its body.
pub fn split(text: &str) -> Result<(FrontMatter, &str), SkillError> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or(SkillError::NoFrontMatter)?;
    let end = rest.find("\n---").ok_or(SkillError::NoFrontMatter)?;
    let header = &rest[..end];
    let body = rest[end + 4..]
        .trim_start_matches(['-'])
        .trim_start_matches(['\r', '\n']);
    let mut name = None;
    let mut description = None;
    for line in header.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let value = unquote(value.trim());
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {}
        }
    }
    let name = name.ok_or(SkillError::Missing("name"))?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(SkillError::BadName(name));
    }
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or(SkillError::Missing("description"))?;
    if description.chars().count() > 1024 {
        return Err(SkillError::LongDescription);
    }
    Ok((FrontMatter { name, description }, body))
}

fn unquote(value: &str) -> String {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return value[1..value.len() - 1].to_string();
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_skills_front_matter_is_read_and_checked() {
        let (front, body) = split(
            "---\nname: pdf-forms\ndescription: \"Fill PDF forms: use when asked to\"\nlicense: MIT\n---\n# Steps\n1. run fill.py\n",
        )
        .unwrap();
        assert_eq!(front.name, "pdf-forms");
        assert_eq!(front.description, "Fill PDF forms: use when asked to");
        assert_eq!(body, "# Steps\n1. run fill.py\n");
        assert_eq!(split("# no header"), Err(SkillError::NoFrontMatter));
        assert_eq!(
            split("---\nname: Bad Name\ndescription: d\n---\n").unwrap_err(),
            SkillError::BadName("Bad Name".into())
        );
        assert_eq!(
            split("---\nname: x\n---\n").unwrap_err(),
            SkillError::Missing("description")
        );
    }
}
