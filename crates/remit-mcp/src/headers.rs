//! The HTTP headers of MCP 2026-07-28 that mirror a message: their values (`Mcp-Name`, `Mcp-Param-*`: plain, or
//! `=?base64?…?=`), and the `x-mcp-header` annotations of a tool's input schema that say which arguments a
//! `tools/call` mirrors into `Mcp-Param-{Name}` headers. Read by the agent side (the HTTP front checks an agent's
//! headers against its message) and written by the upstream side (sent with each message to an HTTP upstream).
//! Depends on no other module of the crate.

use serde_json::Value as Json;

/// A value for `Mcp-Name` (MCP 2026-07-28): as it is when it is visible ASCII and spaces without edge whitespace and
/// does not look like the sentinel; otherwise `=?base64?BASE64?=` of its UTF-8.
pub fn encode_header_value(value: &str) -> String {
    use base64::Engine;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain && !value.is_empty() {
        return value.to_string();
    }
    format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value.as_bytes()))
}

/// The inverse of [`encode_header_value`]; `None` for a malformed sentinel (bad or non-canonical base64, not UTF-8),
/// so a corrupt header never matches.
pub fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_string());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// One `x-mcp-header` annotation of a tool's input schema: the `{Name}` of its `Mcp-Param-{Name}` header and the
/// chain of `properties` keys leading to the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The header's full name.
    pub fn header(&self) -> String {
        format!("Mcp-Param-{}", self.name)
    }

    /// The argument's value in a call's `arguments`, as the header carries it (before encoding): a string as it is,
    /// an integer in decimal, a boolean `true`/`false`; `None` when absent or `null` (then no header is sent).
    pub fn value(&self, arguments: &Json) -> Option<String> {
        match self.argument(arguments)? {
            Json::String(text) => Some(text.clone()),
            Json::Bool(b) => Some(b.to_string()),
            other => Some(other.to_string()),
        }
    }

    /// The argument itself; `None` when absent or `null`.
    pub fn argument<'a>(&self, arguments: &'a Json) -> Option<&'a Json> {
        let mut value = arguments;
        for key in &self.path {
            value = value.get(key)?;
        }
        Some(value).filter(|v| !v.is_null())
    }

    /// Whether a header value (decoded) says the same as the argument `value` of [`ParamHeader::value`]: the same
    /// text, or for a number the same number (`42` and `42.0` alike).
    pub fn matches(header: &str, value: &str, arguments_value_is_number: bool) -> bool {
        if arguments_value_is_number {
            return match (header.trim().parse::<f64>(), value.parse::<f64>()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
        }
        header == value
    }
}

/// The `x-mcp-header` annotations of a tool's `inputSchema` (MCP 2026-07-28), or why they make the tool invalid: a
/// name that is empty, not an HTTP token (`1*tchar`) or not case-insensitively unique; a parameter whose `type` is not
/// `string`, `integer` or `boolean`; an annotation not reached from the root through `properties` keys only (under
/// `items`, `oneOf`, `$ref` …), or not a string.
pub fn param_headers(schema: &Json) -> Result<Vec<ParamHeader>, String> {
    fn walk(node: &Json, path: Option<&[String]>, found: &mut Vec<ParamHeader>) -> Result<(), String> {
        let Json::Object(fields) = node else {
            if let Json::Array(items) = node {
                for item in items {
                    walk(item, None, found)?;
                }
            }
            return Ok(());
        };
        if let Some(annotation) = fields.get("x-mcp-header") {
            let path = path
                .filter(|p| !p.is_empty())
                .ok_or("`x-mcp-header` on a schema not reached from the root through `properties` only".to_string())?;
            let Json::String(name) = annotation else { return Err("`x-mcp-header` is not a string".into()) };
            let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if name.is_empty() || !name.chars().all(tchar) {
                return Err(format!("`x-mcp-header` `{name}` is not an HTTP field-name token"));
            }
            match fields.get("type").and_then(Json::as_str) {
                Some("string" | "integer" | "boolean") => {}
                _ => {
                    return Err(format!(
                        "`x-mcp-header` `{name}` is on a parameter that is not a string, integer or boolean"
                    ))
                }
            }
            if found.iter().any(|h| h.name.eq_ignore_ascii_case(name)) {
                return Err(format!("`x-mcp-header` `{name}` appears more than once"));
            }
            found.push(ParamHeader { name: name.clone(), path: path.to_vec() });
        }
        for (key, value) in fields {
            match key.as_str() {
                // Values, not schemas.
                "x-mcp-header" | "enum" | "const" | "default" | "examples" => {}
                "properties" => {
                    let Json::Object(properties) = value else { continue };
                    for (name, property) in properties {
                        let reached = path.map(|p| {
                            let mut p = p.to_vec();
                            p.push(name.clone());
                            p
                        });
                        walk(property, reached.as_deref(), found)?;
                    }
                }
                _ => walk(value, None, found)?,
            }
        }
        Ok(())
    }
    let mut found = Vec::new();
    walk(schema, Some(&[]), &mut found)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn param_header_annotations_are_read_and_invalid_ones_refused() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "target": {"type": "object", "properties": {"tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
            "tags": {"type": "array", "items": {"type": "string"}, "default": [{"x-mcp-header": "NotASchema"}]},
        }});
        let found = param_headers(&schema).unwrap();
        assert_eq!(
            found,
            [
                ParamHeader { name: "Region".into(), path: vec!["region".into()] },
                ParamHeader { name: "Tenant".into(), path: vec!["target".into(), "tenant".into()] },
            ]
        );
        let arguments = json!({"region": "us-west1", "target": {"tenant": 42}});
        assert_eq!(found[0].value(&arguments).as_deref(), Some("us-west1"));
        assert_eq!(found[1].value(&arguments).as_deref(), Some("42"));
        assert_eq!(found[0].value(&json!({"region": null})), None);
        assert!(ParamHeader::matches("42.0", "42", true) && !ParamHeader::matches("43", "42", true));
        let invalid =
            |property: Json| param_headers(&json!({"type": "object", "properties": {"p": property}})).unwrap_err();
        assert!(invalid(json!({"type": "number", "x-mcp-header": "P"})).contains("not a string, integer"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": ""})).contains("token"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": "Bad Name"})).contains("token"));
        assert!(invalid(json!({"type": "string", "x-mcp-header": "A\r\nX-Injected: 1"})).contains("token"));
        let nested = json!({"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}});
        assert!(invalid(nested).contains("properties"));
        let composed = json!({"oneOf": [{"type": "string", "x-mcp-header": "One"}]});
        assert!(invalid(composed).contains("properties"));
        let twice = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "Same"}, "b": {"type": "boolean", "x-mcp-header": "same"}}});
        assert!(param_headers(&twice).unwrap_err().contains("more than once"));
        assert!(param_headers(&json!({"type": "string", "x-mcp-header": "Root"})).is_err(), "the root is no parameter");
    }

    #[test]
    fn header_values_round_trip_and_only_unsafe_ones_are_encoded() {
        for (value, encoded) in [
            ("get_weather", "get_weather"),
            ("get-sum", "get-sum"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(encode_header_value(value), encoded);
            assert_eq!(decode_header_value(encoded).as_deref(), Some(value));
        }
        assert_eq!(decode_header_value("=?base64?not base64?="), None);
        assert_eq!(decode_header_value("=?base64?IHBhZGRlZCB=?="), None, "non-canonical");
        assert_eq!(decode_header_value("=?base64?/w==?="), None, "not UTF-8");
    }
}
