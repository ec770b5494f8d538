//! Which calls of one answer must wait for which: calls that write the same
//! workspace path run one after another in the model's order (a call that
//! may write anywhere waits for every earlier writer, and every later
//! writer waits for it); everything else runs in parallel.

use std::path::{Component, Path, PathBuf};

use crate::llm::ToolCall;
use crate::plugin::Writes;
use crate::tools::ToolRegistry;

/// What one call writes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WriteSet {
    Nothing,
    Paths(Vec<PathBuf>),
    Anywhere,
}

impl WriteSet {
    fn conflicts(&self, other: &WriteSet) -> bool {
        match (self, other) {
            (WriteSet::Nothing, _) | (_, WriteSet::Nothing) => false,
            (WriteSet::Anywhere, _) | (_, WriteSet::Anywhere) => true,
            (WriteSet::Paths(a), WriteSet::Paths(b)) => a.iter().any(|p| b.contains(p)),
        }
    }
}

/// For each call, the indices of the earlier calls it must wait for.
pub fn dependencies(
    calls: &[ToolCall],
    tools: &ToolRegistry,
    working_dir: &Path,
) -> Vec<Vec<usize>> {
    let sets: Vec<WriteSet> = calls
        .iter()
        .map(|call| write_set(call, tools, working_dir))
        .collect();
    (0..calls.len())
        .map(|i| (0..i).filter(|&j| sets[i].conflicts(&sets[j])).collect())
        .collect()
}

fn write_set(call: &ToolCall, tools: &ToolRegistry, working_dir: &Path) -> WriteSet {
    let Some(tool) = tools.get(&call.name) else {
        return WriteSet::Nothing;
    };
    match &tool.spec.traits.writes {
        Writes::Nothing => WriteSet::Nothing,
        Writes::Workspace => WriteSet::Anywhere,
        Writes::Paths(args) => {
            let paths: Vec<PathBuf> = args
                .iter()
                .filter_map(|arg| call.arguments.get(arg)?.as_str())
                .map(|p| normalize(&working_dir.join(p)))
                .collect();
            if paths.is_empty() {
                // Arguments we cannot read: order it with everything.
                WriteSet::Anywhere
            } else {
                WriteSet::Paths(paths)
            }
        }
    }
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{ToolSpec, ToolTraits};
    use crate::tools::FnTool;
    use serde_json::json;
    use std::sync::Arc;

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        for (name, writes) in [
            ("edit", Writes::Paths(vec!["file_path".into()])),
            ("patch", Writes::Workspace),
            ("read", Writes::Nothing),
        ] {
            r.register(
                ToolSpec {
                    traits: ToolTraits {
                        writes,
                        ..Default::default()
                    },
                    ..ToolSpec::new(name, "", json!({"type": "object"}))
                },
                Arc::new(FnTool(|_, _| async { Ok(String::new()) })),
            );
        }
        r
    }

    #[test]
    fn writers_of_the_same_path_wait_for_each_other_in_order() {
        let call = |name: &str, args: serde_json::Value| ToolCall::new("c", name, args);
        let calls = [
            call("edit", json!({"file_path": "a.txt"})),
            call("read", json!({"file_path": "a.txt"})),
            call("edit", json!({"file_path": "b.txt"})),
            call("edit", json!({"file_path": "./sub/../a.txt"})),
            call("patch", json!({"patch": "..."})),
            call("edit", json!({"file_path": "c.txt"})),
        ];
        let deps = dependencies(&calls, &registry(), Path::new("/ws"));
        assert_eq!(
            deps,
            vec![vec![], vec![], vec![], vec![0], vec![0, 2, 3], vec![4],]
        );
    }
}
