//! `remit import mcp`: a typed remit tool catalog from an MCP server's `tools/list` (pure: tools in, text out), and
//! the comparison of a catalog on disk with what a server lists now.
//!
//! JSON Schema types become remit types (`string` → string, `integer` → int, `number` → decimal, `boolean` → bool,
//! an array of those → `set<…>`, a string `enum` → a declared enum); each parameter says whether the server requires
//! it; `readOnlyHint` makes a read-only research tool, anything else has side effects (MCP's defaults: not read-only,
//! destructive) and a `TODO` where the author must choose its effect classes. Names are kept exactly: a tool whose
//! MCP name is not an identifier is declared quoted (`tool "get-sum"(…)`), one that cannot be a tool name at all is
//! left out with a note (so it stays undeclared, hence denied), and a parameter that has no remit type or name
//! makes its tool `open arguments` with a note (no rule can read it).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

/// Words remit reserves (grammar/remit.pest `keyword`): never names.
const KEYWORDS: [&str; 11] =
    ["and", "or", "not", "in", "where", "else", "true", "false", "under", "contains", "within"];

/// Whether remit can declare `name` as written: `[a-z_][a-z0-9_]*`, not a keyword.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') && !KEYWORDS.contains(&name)
}

/// One parameter as imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedParam {
    pub name: String,
    /// remit's type as written in a declaration; `None` when the schema has none remit can express.
    pub ty: Option<String>,
    pub required: bool,
    /// The schema's type, for notes (`array of object`).
    pub schema: String,
}

/// One tool as imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedTool {
    pub name: String,
    pub description: Option<String>,
    pub params: Vec<ImportedParam>,
    pub read_only: bool,
    pub destructive: bool,
    /// Enums this tool's parameters need: name → variants.
    pub enums: Vec<(String, Vec<String>)>,
}

fn scalar(schema: &Json) -> Option<&'static str> {
    match schema.get("type").and_then(Json::as_str)? {
        "string" => Some("string"),
        "integer" => Some("int"),
        "number" => Some("decimal"),
        "boolean" => Some("bool"),
        _ => None,
    }
}

fn describe(schema: &Json) -> String {
    let ty = schema.get("type").map(|t| t.as_str().map(str::to_string).unwrap_or_else(|| t.to_string()));
    match ty.as_deref() {
        Some("array") => format!("array of {}", schema.get("items").map(describe).unwrap_or_else(|| "anything".into())),
        Some(ty) => ty.to_string(),
        None if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => "a union".into(),
        None => "anything".into(),
    }
}

/// A string enum whose values are all names: its variants.
fn enum_variants(schema: &Json) -> Option<Vec<String>> {
    let values = schema.get("enum")?.as_array()?;
    let names: Option<Vec<String>> =
        values.iter().map(|v| v.as_str().filter(|s| is_name(s)).map(str::to_string)).collect();
    names.filter(|n| !n.is_empty())
}

/// The enum a parameter's `enum` becomes: `TOOL_PARAM` in lowercase, other characters as `_`.
fn enum_name(tool: &str, param: &str) -> String {
    let name: String = format!("{tool}_{param}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    }
}

/// How a catalog names a tool: as it is when it is an identifier, quoted when it is another valid tool name.
fn declared_name(name: &str) -> Option<String> {
    if is_name(name) {
        Some(name.to_string())
    } else if remit_lang::check::is_tool_name(name) {
        Some(format!("\"{name}\""))
    } else {
        None
    }
}

/// Reads one tool of a `tools/list` result.
pub fn import_tool(tool: &Json) -> Option<ImportedTool> {
    let name = tool.get("name")?.as_str()?.to_string();
    let schema = tool.get("inputSchema").cloned().unwrap_or(Json::Null);
    let required: BTreeSet<&str> =
        schema.get("required").and_then(Json::as_array).into_iter().flatten().filter_map(Json::as_str).collect();
    let mut params = Vec::new();
    let mut enums = Vec::new();
    for (param, property) in schema.get("properties").and_then(Json::as_object).into_iter().flatten() {
        let mut ty = scalar(property).map(str::to_string);
        let enum_name = enum_name(&name, param);
        if let Some(variants) = enum_variants(property) {
            if is_name(&enum_name) {
                enums.push((enum_name.clone(), variants));
                ty = Some(enum_name);
            }
        } else if property.get("type").and_then(Json::as_str) == Some("array") {
            let items = property.get("items").unwrap_or(&Json::Null);
            ty = scalar(items).map(|t| format!("set<{t}>"));
            if let Some(variants) = enum_variants(items) {
                if is_name(&enum_name) {
                    enums.push((enum_name.clone(), variants));
                    ty = Some(format!("set<{enum_name}>"));
                }
            }
        }
        params.push(ImportedParam {
            name: param.clone(),
            ty,
            required: required.contains(param.as_str()),
            schema: describe(property),
        });
    }
    let hint = |key: &str| tool.get("annotations").and_then(|a| a.get(key)).and_then(Json::as_bool);
    let read_only = hint("readOnlyHint").unwrap_or(false);
    Some(ImportedTool {
        name,
        description: tool.get("description").and_then(Json::as_str).map(str::to_string),
        params,
        read_only,
        destructive: !read_only && hint("destructiveHint").unwrap_or(true),
        enums,
    })
}

/// `text` as `// ` comment lines of at most `width` characters, indented by `indent`.
fn comment(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && indent.len() + 3 + line.len() + 1 + word.len() > width {
                out.push_str(&format!("{indent}// {line}\n"));
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            out.push_str(&format!("{indent}// {line}\n"));
        }
    }
    out
}

/// The catalog file for `tools` (a `tools/list` result's `tools`). `taken`: names the standard library already
/// declares (a tool of that name cannot be declared again). `server`: how the header names the server.
pub fn catalog(tools: &[Json], taken: &BTreeSet<String>, server: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "// The tools of the MCP server {server}, imported by `remit import mcp` from its `tools/list`.\n"
    ));
    out.push_str(
        "// Review every TODO: choose each side-effecting tool's effect classes (and level), and name the argument\n\
         // that is its target (`target args.NAME`) where it has one. A tool the server adds later is not declared,\n\
         // so it is denied until someone imports and classifies it.\n",
    );
    let mut imported: Vec<ImportedTool> = tools.iter().filter_map(import_tool).collect();
    imported.sort_by(|a, b| a.name.cmp(&b.name));
    for tool in &imported {
        out.push('\n');
        let Some(declared_as) = declared_name(&tool.name) else {
            out.push_str(&comment(
                &format!(
                    "TODO: the server's tool `{}` has a name remit cannot declare (1 to 128 ASCII letters, digits and \
                     `_ - . / :`): it is left out, so calls to it are denied.",
                    tool.name
                ),
                "",
                110,
            ));
            continue;
        };
        if taken.contains(&tool.name) {
            out.push_str(&comment(
                &format!(
                    "TODO: the standard library already declares `{}`: the server's tool of that name is left out \
                     (calls to it are decided by the standard library's declaration).",
                    tool.name
                ),
                "",
                110,
            ));
            continue;
        }
        for (name, variants) in &tool.enums {
            out.push_str(&format!("enum {name} {{ {} }}\n", variants.join(", ")));
        }
        if let Some(description) = &tool.description {
            out.push_str(&comment(description, "", 110));
        }
        let mut notes = Vec::new();
        let mut declared = Vec::new();
        for p in &tool.params {
            let presence = if p.required { "required" } else { "optional" };
            match (&p.ty, is_name(&p.name)) {
                (Some(ty), true) => declared.push(format!("  {}: {ty}, // {presence}", p.name)),
                (None, _) => notes.push(format!(
                    "TODO: `{}` ({presence}, {}) has no remit type: the tool takes open arguments, and no rule can \
                     read it.",
                    p.name, p.schema
                )),
                (Some(_), false) => notes.push(format!(
                    "TODO: `{}` ({presence}) is not a name remit can declare: the tool takes open arguments, and no \
                     rule can read it.",
                    p.name
                )),
            }
        }
        if declared.is_empty() {
            out.push_str(&format!("tool {declared_as}() {{\n"));
        } else {
            out.push_str(&format!("tool {declared_as}(\n{}\n) {{\n", declared.join("\n")));
        }
        for note in &notes {
            out.push_str(&comment(note, "  ", 110));
        }
        if tool.read_only {
            out.push_str("  effects read_only // the server's readOnlyHint\n  level research\n");
        } else {
            let destructive = if tool.destructive { "destructive" } else { "not destructive" };
            out.push_str(&format!(
                "  // TODO: effect classes (`effects …`) and level: the server says it has side effects ({destructive})\n"
            ));
            out.push_str("  side effects\n");
        }
        if !notes.is_empty() {
            out.push_str("  open arguments\n");
        }
        let target = tool.params.iter().find(|p| {
            p.ty.as_deref() == Some("string")
                && ["path", "uri", "url", "file", "filename", "source"].contains(&p.name.as_str())
        });
        if let Some(target) = target {
            out.push_str(&format!("  // TODO: target args.{} (if that is what the tool acts on)\n", target.name));
        }
        out.push_str("}\n");
    }
    out
}

/// A tool's parameters with their types, to compare a catalog with a server.
pub type Signature = BTreeMap<String, String>;

/// What changed between the tools a catalog declares and the tools a server lists now (both as signatures; only
/// tools the import would declare are compared).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub new: Vec<String>,
    pub removed: Vec<String>,
    /// Tool, and what changed in words.
    pub changed: Vec<(String, String)>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.new.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The signatures the import of `tools` declares.
pub fn signatures(tools: &[Json], taken: &BTreeSet<String>) -> BTreeMap<String, Signature> {
    tools
        .iter()
        .filter_map(import_tool)
        .filter(|t| declared_name(&t.name).is_some() && !taken.contains(&t.name))
        .map(|t| {
            // Only what the catalog declares: a parameter without a remit type or name is not declared.
            let params = t
                .params
                .iter()
                .filter(|p| is_name(&p.name))
                .filter_map(|p| p.ty.clone().map(|ty| (p.name.clone(), ty)))
                .collect();
            (t.name, params)
        })
        .collect()
}

pub fn compare(declared: &BTreeMap<String, Signature>, listed: &BTreeMap<String, Signature>) -> Changes {
    let mut changes = Changes::default();
    for (name, now) in listed {
        match declared.get(name) {
            None => changes.new.push(name.clone()),
            Some(before) if before != now => {
                let mut what = Vec::new();
                for (param, ty) in now {
                    match before.get(param) {
                        None => what.push(format!("new parameter `{param}: {ty}`")),
                        Some(old) if old != ty => what.push(format!("`{param}` is now `{ty}` (was `{old}`)")),
                        Some(_) => {}
                    }
                }
                for param in before.keys().filter(|p| !now.contains_key(*p)) {
                    what.push(format!("parameter `{param}` removed"));
                }
                changes.changed.push((name.clone(), what.join(", ")));
            }
            Some(_) => {}
        }
    }
    changes.removed = declared.keys().filter(|n| !listed.contains_key(*n)).cloned().collect();
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types_map_to_remit_types() {
        let tool = json!({
            "name": "search", "description": "Search things.",
            "inputSchema": {"type": "object", "required": ["query"], "properties": {
                "query": {"type": "string"}, "limit": {"type": "integer"}, "score": {"type": "number"},
                "exact": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
                "order": {"type": "string", "enum": ["asc", "desc"]}, "filter": {"type": "object"}
            }},
            "annotations": {"readOnlyHint": true}
        });
        let imported = import_tool(&tool).unwrap();
        let ty = |n: &str| imported.params.iter().find(|p| p.name == n).unwrap().ty.clone();
        assert_eq!(ty("query").as_deref(), Some("string"));
        assert_eq!(ty("limit").as_deref(), Some("int"));
        assert_eq!(ty("score").as_deref(), Some("decimal"));
        assert_eq!(ty("exact").as_deref(), Some("bool"));
        assert_eq!(ty("tags").as_deref(), Some("set<string>"));
        assert_eq!(ty("order").as_deref(), Some("search_order"));
        assert_eq!(ty("filter"), None);
        assert!(imported.params.iter().find(|p| p.name == "query").unwrap().required);
        assert!(imported.read_only && !imported.destructive);
        let text = catalog(&[tool], &BTreeSet::new(), "test");
        assert!(text.contains("enum search_order { asc, desc }"), "{text}");
        assert!(text.contains("  query: string, // required"), "{text}");
        assert!(text.contains("  open arguments"), "{text}");
        assert!(text.contains("`filter` (optional, object) has no remit type"), "{text}");
    }

    #[test]
    fn other_names_are_quoted_and_impossible_ones_left_out() {
        assert!(is_name("read_file") && !is_name("readFile") && !is_name("in") && !is_name("a-b") && !is_name(""));
        let tools = [
            json!({"name": "getUser", "inputSchema": {}}),
            json!({"name": "get user", "inputSchema": {}}),
            json!({"name": "read_file", "inputSchema": {}}),
            json!({"name": "get-sum", "inputSchema": {"properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}}),
        ];
        let taken = BTreeSet::from(["read_file".to_string()]);
        let text = catalog(&tools, &taken, "test");
        assert!(text.contains("tool \"getUser\"() {"), "{text}");
        assert!(text.contains("enum get_sum_mode { a, b }\n") && text.contains("  mode: get_sum_mode, // optional"));
        assert!(!text.contains("tool \"get user\"") && text.contains("`get user` has a name remit cannot declare"));
        assert!(!text.contains("tool read_file") && text.contains("already declares `read_file`"), "{text}");
    }

    #[test]
    fn changes_name_new_removed_and_changed_tools() {
        let sig = |pairs: &[(&str, &str)]| -> Signature {
            pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        let declared =
            BTreeMap::from([("a".to_string(), sig(&[("x", "string")])), ("b".to_string(), sig(&[("y", "int")]))]);
        let listed =
            BTreeMap::from([("a".to_string(), sig(&[("x", "int"), ("z", "bool")])), ("c".to_string(), sig(&[]))]);
        let changes = compare(&declared, &listed);
        assert_eq!(changes.new, ["c"]);
        assert_eq!(changes.removed, ["b"]);
        assert_eq!(
            changes.changed,
            [("a".to_string(), "`x` is now `int` (was `string`), new parameter `z: bool`".into())]
        );
    }
}
