//! A tool call read once: its arguments by one rule, the files it says it
//! writes from its tool's declaration (one patch reader, one mapping from
//! the tool's view of a path to the host's), whether it asks for the
//! network, and who would run it. Everything after — ordering, approval,
//! checkpoints, dispatch, the receipt — reads this value and never the
//! model's raw arguments again.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::receipt::Standing;
use super::registry::ToolRegistry;
use crate::plugin::{Writes, host_path_of};

/// How deep a string holding JSON may nest before it stops being read as
/// the arguments (a model that encoded its arguments twice is read; one
/// that keeps going is told).
const MAX_ENCODINGS: usize = 3;

/// Why a call's arguments are not an object the tool can take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    #[error("not valid JSON ({0})")]
    NotJson(String),
    #[error("the arguments must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    #[error("the arguments are a string encoded more than {MAX_ENCODINGS} times")]
    TooDeep,
}

/// The one rule for a call's arguments: an object is taken as it is,
/// nothing (`null`) as no arguments, and a string as the JSON it holds
/// (models sometimes encode their arguments once more), read again while
/// it is a string, at most [`MAX_ENCODINGS`] times.
pub fn read_arguments(raw: &Value) -> Result<Value, ArgumentsError> {
    let mut value = std::borrow::Cow::Borrowed(raw);
    for _ in 0..=MAX_ENCODINGS {
        match value.as_ref() {
            Value::Object(_) => return Ok(value.into_owned()),
            Value::Null => return Ok(Value::Object(Default::default())),
            Value::String(text) => {
                let inner = serde_json::from_str::<Value>(text)
                    .map_err(|e| ArgumentsError::NotJson(e.to_string()))?;
                value = std::borrow::Cow::Owned(inner);
            }
            Value::Array(_) => return Err(ArgumentsError::NotAnObject("an array")),
            Value::Number(_) => return Err(ArgumentsError::NotAnObject("a number")),
            Value::Bool(_) => return Err(ArgumentsError::NotAnObject("a boolean")),
        }
    }
    Err(ArgumentsError::TooDeep)
}

/// Where a call works: the workspace, and the folder relative paths are
/// taken from.
#[derive(Debug, Clone, Copy)]
pub struct CallPlace<'a> {
    pub workspace: &'a Path,
    pub working_dir: &'a Path,
}

/// One file a call says it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPath {
    /// As the call names it.
    pub named: String,
    /// Where it is on the host (`.` and `..` resolved by name).
    pub host: PathBuf,
}

impl WrittenPath {
    /// Relative to `workspace`, as the approval rules match paths; the
    /// name as given when it is outside (so no rule's glob matches it,
    /// and the tools refuse it).
    pub fn in_workspace(&self, workspace: &Path) -> String {
        self.host
            .strip_prefix(workspace)
            .map(|rel| rel.to_string_lossy().into_owned())
            .unwrap_or_else(|_| self.named.clone())
    }
}

/// What a call may write, from its tool's declaration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WritePlan {
    /// The files it names for writing.
    pub paths: Vec<WrittenPath>,
    /// It may write beyond them (a tool that writes anywhere in the
    /// workspace, or whose path arguments cannot be read).
    pub anywhere: bool,
}

impl WritePlan {
    /// Whether the call writes anything.
    pub fn writes(&self) -> bool {
        self.anywhere || !self.paths.is_empty()
    }

    /// Whether two calls may write the same file.
    pub fn overlaps(&self, other: &WritePlan) -> bool {
        if !self.writes() || !other.writes() {
            return false;
        }
        self.anywhere
            || other.anywhere
            || self
                .paths
                .iter()
                .any(|p| other.paths.iter().any(|q| p.host == q.host))
    }
}

/// A tool call, read once.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    /// The model's id of the call.
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them (what events and recordings
    /// keep).
    pub raw: Value,
    /// The arguments by [`read_arguments`], or why they cannot be taken.
    pub arguments: Result<Value, ArgumentsError>,
    pub writes: WritePlan,
    /// It asks for the network, and its tool may have it on request.
    pub asks_network: bool,
    /// Who would run it, under which grants.
    pub standing: Standing,
}

impl PreparedCall {
    /// Read the call `id` of `name` with `raw` arguments against the tools
    /// of `registry`, working at `place`.
    pub fn new(
        id: &str,
        name: &str,
        raw: &Value,
        registry: &ToolRegistry,
        place: CallPlace<'_>,
    ) -> Self {
        let arguments = read_arguments(raw);
        let traits = registry.get(name).map(|t| &t.spec.traits);
        let writes = match (traits, &arguments) {
            (Some(traits), Ok(args)) => write_plan(&traits.writes, args, place),
            // Arguments that cannot be read run nothing; a tool that is
            // not there writes nothing.
            _ => WritePlan::default(),
        };
        let asks_network = traits.is_some_and(|t| t.network)
            && arguments
                .as_ref()
                .is_ok_and(|args| args["network"] == Value::Bool(true));
        PreparedCall {
            id: id.to_string(),
            name: name.to_string(),
            raw: raw.clone(),
            arguments,
            writes,
            asks_network,
            standing: registry.standing(name),
        }
    }

    /// The arguments, or `{}` when they cannot be read (for readers that
    /// only show them: previews, the questions put to the operator).
    pub fn arguments_or_empty(&self) -> Value {
        self.arguments
            .clone()
            .unwrap_or_else(|_| Value::Object(Default::default()))
    }

    /// The call as the dispatcher takes it.
    pub fn request(&self) -> super::ToolCallRequest {
        super::ToolCallRequest {
            id: self.id.clone(),
            name: self.name.clone(),
            arguments: self.arguments.clone().unwrap_or_else(|_| self.raw.clone()),
        }
    }
}

/// What a tool declaring `writes` writes when called with `args`.
fn write_plan(writes: &Writes, args: &Value, place: CallPlace<'_>) -> WritePlan {
    let named: Vec<String> = match writes {
        Writes::Nothing => return WritePlan::default(),
        Writes::Paths(names) => names
            .iter()
            .filter_map(|name| Some(args.get(name)?.as_str()?.to_string()))
            .collect(),
        // A patch names the files it writes in its headers.
        Writes::Workspace => args["patch"]
            .as_str()
            .map(crate::checkpoint::patch_paths)
            .unwrap_or_default(),
    };
    let anywhere = match writes {
        Writes::Workspace => true,
        // Path arguments it cannot find: it may write anything.
        _ => named.is_empty(),
    };
    let paths = named
        .into_iter()
        .map(|named| WrittenPath {
            host: host_path_of(&named, place.workspace, place.working_dir),
            named,
        })
        .collect();
    WritePlan { paths, anywhere }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prepared(name: &str, raw: Value) -> PreparedCall {
        let place = CallPlace {
            workspace: Path::new("/w"),
            working_dir: Path::new("/w/src"),
        };
        PreparedCall::new("c", name, &raw, &crate::tools::testing::file_tools(), place)
    }

    #[test]
    fn arguments_are_read_by_one_rule() {
        let object = json!({"file_path": "a"});
        assert_eq!(read_arguments(&object), Ok(object.clone()));
        assert_eq!(read_arguments(&Value::Null), Ok(json!({})));
        let once = Value::String(object.to_string());
        assert_eq!(read_arguments(&once), Ok(object.clone()));
        let twice = Value::String(once.to_string());
        assert_eq!(read_arguments(&twice), Ok(object.clone()));
        assert!(matches!(
            read_arguments(&json!("{not json")),
            Err(ArgumentsError::NotJson(_))
        ));
        assert_eq!(
            read_arguments(&json!([1])),
            Err(ArgumentsError::NotAnObject("an array"))
        );
        let mut deep = object;
        for _ in 0..=MAX_ENCODINGS {
            deep = Value::String(deep.to_string());
        }
        assert_eq!(read_arguments(&deep), Err(ArgumentsError::TooDeep));
    }

    #[test]
    fn an_encoded_call_writes_what_the_same_call_as_an_object_writes() {
        let object = json!({"file_path": "../lib/a.rs"});
        let plain = prepared("edit_file", object.clone());
        let encoded = prepared("edit_file", Value::String(object.to_string()));
        assert_eq!(plain.writes, encoded.writes);
        assert_eq!(
            plain.writes.paths,
            [WrittenPath {
                named: "../lib/a.rs".into(),
                host: "/w/lib/a.rs".into()
            }]
        );
        assert!(!plain.writes.anywhere);
        assert_eq!(
            plain.writes.paths[0].in_workspace(Path::new("/w")),
            "lib/a.rs"
        );
    }

    #[test]
    fn paths_map_from_the_tools_view_and_outside_ones_keep_their_name() {
        let guest = prepared("edit_file", json!({"file_path": "/workspace/x/../y"}));
        assert_eq!(guest.writes.paths[0].host, Path::new("/w/y"));
        let outside = prepared("edit_file", json!({"file_path": "../../etc/x"}));
        assert_eq!(outside.writes.paths[0].host, Path::new("/etc/x"));
        assert_eq!(
            outside.writes.paths[0].in_workspace(Path::new("/w")),
            "../../etc/x"
        );
    }

    #[test]
    fn a_patch_writes_the_files_its_headers_name_and_may_write_anywhere() {
        let patch = "*** Begin Patch\n*** Add File: .github/workflows/x.yml\n+on: push\n*** Update File: a.rs\n*** Move to: b.rs\n*** End Patch";
        let call = prepared("apply_patch", json!({ "patch": patch }));
        let named: Vec<&str> = call.writes.paths.iter().map(|p| p.named.as_str()).collect();
        assert_eq!(named, [".github/workflows/x.yml", "a.rs", "b.rs"]);
        assert!(call.writes.anywhere);
    }

    #[test]
    fn writers_overlap_only_where_they_may_write_the_same_file() {
        let a = prepared("edit_file", json!({"file_path": "a"}));
        let a_again = prepared("edit_file", json!({"file_path": "./a"}));
        let b = prepared("edit_file", json!({"file_path": "b"}));
        let read = prepared("read_file", json!({"file_path": "a"}));
        let unreadable = prepared("edit_file", json!({}));
        assert!(a.writes.overlaps(&a_again.writes));
        assert!(!a.writes.overlaps(&b.writes));
        assert!(!a.writes.overlaps(&read.writes));
        assert!(unreadable.writes.overlaps(&b.writes));
    }

    #[test]
    fn the_network_is_asked_for_only_where_the_tool_may_have_it() {
        assert!(prepared("shell", json!({"command": "x", "network": true})).asks_network);
        assert!(!prepared("shell", json!({"command": "x"})).asks_network);
        assert!(!prepared("edit_file", json!({"file_path": "a", "network": true})).asks_network);
        let encoded = Value::String(json!({"command": "x", "network": true}).to_string());
        assert!(prepared("shell", encoded).asks_network);
    }
}
