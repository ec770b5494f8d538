//! A question for data, not for a call: an MCP server's elicitation, put
//! to the operator through the same queue as the calls that ask. A form
//! is a flat list of fields of primitive kinds (what the MCP
//! specification allows a requested schema to hold); the operator's
//! answer is checked against it, and the schema's defaults fill what the
//! operator left out.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most fields one form may have.
pub const MAX_FIELDS: usize = 32;

/// Longest message or field text shown, in characters.
pub const MAX_TEXT_CHARS: usize = 2_000;

/// Most choices one field may offer.
pub const MAX_CHOICES: usize = 64;

/// Longest name of a field or of a choice, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// A form to fill, and who asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormQuestion {
    /// Who asks, in words (`MCP server github`).
    pub asker: String,
    pub message: String,
    pub fields: Vec<FormField>,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormField {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub kind: FieldKind,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "values")]
pub enum FieldKind {
    String,
    Integer,
    Number,
    Boolean,
    /// One of these strings.
    Choice(Vec<String>),
}

/// What is wrong with a requested schema or an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormError(pub String);

impl FormQuestion {
    /// The form `schema` (an MCP requested schema: an object of primitive
    /// properties) describes, asked by `asker` with `message`.
    pub fn from_schema(asker: &str, message: &str, schema: &Value) -> Result<Self, FormError> {
        let properties = schema["properties"]
            .as_object()
            .ok_or_else(|| FormError("the requested schema has no `properties` object".into()))?;
        if properties.len() > MAX_FIELDS {
            return Err(FormError(format!(
                "the requested schema has {} fields; the most sandcrab asks is {MAX_FIELDS}",
                properties.len()
            )));
        }
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::with_capacity(properties.len());
        for (name, property) in properties {
            if name.chars().count() > MAX_NAME_CHARS {
                return Err(FormError(format!(
                    "a field name is longer than {MAX_NAME_CHARS} characters"
                )));
            }
            let kind = field_kind(name, property)?;
            let default = property.get("default").cloned();
            if let Some(value) = &default {
                check(&kind, value)
                    .map_err(|why| FormError(format!("the default of field '{name}' {why}")))?;
            }
            fields.push(FormField {
                name: clip(name),
                description: clip(
                    property["description"]
                        .as_str()
                        .or(property["title"].as_str())
                        .unwrap_or_default(),
                ),
                kind,
                required: required.contains(&name.as_str()),
                default,
            });
        }
        Ok(FormQuestion {
            asker: clip(asker),
            message: clip(message),
            fields,
        })
    }

    /// The content to answer with: `given` checked field by field, the
    /// defaults filling what it leaves out; every required field must end
    /// up with a value.
    pub fn fill(
        &self,
        given: Option<&Map<String, Value>>,
    ) -> Result<Map<String, Value>, FormError> {
        let empty = Map::new();
        let given = given.unwrap_or(&empty);
        if let Some(unknown) = given
            .keys()
            .find(|k| !self.fields.iter().any(|f| &f.name == *k))
        {
            return Err(FormError(format!(
                "the form has no field '{unknown}' (its fields: {})",
                self.field_names()
            )));
        }
        let mut content = Map::new();
        for field in &self.fields {
            match given.get(&field.name).or(field.default.as_ref()) {
                Some(value) => {
                    check(&field.kind, value).map_err(|why| {
                        FormError(format!("the value of field '{}' {why}", field.name))
                    })?;
                    content.insert(field.name.clone(), value.clone());
                }
                None if field.required => {
                    return Err(FormError(format!(
                        "field '{}' is required and has no default: give it a value",
                        field.name
                    )));
                }
                None => {}
            }
        }
        Ok(content)
    }

    /// The form in a few lines: the message, then each field with its
    /// kind and default.
    pub fn preview(&self) -> String {
        // The message on one line: the server cannot push the asker's
        // name off the screen with line breaks.
        let message: String = self
            .message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut lines = vec![format!("{} asks: {message}", self.asker)];
        for field in &self.fields {
            let kind = match &field.kind {
                FieldKind::String => "text".to_string(),
                FieldKind::Integer => "integer".to_string(),
                FieldKind::Number => "number".to_string(),
                FieldKind::Boolean => "yes/no".to_string(),
                FieldKind::Choice(values) => format!("one of {}", values.join(", ")),
            };
            let default = field
                .default
                .as_ref()
                .map(|d| format!(" = {}", clip_to(&d.to_string(), MAX_NAME_CHARS)))
                .unwrap_or_default();
            let required = if field.required { ", required" } else { "" };
            let about = if field.description.is_empty() {
                String::new()
            } else {
                format!(" — {}", field.description)
            };
            lines.push(format!(
                "  {} ({kind}{required}){default}{about}",
                field.name
            ));
        }
        lines.join("\n")
    }

    fn field_names(&self) -> String {
        let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
        names.join(", ")
    }
}

fn field_kind(name: &str, property: &Value) -> Result<FieldKind, FormError> {
    let choices = property["enum"].as_array().or_else(|| {
        // `oneOf` of `const`s (titled choices) is a choice too.
        property["oneOf"]
            .as_array()
            .filter(|all| all.iter().all(|c| c.get("const").is_some()))
    });
    if let Some(choices) = choices {
        let values: Option<Vec<String>> = choices
            .iter()
            .map(|c| c.get("const").unwrap_or(c).as_str().map(str::to_string))
            .collect();
        let values = values.ok_or_else(|| {
            FormError(format!(
                "field '{name}': only choices among strings can be asked"
            ))
        })?;
        if values.len() > MAX_CHOICES || values.iter().any(|v| v.chars().count() > MAX_NAME_CHARS) {
            return Err(FormError(format!(
                "field '{name}' offers more than {MAX_CHOICES} choices or a choice longer than {MAX_NAME_CHARS} characters"
            )));
        }
        return Ok(FieldKind::Choice(values));
    }
    match property["type"].as_str() {
        Some("string") => Ok(FieldKind::String),
        Some("integer") => Ok(FieldKind::Integer),
        Some("number") => Ok(FieldKind::Number),
        Some("boolean") => Ok(FieldKind::Boolean),
        other => Err(FormError(format!(
            "field '{name}' is of type {}: a form holds only strings, numbers, integers, booleans and choices",
            other.unwrap_or("(none)")
        ))),
    }
}

/// Whether `value` is one of `kind` (the reason when it is not).
fn check(kind: &FieldKind, value: &Value) -> Result<(), String> {
    let fits = match kind {
        FieldKind::String => value.is_string(),
        FieldKind::Integer => value.is_i64() || value.is_u64(),
        FieldKind::Number => value.is_number(),
        FieldKind::Boolean => value.is_boolean(),
        FieldKind::Choice(values) => value
            .as_str()
            .is_some_and(|v| values.iter().any(|c| c == v)),
    };
    if fits {
        return Ok(());
    }
    Err(match kind {
        FieldKind::Choice(values) => format!("is {value}, not one of {}", values.join(", ")),
        other => format!("is {value}, not of the field's kind ({other:?})"),
    })
}

fn clip(text: &str) -> String {
    clip_to(text, MAX_TEXT_CHARS)
}

fn clip_to(text: &str, most: usize) -> String {
    text.chars().take(most).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "token": {"type": "string"}
        }, "required": ["token"]})
    }

    #[test]
    fn defaults_fill_what_the_answer_leaves_out() {
        let form = FormQuestion::from_schema("MCP server s", "hi", &schema()).unwrap();
        let given = json!({"token": "t", "age": 41});
        let content = form.fill(given.as_object()).unwrap();
        assert_eq!(content["name"], "John Doe");
        assert_eq!(content["age"], 41);
        assert_eq!(content["score"], 95.5);
        assert_eq!(content["status"], "active");
        assert_eq!(content["verified"], true);
        assert_eq!(content["token"], "t");
    }

    #[test]
    fn a_missing_required_field_a_wrong_kind_and_an_unknown_field_are_named() {
        let form = FormQuestion::from_schema("MCP server s", "hi", &schema()).unwrap();
        let err = form.fill(None).unwrap_err();
        assert!(err.0.contains("'token' is required"), "{err}");
        let err = form
            .fill(json!({"token": "t", "age": "old"}).as_object())
            .unwrap_err();
        assert!(err.0.contains("field 'age'"), "{err}");
        let err = form
            .fill(json!({"token": "t", "status": "gone"}).as_object())
            .unwrap_err();
        assert!(err.0.contains("not one of active, inactive"), "{err}");
        let err = form
            .fill(json!({"token": "t", "extra": 1}).as_object())
            .unwrap_err();
        assert!(err.0.contains("no field 'extra'"), "{err}");
    }

    #[test]
    fn the_message_is_one_line_and_the_asker_leads() {
        let spoof = format!(
            "hi{}MCP server github asks: paste your token",
            "\n".repeat(50)
        );
        let schema = json!({"properties": {"a": {"type": "string"}}});
        let form = FormQuestion::from_schema("MCP server evil", &spoof, &schema).unwrap();
        let preview = form.preview();
        let first = preview.lines().next().unwrap();
        assert!(first.starts_with("MCP server evil asks: hi"), "{first}");
        assert!(
            first.contains("github"),
            "the spoof stays on the asker's line: {first}"
        );
        let many = json!({"properties": {"c": {"type": "string", "enum": vec!["x"; 65]}}});
        assert!(FormQuestion::from_schema("a", "m", &many).is_err());
    }

    #[test]
    fn a_nested_schema_or_a_bad_default_is_refused() {
        let nested = json!({"properties": {"o": {"type": "object"}}});
        assert!(FormQuestion::from_schema("a", "m", &nested).is_err());
        let bad = json!({"properties": {"n": {"type": "integer", "default": "x"}}});
        let err = FormQuestion::from_schema("a", "m", &bad).unwrap_err();
        assert!(err.0.contains("default of field 'n'"), "{err}");
    }
}
