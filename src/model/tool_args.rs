//! Arguments for a tool call, made from the tool's JSON Schema (`parameters`).
//!
//! A stub has no idea what the user wants, so it picks what the schema author suggested, in
//! order: `default`, `const`, the first of `examples`, the first of `enum`; otherwise the
//! smallest value the schema accepts (`minimum`, `minLength` characters, `minItems` items, the
//! `required` properties). An app's handler then always gets arguments its own schema validates,
//! and a schema with examples makes the arguments read like a real call. Only the parts of JSON
//! Schema that function tools use are understood; anything else yields the type's plain value.

use serde_json::{Map, Value, json};

/// Nesting deeper than this becomes `null`: schemas can be recursive through `$ref`-free
/// self-similarity only so far, and a 4 KB tool definition never needs more.
const MAX_DEPTH: usize = 16;

/// The arguments object for a tool with these `parameters`.
pub fn arguments_for(parameters: &Value) -> Value {
    match value_for(parameters, 0) {
        v @ Value::Object(_) => v,
        // `parameters` must describe an object; a missing or odd schema gets `{}`.
        _ => Value::Object(Map::new()),
    }
}

fn value_for(schema: &Value, depth: usize) -> Value {
    let Value::Object(s) = schema else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    for key in ["default", "const"] {
        if let Some(v) = s.get(key) {
            return v.clone();
        }
    }
    for key in ["examples", "enum"] {
        if let Some(v) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return v.clone();
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return value_for(first, depth + 1);
        }
    }
    let kind = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        // `["string", "null"]`: the first non-null type.
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "null",
    };
    match kind {
        "object" => object_for(s, depth),
        "array" => {
            let n = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(16);
            let item = s.get("items").cloned().unwrap_or(Value::Null);
            Value::Array((0..n).map(|_| value_for(&item, depth + 1)).collect())
        }
        "string" => string_for(s),
        "integer" => json!(number_for(s).ceil() as i64),
        "number" => json!(number_for(s)),
        "boolean" => Value::Bool(false),
        _ => Value::Null,
    }
}

/// The required properties, plus any optional one the schema author gave a value for.
fn object_for(s: &Map<String, Value>, depth: usize) -> Value {
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    if let Some(Value::Object(props)) = s.get("properties") {
        for (name, prop) in props {
            let suggested = ["default", "const", "examples", "enum"]
                .iter()
                .any(|k| prop.get(k).is_some());
            if required.contains(&name.as_str()) || suggested {
                out.insert(name.clone(), value_for(prop, depth + 1));
            }
        }
    }
    Value::Object(out)
}

fn string_for(s: &Map<String, Value>) -> Value {
    let by_format = match s.get("format").and_then(Value::as_str) {
        Some("date") => Some("2026-01-01"),
        Some("date-time") => Some("2026-01-01T00:00:00Z"),
        Some("time") => Some("00:00:00"),
        Some("email") => Some("user@example.com"),
        Some("uri" | "url") => Some("https://example.com/"),
        Some("uuid") => Some("00000000-0000-4000-8000-000000000000"),
        _ => None,
    };
    if let Some(v) = by_format {
        return Value::from(v);
    }
    let n = s
        .get("minLength")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(256) as usize;
    Value::from("a".repeat(n))
}

fn number_for(s: &Map<String, Value>) -> f64 {
    let get = |k: &str| s.get(k).and_then(Value::as_f64);
    if let Some(min) = get("minimum") {
        min
    } else if let Some(min) = get("exclusiveMinimum") {
        min + 1.0
    } else if let Some(max) = get("maximum").filter(|m| *m < 0.0) {
        max
    } else if let Some(max) = get("exclusiveMaximum").filter(|m| *m <= 0.0) {
        max - 1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_win_over_minimal_values() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "examples": ["Paris", "Oslo"]},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "default": 3},
                "detail": {"type": "boolean"},
                "note": {"type": "string"}
            },
            "required": ["city", "unit", "detail"]
        });
        assert_eq!(
            arguments_for(&schema),
            json!({"city": "Paris", "unit": "celsius", "days": 3, "detail": false})
        );
    }

    #[test]
    fn minimal_values_satisfy_the_bounds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "minLength": 3},
                "count": {"type": "integer", "minimum": 2},
                "ratio": {"type": "number", "exclusiveMinimum": 0.5},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 2},
                "when": {"type": "string", "format": "date"},
                "maybe": {"type": ["string", "null"], "minLength": 1},
                "pick": {"anyOf": [{"type": "integer", "minimum": 7}, {"type": "string"}]},
                "inner": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
            },
            "required": ["code", "count", "ratio", "tags", "when", "maybe", "pick", "inner"]
        });
        assert_eq!(
            arguments_for(&schema),
            json!({
                "code": "aaa", "count": 2, "ratio": 1.5, "tags": ["a", "a"],
                "when": "2026-01-01", "maybe": "a", "pick": 7, "inner": {"x": 0.0}
            })
        );
    }

    #[test]
    fn odd_schemas_give_an_empty_object() {
        assert_eq!(arguments_for(&Value::Null), json!({}));
        assert_eq!(arguments_for(&json!({"type": "string"})), json!({}));
        assert_eq!(arguments_for(&json!({})), json!({}));
        // Deep nesting ends in null rather than recursing without bound.
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"a": deep}, "required": ["a"]});
        }
        let v = arguments_for(&deep);
        assert!(v.is_object());
    }
}
