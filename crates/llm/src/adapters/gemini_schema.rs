//! JSON Schema reduced to the OpenAPI subset Gemini's function
//! declarations accept: Gemini answers 400 for any other keyword (such as
//! `additionalProperties`, `$ref`, `const`), a type list, a `format` it does
//! not know, a non-string `enum`, an object without properties or a
//! `required` name that is not a property.
//!
//! The reduction keeps what Gemini can express and drops the rest; the host
//! still validates every call against the tool's full schema.

use serde_json::{Map, Value, json};

/// Keywords Gemini accepts.
const KEEP: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// How deep `$ref`s are followed.
const MAX_DEPTH: usize = 16;

/// The `parameters` of a declaration, or None when the tool takes no
/// parameters (Gemini rejects an object without properties).
pub fn parameters(schema: &Value) -> Option<Value> {
    reduce(schema, schema, 0)
}

/// `schema` reduced; None when nothing Gemini can express remains (an
/// object without properties, say), so the caller drops it.
fn reduce(schema: &Value, root: &Value, depth: usize) -> Option<Value> {
    let map = schema.as_object()?;
    if depth > MAX_DEPTH {
        return Some(json!({"type": "string"}));
    }
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        return match resolve(root, target) {
            Some(resolved) => reduce(resolved, root, depth + 1),
            None => Some(json!({"type": "string"})),
        };
    }
    let mut out = Map::new();
    let mut nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
    let mut ty = match map.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Array(types)) => {
            let named: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            nullable |= named.contains(&"null");
            named.into_iter().find(|t| *t != "null").map(str::to_string)
        }
        _ => None,
    };
    if ty.as_deref() == Some("null") {
        return None;
    }
    if ty.is_none()
        && let Some(values) = map.get("enum").and_then(Value::as_array)
        && !values.is_empty()
    {
        // Gemini's enums are strings; an enum of numbers keeps its type.
        if values.iter().all(|v| v.is_i64() || v.is_u64()) {
            ty = Some("integer".into());
        } else if values.iter().all(Value::is_number) {
            ty = Some("number".into());
        }
    }
    if let Some(c) = map.get("const") {
        out.insert("enum".into(), json!([c]));
        if c.is_string() {
            ty.get_or_insert_with(|| "string".into());
        }
    }
    for (key, value) in map {
        if !KEEP.contains(&key.as_str()) || key == "type" || key == "nullable" {
            continue;
        }
        let value = match key.as_str() {
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(name, s)| Some((name.clone(), reduce(s, root, depth + 1)?)))
                    .collect();
                Value::Object(props)
            }
            "items" => match reduce(value, root, depth + 1) {
                Some(items) => items,
                None => continue,
            },
            "anyOf" => {
                let mut variants = Vec::new();
                for v in value.as_array().into_iter().flatten() {
                    if v.get("type").and_then(Value::as_str) == Some("null") {
                        nullable = true;
                    } else if let Some(r) = reduce(v, root, depth + 1) {
                        variants.push(r);
                    }
                }
                match variants.len() {
                    0 => continue,
                    1 => {
                        // A single variant is the schema itself.
                        if let Value::Object(only) = variants.remove(0) {
                            for (k, v) in only {
                                out.entry(k).or_insert(v);
                            }
                        }
                        continue;
                    }
                    _ => Value::Array(variants),
                }
            }
            "enum" => {
                if value
                    .as_array()
                    .is_some_and(|e| e.iter().all(Value::is_string))
                {
                    value.clone()
                } else {
                    continue;
                }
            }
            "format" => {
                let ok = matches!(
                    (ty.as_deref(), value.as_str()),
                    (Some("string"), Some("enum" | "date-time"))
                        | (Some("integer"), Some("int32" | "int64"))
                        | (Some("number"), Some("float" | "double"))
                );
                if !ok {
                    continue;
                }
                value.clone()
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if let Some(t) = &ty {
        out.insert("type".into(), json!(t));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    match ty.as_deref() {
        Some("object") => {
            let has_props = out
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty());
            if !has_props {
                return None;
            }
            let props: Vec<String> = out["properties"].as_object()?.keys().cloned().collect();
            if let Some(Value::Array(required)) = out.get_mut("required") {
                required.retain(|r| r.as_str().is_some_and(|r| props.iter().any(|p| p == r)));
                if required.is_empty() {
                    out.remove("required");
                }
            }
        }
        Some("array") if !out.contains_key("items") => {
            out.insert("items".into(), json!({"type": "string"}));
        }
        _ => {
            out.remove("properties");
            out.remove("required");
        }
    }
    if ty.is_none() && !out.contains_key("anyOf") {
        // Gemini needs a type; an untyped schema accepts a string best.
        out.insert("type".into(), json!("string"));
    }
    Some(Value::Object(out))
}

/// A local reference (`#/$defs/X`, `#/definitions/X`) inside `root`.
fn resolve<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_to_what_gemini_accepts() {
        let schema = json!({
            "type": "object",
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "format": "uri", "description": "p"},
                "mode": {"const": "fast"},
                "count": {"type": ["integer", "null"], "minimum": 0},
                "level": {"enum": [1, 2, 3]},
                "opts": {"type": "object"},
                "tags": {"type": "array"},
                "target": {"$ref": "#/$defs/target"},
                "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["path", "opts"],
            "$defs": {"target": {"type": "string", "enum": ["a", "b"]}}
        });
        let reduced = parameters(&schema).unwrap();
        assert_eq!(
            reduced,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "p"},
                    "mode": {"type": "string", "enum": ["fast"]},
                    "count": {"type": "integer", "minimum": 0, "nullable": true},
                    "level": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "target": {"type": "string", "enum": ["a", "b"]},
                    "either": {"type": "string", "nullable": true}
                },
                "required": ["path"]
            })
        );
        assert_eq!(
            parameters(&json!({"type": "object", "properties": {}})),
            None
        );
        assert_eq!(parameters(&json!({"type": "object"})), None);
    }
}
