//! Skills in the Agent Skills format: a folder with a `SKILL.md` whose
//! YAML front matter gives a `name` and a `description`, then the body.
//! The model is told each skill's name and description; it loads a
//! skill's body (and the files beside it) through the `skill` tool when it
//! decides to. Skills come from the operator's `~/.config/sandcrab/skills/`
//! and a trusted project's `.sandcrab/skills/`, and each is pinned by
//! content ([`crate::consent`]): a skill changed on disk is not offered
//! until the operator consents again (`sandcrab trust`).

mod front_matter;
pub mod tool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::consent::{ConsentRecord, ConsentState, Pinned};

pub use front_matter::{FrontMatter, SkillError};

/// Most files one skill folder may hold (pinned and loadable).
const MAX_FILES: usize = 200;
/// Most bytes of one skill file.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// The folder skills live in, under a project's `.sandcrab/` and the
/// operator's configuration folder.
pub const SKILLS_DIR: &str = "skills";

/// Whose a skill is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillOrigin {
    Operator,
    Project,
}

impl SkillOrigin {
    pub fn word(self) -> &'static str {
        match self {
            SkillOrigin::Operator => "operator",
            SkillOrigin::Project => "project",
        }
    }
}

/// One skill, as found.
#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub dir: PathBuf,
    pub origin: SkillOrigin,
    /// Its folder, pinned by content.
    pub pinned: Pinned,
    pub consent: ConsentState,
}

impl Skill {
    /// Whether it is offered to the model.
    pub fn offered(&self) -> bool {
        self.consent == ConsentState::Given
    }
}

/// Where skills are looked for.
#[derive(Debug, Clone, Default)]
pub struct SkillPlaces {
    /// The operator's skills folder.
    pub operator: Option<PathBuf>,
    /// A trusted project's skills folder.
    pub project: Option<PathBuf>,
}

impl SkillPlaces {
    /// The operator's folder, and `workspace`'s when the project is
    /// `trusted`.
    pub fn of(workspace: &Path, trusted: bool) -> Self {
        SkillPlaces {
            operator: crate::user_files::config_dir().map(|d| d.join(SKILLS_DIR)),
            project: trusted.then(|| {
                workspace
                    .join(crate::config::trust::PROJECT_DIR)
                    .join(SKILLS_DIR)
            }),
        }
    }
}

/// The skills found in `places`, with their consent state under
/// `records`; and what the operator should be told.
pub fn found(
    places: &SkillPlaces,
    records: &BTreeMap<String, ConsentRecord>,
) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut warnings = Vec::new();
    let sources = [
        (places.project.as_ref(), SkillOrigin::Project),
        (places.operator.as_ref(), SkillOrigin::Operator),
    ];
    for (dir, origin) in sources {
        let Some(dir) = dir else { continue };
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        folders.sort();
        for folder in folders {
            match read_skill(&folder, origin, records) {
                Ok(skill) if skills.iter().any(|s| s.name == skill.name) => warnings.push(format!(
                    "skill `{}` in {} has the name of another skill; the first found is used",
                    skill.name,
                    folder.display()
                )),
                Ok(skill) => {
                    if !skill.offered() {
                        warnings.push(format!(
                            "skill `{}` ({}) {}; it is not offered until you review it and run `sandcrab trust`",
                            skill.name,
                            folder.display(),
                            match skill.consent {
                                ConsentState::Changed => "changed since you consented to it",
                                _ => "has not been consented to",
                            }
                        ));
                    }
                    skills.push(skill);
                }
                Err(e) => {
                    warnings.push(format!("{}: {e}; the skill is left out", folder.display()))
                }
            }
        }
    }
    (skills, warnings)
}

/// The skill in `folder`.
fn read_skill(
    folder: &Path,
    origin: SkillOrigin,
    records: &BTreeMap<String, ConsentRecord>,
) -> Result<Skill, SkillError> {
    let text = crate::safe_fs::read_regular(
        &folder.join("SKILL.md"),
        MAX_FILE_BYTES,
        crate::safe_fs::Links::Refuse,
    )
    .map_err(|e| SkillError::Unreadable(e.to_string()))?;
    let text = String::from_utf8_lossy(&text);
    let (front, _) = front_matter::split(&text)?;
    let files = files_of(folder);
    let what = format!("skill {} {}", origin.word(), folder.display());
    let pinned = Pinned::of(what, "", &files);
    let consent = pinned.state(records);
    Ok(Skill {
        name: front.name,
        description: front.description,
        dir: folder.to_path_buf(),
        origin,
        pinned,
        consent,
    })
}

/// The regular files of a skill folder (links are not followed), sorted,
/// at most [`MAX_FILES`].
pub fn files_of(folder: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ty) = entry.file_type() else { continue };
            if ty.is_dir() {
                stack.push(entry.path());
            } else if ty.is_file() && out.len() < MAX_FILES {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// What the system prompt says of the offered skills (None: none).
pub fn prompt_section(skills: &[Skill]) -> Option<String> {
    let offered: Vec<&Skill> = skills.iter().filter(|s| s.offered()).collect();
    if offered.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Skills: instructions for particular tasks. When a task matches a skill's description, load it with the `skill` tool (its body, then any file it names) and follow it.\n",
    );
    for skill in offered {
        text.push_str(&format!("- {}: {}\n", skill.name, skill.description));
    }
    Some(text)
}
