//! The `skill` tool: the model loads an offered skill's body, or one of
//! the files beside it — exactly the bytes the operator consented to.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{MAX_FILE_BYTES, Skill};
use crate::plugin::ToolSpec;
use crate::tools::{FnTool, ToolRegistry};

/// The tool's name.
pub const NAME: &str = "skill";

/// Register `skill` for the offered ones of `skills` (nothing when none is
/// offered).
pub fn register(tools: &mut ToolRegistry, skills: &[Skill]) {
    let offered: Arc<Vec<Skill>> =
        Arc::new(skills.iter().filter(|s| s.offered()).cloned().collect());
    if offered.is_empty() {
        return;
    }
    let names: Vec<&str> = offered.iter().map(|s| s.name.as_str()).collect();
    let spec = ToolSpec {
        name: NAME.into(),
        description: "Load a skill named in the system prompt: without `file`, its instructions (SKILL.md); with `file`, a file of the skill's folder it names (a script, a reference).".into(),
        parameters: json!({"type": "object", "properties": {
            "name": {"type": "string", "enum": names, "description": "The skill"},
            "file": {"type": "string", "description": "A file of the skill's folder, relative to it (default: its instructions)"}
        }, "required": ["name"], "additionalProperties": false}),
        traits: Default::default(),
    };
    tools.register(
        spec,
        Arc::new(FnTool(
            move |args: Value, _ctx: crate::tools::ToolContext| {
                let offered = offered.clone();
                async move { load(&offered, &args) }
            },
        )),
    );
}

/// What `skill` answers for `args`.
fn load(skills: &[Skill], args: &Value) -> Result<String, String> {
    let name = args["name"].as_str().unwrap_or_default();
    let skill = skills.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        format!(
            "no skill is named `{name}`; the skills are: {}",
            names.join(", ")
        )
    })?;
    match args["file"].as_str().filter(|f| !f.is_empty()) {
        None => {
            let text = consented_bytes(skill, &skill.dir.join("SKILL.md"))?;
            let text = String::from_utf8_lossy(&text);
            let (_, body) = super::front_matter::split(&text).map_err(|e| e.to_string())?;
            let others: Vec<String> = skill
                .pinned
                .files
                .iter()
                .filter_map(|f| f.path.strip_prefix(&skill.dir).ok())
                .filter(|rel| *rel != Path::new("SKILL.md"))
                .map(|rel| rel.display().to_string())
                .collect();
            let mut out = format!("# Skill: {}\n\n{}", skill.name, body.trim_end());
            if !others.is_empty() {
                out.push_str(&format!(
                    "\n\nFiles of this skill (load one with file = …): {}\nIts folder: {}",
                    others.join(", "),
                    skill.dir.display()
                ));
            }
            Ok(out)
        }
        Some(file) => {
            let rel = Path::new(file);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(format!("`{file}` must be a path inside the skill's folder"));
            }
            let bytes = consented_bytes(skill, &skill.dir.join(rel))?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

/// The bytes of `path`, a file of `skill`, when they are what was
/// consented.
fn consented_bytes(skill: &Skill, path: &Path) -> Result<Vec<u8>, String> {
    let pinned = skill
        .pinned
        .files
        .iter()
        .find(|f| f.path == path)
        .ok_or_else(|| format!("the skill `{}` has no file {}", skill.name, path.display()))?;
    let bytes = crate::safe_fs::read_regular(path, MAX_FILE_BYTES, crate::safe_fs::Links::Refuse)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if crate::plugin::integrity::sha256_hex(&bytes) != pinned.sha256 {
        return Err(format!(
            "{} changed since the operator consented to the skill `{}`; it is not loaded until they review it and run `sandcrab trust`",
            path.display(),
            skill.name
        ));
    }
    Ok(bytes)
}
