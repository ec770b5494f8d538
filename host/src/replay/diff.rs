//! The first place two JSON values differ, as a path a person can read
//! (`messages[5].content`).

use serde_json::Value;

/// Where `recorded` and `now` first differ: the path and both values
/// there (None: they are equal).
pub fn first_difference(
    path: &str,
    recorded: &Value,
    now: &Value,
) -> Option<(String, Value, Value)> {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                first_difference(&join(path, key), x, y)
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            let shared = a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y));
            shared.or_else(|| {
                (a.len() != b.len()).then(|| {
                    let i = a.len().min(b.len());
                    (
                        format!("{path}[{i}]"),
                        a.get(i).cloned().unwrap_or(Value::Null),
                        b.get(i).cloned().unwrap_or(Value::Null),
                    )
                })
            })
        }
        (a, b) if a == b => None,
        (a, b) => Some((path.to_string(), a.clone(), b.clone())),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_first_field_that_differs() {
        let a =
            json!({"messages": [{"role": "user", "text": "hi"}, {"role": "user", "text": "a"}]});
        let b =
            json!({"messages": [{"role": "user", "text": "hi"}, {"role": "user", "text": "b"}]});
        let (path, x, y) = first_difference("", &a, &b).unwrap();
        assert_eq!(
            (path.as_str(), x, y),
            ("messages[1].text", json!("a"), json!("b"))
        );
        let c = json!({"messages": [{"role": "user", "text": "hi"}]});
        assert_eq!(first_difference("", &a, &c).unwrap().0, "messages[1]");
        assert!(first_difference("", &a, &a.clone()).is_none());
    }
}
