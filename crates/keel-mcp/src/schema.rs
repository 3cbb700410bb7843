//! Checking a call's arguments against an MCP tool's input schema before it is sent.
//!
//! A small validator, not a full JSON Schema implementation: it checks what models get
//! wrong — `type` (with `integer`, and lists of types), `required`, `properties`
//! (recursively), `additionalProperties: false`, `enum`, `const`, `items`, and
//! `anyOf`/`oneOf` (one alternative must fit). Everything else (`pattern`, `format`,
//! bounds, `$ref`) is left to the server, which checks its own inputs anyway. Optional
//! fields sent as `null` are dropped first ([`drop_null_optionals`]). The
//! `jsonschema` crate would check all of it, but even without default features it adds
//! about twenty crates (regex engines, big numbers, URI and e-mail parsers) for checks
//! the server repeats.

use serde_json::{Map, Value};

/// At most this deep into nested values (deeper is left to the server).
const MAX_DEPTH: usize = 32;

/// Removes, from `value` and the objects in it, optional fields (not `required`) whose
/// value is `null` where the field's schema does not allow `null`: small models often
/// send `"limit": null` for "no limit", which keel's typed tools read as absent and many
/// servers refuse.
pub fn drop_null_optionals(schema: &Value, value: &mut Value) {
    drop_nulls(schema, value, 0);
}

fn drop_nulls(schema: &Value, value: &mut Value, depth: usize) {
    let (Some(properties), Value::Object(map)) = (schema.get("properties").and_then(Value::as_object), value)
    else {
        return;
    };
    if depth > MAX_DEPTH {
        return;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    map.retain(|name, field| {
        !(field.is_null()
            && !required.contains(&name.as_str())
            && properties
                .get(name)
                .is_some_and(|p| !type_fits(p.get("type").unwrap_or(&Value::Null), &Value::Null)))
    });
    for (name, field) in map.iter_mut() {
        if let Some(field_schema) = properties.get(name) {
            drop_nulls(field_schema, field, depth + 1);
        }
    }
}

/// The first problem with `value` under `schema`, as `at <path>: <problem>` (the path
/// is empty at the top), or `None` when nothing checked is wrong.
pub fn check(schema: &Value, value: &Value) -> Option<String> {
    let mut path = Vec::new();
    problem(schema, value, &mut path, 0)
        .map(|p| if path.is_empty() { p } else { format!("`{}`: {p}", path.join(".")) })
}

fn problem(schema: &Value, value: &Value, path: &mut Vec<String>, depth: usize) -> Option<String> {
    let Value::Object(schema) = schema else { return None };
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(types) = schema.get("type")
        && !type_fits(types, value)
    {
        return Some(format!("expected {}, got {}", type_text(types), keel_agent::json_kind(value)));
    }
    if let Some(Value::Array(values)) = schema.get("enum")
        && !values.contains(value)
    {
        let list: Vec<String> = values.iter().map(Value::to_string).collect();
        return Some(format!("{value} is not one of {}", list.join(", ")));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return Some(format!("must be {expected}"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = schema.get(key)
            && !alternatives.is_empty()
            && !alternatives.iter().any(|alt| problem(alt, value, &mut Vec::new(), depth + 1).is_none())
        {
            return Some(format!("{} fits none of the allowed shapes", keel_agent::json_kind(value)));
        }
    }
    match value {
        Value::Object(map) => object_problem(schema, map, path, depth),
        Value::Array(items) => {
            let item_schema = schema.get("items")?;
            for (index, item) in items.iter().enumerate() {
                path.push(index.to_string());
                if let Some(p) = problem(item_schema, item, path, depth + 1) {
                    return Some(p);
                }
                path.pop();
            }
            None
        }
        _ => None,
    }
}

fn object_problem(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &mut Vec<String>,
    depth: usize,
) -> Option<String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        let missing: Vec<&str> =
            required.iter().filter_map(Value::as_str).filter(|name| !map.contains_key(*name)).collect();
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
            return Some(format!("missing field {}", list.join(", ")));
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| properties.is_none_or(|p| !p.contains_key(*k)))
            .map(|k| format!("`{k}`"))
            .collect();
        if !unknown.is_empty() {
            return Some(format!("unknown field {}", unknown.join(", ")));
        }
    }
    for (name, field) in map {
        if let Some(field_schema) = properties.and_then(|p| p.get(name)) {
            path.push(name.clone());
            if let Some(p) = problem(field_schema, field, path, depth + 1) {
                return Some(p);
            }
            path.pop();
        }
    }
    None
}

fn type_fits(types: &Value, value: &Value) -> bool {
    match types {
        Value::String(ty) => one_type_fits(ty, value),
        Value::Array(types) => types.iter().filter_map(Value::as_str).any(|ty| one_type_fits(ty, value)),
        _ => true,
    }
}

fn one_type_fits(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        // 3.0 is an integer in JSON Schema.
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => true,
    }
}

fn type_text(types: &Value) -> String {
    match types {
        Value::Array(types) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        Value::String(ty) => match ty.as_str() {
            "object" | "array" | "integer" => format!("an {ty}"),
            other => format!("a {other}"),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "depth": {"type": "integer"},
                "mode": {"enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "range": {
                    "type": "object",
                    "properties": {"start": {"type": "number"}},
                    "required": ["start"],
                    "additionalProperties": false,
                },
                "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "required": ["path"],
        })
    }

    #[test]
    fn fitting_arguments_pass_and_extra_fields_are_the_servers_business() {
        let fine = json!({"path": "a", "depth": 3.0, "mode": "fast", "tags": ["x"], "range": {"start": 1.5},
                          "id": 7, "extra": true});
        assert_eq!(check(&schema(), &fine), None);
        assert_eq!(check(&json!({}), &json!({"anything": [1]})), None);
        assert_eq!(check(&json!(true), &json!(5)), None);
    }

    #[test]
    fn optional_fields_sent_as_null_are_dropped_unless_null_is_allowed() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "head": {"type": "number"},
                "tail": {"type": ["number", "null"]},
                "range": {"type": "object", "properties": {"start": {"type": "number"}}},
            },
            "required": ["path"],
        });
        let mut value =
            json!({"path": null, "head": null, "tail": null, "range": {"start": null}, "other": null});
        drop_null_optionals(&schema, &mut value);
        assert_eq!(value, json!({"path": null, "tail": null, "range": {}, "other": null}));
        assert_eq!(check(&schema, &value).as_deref(), Some("`path`: expected a string, got null"));
    }

    #[test]
    fn each_problem_names_the_field_and_what_was_expected() {
        let cases = [
            (json!({}), "missing field `path`"),
            (json!({"path": 5}), "`path`: expected a string, got an integer"),
            (json!({"path": "a", "depth": 1.5}), "`depth`: expected an integer, got a number"),
            (json!({"path": "a", "mode": "medium"}), r#"`mode`: "medium" is not one of "fast", "slow""#),
            (json!({"path": "a", "tags": ["x", 2]}), "`tags.1`: expected a string, got an integer"),
            (json!({"path": "a", "range": {}}), "`range`: missing field `start`"),
            (json!({"path": "a", "range": {"start": 1, "end": 2}}), "`range`: unknown field `end`"),
            (json!({"path": "a", "id": true}), "`id`: a boolean fits none of the allowed shapes"),
            (json!([]), "expected an object, got an array"),
        ];
        for (value, expected) in cases {
            assert_eq!(check(&schema(), &value).as_deref(), Some(expected), "{value}");
        }
    }
}
