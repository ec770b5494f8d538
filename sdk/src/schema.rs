//! A small builder for the JSON Schema of a tool's arguments.
//!
//! ```ignore
//! Schema::object()
//!     .required("file_path", Schema::string("Path of the file"))
//!     .optional("limit", Schema::integer("How many lines").minimum(1))
//!     .into()
//! ```

use serde_json::{Map, Value, json};

/// A JSON Schema value. Build one with the constructors, or wrap any JSON
/// with [`Schema::raw`].
#[derive(Debug, Clone, PartialEq)]
pub struct Schema(Value);

impl Schema {
    /// A schema from arbitrary JSON.
    pub fn raw(value: Value) -> Self {
        Schema(value)
    }

    /// A string with a description.
    pub fn string(description: &str) -> Self {
        Schema(json!({ "type": "string", "description": description }))
    }

    /// An integer with a description.
    pub fn integer(description: &str) -> Self {
        Schema(json!({ "type": "integer", "description": description }))
    }

    /// A number with a description.
    pub fn number(description: &str) -> Self {
        Schema(json!({ "type": "number", "description": description }))
    }

    /// A boolean with a description.
    pub fn boolean(description: &str) -> Self {
        Schema(json!({ "type": "boolean", "description": description }))
    }

    /// An array of `items` with a description.
    pub fn array(items: Schema, description: &str) -> Self {
        Schema(json!({ "type": "array", "items": items.0, "description": description }))
    }

    /// One of a fixed set of strings.
    pub fn string_enum(values: &[&str], description: &str) -> Self {
        Schema(json!({ "type": "string", "enum": values, "description": description }))
    }

    /// An object; add its properties with [`ObjectSchema::required`] and
    /// [`ObjectSchema::optional`].
    pub fn object() -> ObjectSchema {
        ObjectSchema::default()
    }

    /// Add a `minimum` bound (for integers and numbers).
    pub fn minimum(self, min: i64) -> Self {
        self.with("minimum", json!(min))
    }

    /// Add a `maximum` bound (for integers and numbers).
    pub fn maximum(self, max: i64) -> Self {
        self.with("maximum", json!(max))
    }

    /// Add a `default` value (documentation for the model; the host does not
    /// fill it in).
    pub fn default_value(self, value: Value) -> Self {
        self.with("default", value)
    }

    /// Set any other keyword.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        if let Value::Object(map) = &mut self.0 {
            map.insert(key.to_string(), value);
        }
        self
    }

    /// The schema as JSON.
    pub fn to_value(&self) -> &Value {
        &self.0
    }
}

/// An object schema under construction. Unknown properties are rejected
/// (`additionalProperties: false`) so a misspelled argument is an error the
/// model sees, not a silently ignored field.
#[derive(Debug, Clone, Default)]
pub struct ObjectSchema {
    properties: Map<String, Value>,
    required: Vec<String>,
}

impl ObjectSchema {
    /// A property the model must give.
    pub fn required(mut self, name: &str, schema: Schema) -> Self {
        self.properties.insert(name.to_string(), schema.0);
        self.required.push(name.to_string());
        self
    }

    /// A property the model may give.
    pub fn optional(mut self, name: &str, schema: Schema) -> Self {
        self.properties.insert(name.to_string(), schema.0);
        self
    }
}

impl From<ObjectSchema> for Schema {
    fn from(object: ObjectSchema) -> Schema {
        Schema(json!({
            "type": "object",
            "properties": object.properties,
            "required": object.required,
            "additionalProperties": false,
        }))
    }
}
