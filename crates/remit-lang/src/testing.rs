//! Policy tests: expected decisions for requests, written by policy authors in `*.tests.toml` files
//! (see docs/testing.md). This module parses a test file and runs its cases against a checked program.

use serde_json::{Map, Value};

use crate::eval::{decide, Decision, Obligation};
use crate::ir::Program;

/// One parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// Policy files relative to the test file; empty means every `.remit` file of its folder.
    pub policy: Vec<String>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub request: Value,
    pub expect: String,
    pub reasons: Option<Vec<String>>,
    pub missing_approvals: Option<Vec<String>>,
    pub obligations: Option<Vec<String>>,
    /// `[case.decision]`: fields of the decision's JSON, each compared whole (e.g. `escalate_to`,
    /// `missing_approvals` with every field, `credential`).
    pub decision: Option<Map<String, Value>>,
    /// Why the case as written cannot run (a missing `expect`, an unknown key, …): it fails with this, and the
    /// file's other cases still run.
    pub invalid: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    /// What differed from the expectation; empty when the case passed.
    pub failures: Vec<String>,
    /// The interpreter's decision; none for a case that is not valid.
    pub decision: Option<Decision>,
}

/// The keys of a test file, of its `[defaults]` and of a case.
const FILE_KEYS: [&str; 3] = ["policy", "defaults", "case"];
const DEFAULTS_KEYS: [&str; 1] = ["request"];
const CASE_KEYS: [&str; 8] =
    ["name", "expect", "reasons", "missing_approvals", "obligations", "decision", "request", "unset"];

/// An error naming the first key of `table` that is not one of `known`, with the closest known one.
fn unknown_key(table: &Map<String, Value>, known: &[&str], place: &str) -> Result<(), String> {
    let Some(key) = table.keys().find(|k| !known.contains(&k.as_str())) else { return Ok(()) };
    let hint = match crate::diag::did_you_mean(key, known.iter().copied()) {
        Some(close) => format!("; did you mean `{close}`?"),
        None => format!(" (known keys: `{}`)", known.join("`, `")),
    };
    Err(format!("unknown key `{key}` in {place}{hint}"))
}

/// Parses a test file's TOML text. An error here concerns the whole file; a case that is not valid is kept, with
/// [`Case::invalid`] saying why.
pub fn parse(text: &str) -> Result<TestFile, String> {
    let doc: toml::Value = toml::from_str(text).map_err(|e| e.to_string())?;
    let doc = to_json(doc);
    if let Some(table) = doc.as_object() {
        unknown_key(table, &FILE_KEYS, "the test file")?;
    }
    if let Some(defaults) = doc.get("defaults") {
        let table = defaults.as_object().ok_or("`defaults` must be a table (`[defaults.request]`)")?;
        unknown_key(table, &DEFAULTS_KEYS, "`[defaults]`")?;
    }
    let policy = string_list(doc.get("policy"), "policy")?.unwrap_or_default();
    let defaults = doc.pointer("/defaults/request").cloned().unwrap_or(Value::Object(Map::new()));
    let cases = doc.get("case").and_then(Value::as_array).ok_or("a test file needs at least one `[[case]]`")?;
    let mut out = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let name = case.get("name").and_then(Value::as_str).map_or(format!("case {}", index + 1), str::to_string);
        out.push(parse_case(case, &defaults, &name).unwrap_or_else(|invalid| Case {
            name: name.clone(),
            request: Value::Null,
            expect: String::new(),
            reasons: None,
            missing_approvals: None,
            obligations: None,
            decision: None,
            invalid: Some(invalid),
        }));
    }
    Ok(TestFile { policy, cases: out })
}

fn parse_case(case: &Value, defaults: &Value, name: &str) -> Result<Case, String> {
    let table = case.as_object().ok_or("a case must be a table (`[[case]]`)")?;
    unknown_key(table, &CASE_KEYS, "a case")?;
    let expect = case.get("expect").and_then(Value::as_str).ok_or("missing `expect`")?;
    if !matches!(expect, "allow" | "deny" | "escalate") {
        return Err(format!("`expect` must be allow, deny or escalate, not `{expect}`"));
    }
    let mut request = defaults.clone();
    if let Some(overrides) = case.get("request") {
        merge(&mut request, overrides);
    }
    for path in string_list(case.get("unset"), "unset")?.unwrap_or_default() {
        unset(&mut request, &path);
    }
    Ok(Case {
        name: name.to_string(),
        request,
        expect: expect.to_string(),
        reasons: string_list(case.get("reasons"), "reasons")?,
        missing_approvals: string_list(case.get("missing_approvals"), "missing_approvals")?,
        obligations: string_list(case.get("obligations"), "obligations")?,
        decision: match case.get("decision") {
            None => None,
            Some(Value::Object(fields)) => Some(fields.clone()),
            Some(_) => return Err("`decision` must be a table of decision fields".into()),
        },
        invalid: None,
    })
}

/// Which engines decide a test file's cases (`remit test --engine`). The interpreter always decides (it is the
/// reference); each other engine chosen must write exactly its bytes, so the expectations, checked on the
/// interpreter's decision, hold for every engine chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The reference interpreter only (`crate::eval`).
    Interpreter,
    /// The module's runtime (crates/remit-rt) called natively over the policy image (`crate::native`): the
    /// default, so that `remit test` runs the code gateways run.
    #[default]
    Native,
    /// The decision module `remit build` writes (`wasm::compile`), in the host the caller passes ([`ModuleHost`]:
    /// wasmtime in the `remit` binary).
    Module,
    /// All three.
    All,
}

impl Engine {
    pub fn parse(name: &str) -> Option<Engine> {
        Some(match name {
            "interpreter" => Engine::Interpreter,
            "native" => Engine::Native,
            // `module-v2` was the new module's name while `remit build` still wrote the hand-written one.
            "module" | "module-v2" => Engine::Module,
            "all" => Engine::All,
            _ => return None,
        })
    }
}

/// Loads a decision module (the bytes `wasm::compile` wrote) into something that decides requests: how
/// [`Engine::Module`] runs the module. The language crate runs no WebAssembly itself (it does not depend on a host);
/// the `remit` binary passes wasmtime's (`remit-host`).
pub type ModuleHost<'a> = &'a dyn Fn(&[u8]) -> Result<LoadedModule, String>;

/// A loaded decision module: request bytes in, decision bytes out.
pub type LoadedModule = Box<dyn FnMut(&[u8]) -> Vec<u8>>;

/// The engines of one run, made once per program.
struct Engines {
    native: Option<crate::native::Native>,
    module: Option<LoadedModule>,
}

impl Engines {
    fn new(program: &Program, engine: Engine, host: Option<ModuleHost<'_>>) -> Result<Engines, String> {
        let native = match engine {
            Engine::Native | Engine::All => Some(crate::native::Native::new(program).map_err(|e| e.to_string())?),
            _ => None,
        };
        let module = match engine {
            Engine::Module | Engine::All => {
                let wasm = crate::wasm::compile(program).map_err(|e| e.to_string())?;
                let host = host.ok_or("no module host was given to run the decision module")?;
                Some(host(&wasm)?)
            }
            _ => None,
        };
        Ok(Engines { native, module })
    }
}

/// Runs every case of a test file with the interpreter.
pub fn run(program: &Program, file: &TestFile) -> Vec<Outcome> {
    run_with(program, file, Engine::Interpreter, None).unwrap_or_default()
}

/// Runs every case of a test file with the chosen engines (the module in `host`); an error when an engine cannot be
/// made for the program.
pub fn run_with(
    program: &Program,
    file: &TestFile,
    engine: Engine,
    host: Option<ModuleHost<'_>>,
) -> Result<Vec<Outcome>, String> {
    let mut engines = Engines::new(program, engine, host)?;
    Ok(file.cases.iter().map(|case| run_case(program, case, &mut engines)).collect())
}

fn run_case(program: &Program, case: &Case, engines: &mut Engines) -> Outcome {
    if let Some(invalid) = &case.invalid {
        return Outcome { name: case.name.clone(), failures: vec![format!("invalid case: {invalid}")], decision: None };
    }
    let request = case.request.to_string();
    let decision = decide(program, request.as_bytes());
    let mut failures = Vec::new();
    let expected = decision.to_json();
    let others = [
        ("native engine", engines.native.as_mut().map(|n| n.decide(request.as_bytes()))),
        ("module", engines.module.as_mut().map(|m| m(request.as_bytes()))),
    ];
    for (name, bytes) in others {
        if let Some(bytes) = bytes.filter(|b| b != expected.as_bytes()) {
            failures.push(format!("the {name} disagrees with the interpreter: {}", String::from_utf8_lossy(&bytes)));
        }
    }
    let outcome = decision.outcome.as_str();
    if outcome != case.expect {
        failures.push(format!("expected `{}`, got `{outcome}`", case.expect));
    }
    let mut compare = |what: &str, expected: &Option<Vec<String>>, actual: Vec<String>| {
        if let Some(expected) = expected {
            let mut expected = expected.clone();
            expected.sort();
            expected.dedup();
            let mut actual = actual;
            actual.sort();
            actual.dedup();
            if expected != actual {
                failures.push(format!("expected {what} {expected:?}, got {actual:?}"));
            }
        }
    };
    compare("reasons", &case.reasons, decision.reasons.clone());
    compare(
        "missing approvals",
        &case.missing_approvals,
        decision.missing_approvals.iter().map(|m| m.kind.clone()).collect(),
    );
    compare("obligations", &case.obligations, decision.obligations.iter().map(short).collect());
    if let Some(fields) = &case.decision {
        let written: Value = serde_json::from_str(&expected).unwrap_or(Value::Null);
        for (key, value) in fields {
            match written.get(key) {
                Some(actual) if actual == value => {}
                Some(actual) => failures.push(format!("expected decision field `{key}` {value}, got {actual}")),
                None => failures.push(format!("the decision has no field `{key}`")),
            }
        }
    }
    Outcome { name: case.name.clone(), failures, decision: Some(decision) }
}

/// `kind:value`, as test files write obligations.
fn short(obligation: &Obligation) -> String {
    match obligation {
        Obligation::ConsumeApproval(id) => format!("consume-approval:{id}"),
        Obligation::RecordOperation(id) => format!("record-operation:{id}"),
        Obligation::IncrementCounter(counter) => format!("increment-counter:{counter}"),
    }
}

fn to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        toml::Value::Table(table) => Value::Object(table.into_iter().map(|(k, v)| (k, to_json(v))).collect()),
    }
}

fn string_list(value: Option<&Value>, field: &str) -> Result<Option<Vec<String>>, String> {
    let Some(value) = value else { return Ok(None) };
    let items = value.as_array().ok_or(format!("`{field}` must be a list of strings"))?;
    items
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or(format!("`{field}` must be a list of strings")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Deep merge of tables; anything else (arrays included) replaces.
fn merge(base: &mut Value, overrides: &Value) {
    match (base, overrides) {
        (Value::Object(base), Value::Object(overrides)) => {
            for (key, value) in overrides {
                match base.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, overrides) => *base = overrides.clone(),
    }
}

fn unset(value: &mut Value, path: &str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut current = value;
    for part in parts {
        match current.get_mut(part) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(object) = current.as_object_mut() {
        object.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_merge_deeply_and_unset_removes() {
        let file = parse(
            r#"
            [defaults.request]
            subject = { id = "a" }
            context = { mandate = "m", now = "2026-01-01T00:00:00Z", operation_id = "op" }
            [[case]]
            name = "x"
            expect = "deny"
            unset = ["context.operation_id"]
            [case.request.context]
            mandate = "other"
            "#,
        )
        .unwrap();
        let request = &file.cases[0].request;
        assert_eq!(request.pointer("/context/mandate").unwrap(), "other");
        assert_eq!(request.pointer("/context/now").unwrap(), "2026-01-01T00:00:00Z");
        assert!(request.pointer("/context/operation_id").is_none());
        assert_eq!(request.pointer("/subject/id").unwrap(), "a");
    }

    #[test]
    fn bad_expectations_are_rejected() {
        let file = parse("[[case]]\nname = \"x\"\nexpect = \"maybe\"").unwrap();
        assert!(file.cases[0].invalid.as_ref().unwrap().contains("`expect` must be"));
        assert!(parse("policy = [\"a.remit\"]").is_err());
    }
}
