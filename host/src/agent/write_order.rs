//! Which calls of one answer must wait for which: calls that may write the
//! same file run one after another in the model's order (a call that may
//! write anywhere waits for every earlier writer, and every later writer
//! waits for it); everything else runs in parallel. What a call writes is
//! its prepared write plan.

use crate::tools::PreparedCall;

/// For each call, the indices of the earlier calls it must wait for.
pub fn dependencies(calls: &[PreparedCall]) -> Vec<Vec<usize>> {
    (0..calls.len())
        .map(|i| {
            (0..i)
                .filter(|&j| calls[i].writes.overlaps(&calls[j].writes))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::CallPlace;
    use serde_json::{Value, json};
    use std::path::Path;

    #[test]
    fn writers_of_the_same_path_wait_for_each_other_in_order() {
        let tools = crate::tools::testing::file_tools();
        let place = CallPlace {
            workspace: Path::new("/ws"),
            working_dir: Path::new("/ws"),
        };
        let call = |name: &str, args: Value| PreparedCall::new("c", name, &args, &tools, place);
        let encoded = Value::String(json!({"file_path": "a.txt", "content": "x"}).to_string());
        let calls = [
            call("edit_file", json!({"file_path": "a.txt"})),
            call("read_file", json!({"file_path": "a.txt"})),
            call("edit_file", json!({"file_path": "b.txt"})),
            call("edit_file", json!({"file_path": "./sub/../a.txt"})),
            call("apply_patch", json!({"patch": "..."})),
            call("edit_file", json!({"file_path": "c.txt"})),
            call("write_file", encoded),
        ];
        assert_eq!(
            dependencies(&calls),
            vec![
                vec![],
                vec![],
                vec![],
                vec![0],
                vec![0, 2, 3],
                vec![4],
                vec![0, 3, 4]
            ]
        );
    }
}
