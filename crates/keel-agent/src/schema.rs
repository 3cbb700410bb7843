//! JSON schemas from Rust argument types, kept small for the wire, and a one-line
//! summary of a schema for error messages.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The JSON schema of `T`, inlined and trimmed of what a model does not need
/// (`$schema`, `title`, integer `format`s, `null` alternatives of optional fields).
pub fn schema_for<T: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Value::Object(root) = &mut value {
        root.remove("title");
        root.remove("$schema");
        // The tool's own description says this; do not send it twice.
        root.remove("description");
        // Unknown fields are rejected when arguments are parsed, with a message that
        // says so; the flag itself only costs bytes in every request.
        root.remove("additionalProperties");
        if !root.contains_key("properties") && root.get("type").and_then(Value::as_str) == Some("object") {
            root.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    trim(&mut value);
    value
}

fn trim(value: &mut Value) {
    let Value::Object(map) = value else {
        if let Value::Array(items) = value {
            items.iter_mut().for_each(trim);
        }
        return;
    };
    // `Option<T>`: "type": ["string", "null"] -> "type": "string".
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t.as_str() != Some("null"));
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    // `Option<Enum>`: "anyOf": [{...}, {"type": "null"}] -> the first schema, merged.
    if let Some(Value::Array(alternatives)) = map.get_mut("anyOf") {
        alternatives.retain(|alt| alt.get("type").and_then(Value::as_str) != Some("null"));
        if alternatives.len() == 1
            && let Some(Value::Object(inner)) = alternatives.pop()
        {
            map.remove("anyOf");
            for (key, value) in inner {
                map.entry(key).or_insert(value);
            }
        }
    }
    // `Option<Enum>` may also list `null` among the values.
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if map.get("type").and_then(Value::as_str) == Some("integer") {
        map.remove("format");
        // `minimum: 0` from unsigned types says nothing a model needs.
        if map.get("minimum").and_then(Value::as_u64) == Some(0) {
            map.remove("minimum");
        }
    }
    // A `null` default says nothing the model needs.
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    for (_, child) in map.iter_mut() {
        trim(child);
    }
}

/// The property names a schema allows, if it describes an object with properties.
pub fn property_names(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}

/// A compact human-and-model-readable summary, e.g.
/// `{path: string (required), offset?: integer, unit?: "celsius" | "fahrenheit"}`.
pub fn summarize(schema: &Value) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return "{}".to_owned();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(name, prop)| {
            let ty = type_of(prop);
            if required.contains(&name.as_str()) {
                format!("{name}: {ty} (required)")
            } else {
                format!("{name}?: {ty}")
            }
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn type_of(prop: &Value) -> String {
    if let Some(values) = prop.get("enum").and_then(Value::as_array) {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    match prop.get("type") {
        Some(Value::String(ty)) if ty == "array" => match prop.get("items") {
            Some(items) => format!("array of {}", type_of(items)),
            None => "array".to_owned(),
        },
        Some(Value::String(ty)) => ty.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "),
        _ => "any".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    /// Weather lookup.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// City name.
        city: String,
        /// Temperature unit.
        unit: Option<Unit>,
        /// How many days.
        #[serde(default)]
        days: u32,
    }

    #[test]
    fn schema_is_inlined_and_trimmed() {
        assert_eq!(
            schema_for::<Args>(),
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit."},
                    "days": {"type": "integer", "description": "How many days.", "default": 0}
                },
                "required": ["city"]
            })
        );
    }

    #[test]
    fn summary_names_required_optional_and_enums() {
        assert_eq!(
            summarize(&schema_for::<Args>()),
            r#"{city: string (required), unit?: "celsius" | "fahrenheit", days?: integer}"#
        );
    }
}
