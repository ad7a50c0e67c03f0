//! Differential testing on random policies: random catalogs and mandates (every parameter type, every operator,
//! nested connectives, gates, limits, scopes, budgets, facts, windows, levels, stops; subjects' and resources'
//! attributes, comparisons of two attributes, memberships and relations; calendars in Berlin and New York and
//! durations between timestamps) are checked, compiled to wasm, and asked random requests (well-typed, mistyped,
//! missing; with properties, relation answers and holidays, malformed now and then; instants near daylight-saving
//! transitions and holidays); the module must answer exactly as the
//! interpreter, for decisions and tool listings.

mod support;

use remit_lang::check::{check_with, Options};
use support::rng::XorShift as Rng;
use support::wasm::Wasm;
use wasmtime::Engine;

const PARAMS: [(&str, &str); 11] = [
    ("n", "int"),
    ("d", "decimal"),
    ("amount", "money"),
    ("delta", "signed money"),
    ("s", "string"),
    ("flag", "bool"),
    ("when", "timestamp"),
    ("wait", "duration"),
    ("tier", "tier"),
    ("vendor", "vendor"),
    ("tags", "set<string>"),
];

fn literal(rng: &mut Rng, ty: &str) -> String {
    match ty {
        "int" => rng.pick(&["0", "5", "-3", "100", "7"]).to_string(),
        "decimal" => rng.pick(&["1.5", "0", "-2.25", "10", "3.000000001"]).to_string(),
        "money" => rng.pick(&["10 USD", "99.99 USD", "0 USD", "100 USD"]).to_string(),
        "signed money" => rng.pick(&["10 USD", "-5 USD", "0 USD", "-100 USD"]).to_string(),
        "string" | "vendor" => format!("\"{}\"", rng.pick(&["a", "acme", "a/b", "", "é", "x\\\"y", "a/"])),
        "bool" => rng.pick(&["true", "false"]).to_string(),
        "timestamp" => rng.pick(&["2026-12-01T00:00:00Z", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"]).to_string(),
        "duration" => rng.pick(&["60s", "15m", "1h", "0s"]).to_string(),
        "tier" => format!("\"{}\"", rng.pick(&["gold", "silver", "bronze"])),
        _ => "\"a\"".to_string(),
    }
}

/// The subjects', resources' and relations' declarations every random policy has (issue 30).
const WORLD: &str = "subject sw { team: string from properties, cap: money from properties, \
    accounts: set<string> from properties, on_call: bool from properties, tier: tier from properties }
resource rw { owner: string from properties, total: money from properties, credit: signed money from properties, \
    due: timestamp from properties }
relation member_of(string, string) from properties
relation can(string, string, string) from properties
calendar cal_b in \"Europe/Berlin\" {
  mon..fri 09:00-17:00
  sun 02:00-03:00
  closed on holidays
}
calendar cal_ny in \"America/New_York\" {
  sun 01:00-03:00
  sat 22:00-02:00
}
calendar cal_d in \"Europe/Berlin\" {
  tue 09:00-12:00
  2026-12-20 10:00-14:00
  2026-12-30..2027-01-02 22:00-02:00
  2026-10-25 02:00-03:00
  closed on 2026-12-15, 2026-12-31..2027-01-01
}
";

/// A condition on the world: a subject's or resource's attribute against a literal, two attributes compared,
/// membership in a set attribute, the principal as an operand, a relation.
fn world_atom(rng: &mut Rng) -> String {
    let cmp = ["<", "<=", ">", ">=", "==", "!="];
    let term = |rng: &mut Rng| {
        rng.pick(&[
            "subject",
            "principal",
            "resource",
            "resource.owner",
            "subject.team",
            "args.s",
            "args.vendor",
            "\"team:a\"",
            "\"ops\"",
        ])
        .to_string()
    };
    let not = |rng: &mut Rng| if rng.chance(25) { "not " } else { "" };
    match rng.below(14) {
        0 => format!("subject.team {} {}", rng.pick(&["==", "!="]), rng.pick(&["\"ops\"", "\"sales\""])),
        1 => format!("subject.tier {} [\"gold\"]", rng.pick(&["in", "not in"])),
        2 => format!("{}subject.on_call", not(rng)),
        3 => format!(
            "resource.owner {} {}",
            rng.pick(&["==", "!="]),
            rng.pick(&["subject", "principal", "args.s", "args.vendor", "subject.team", "resource"])
        ),
        4 => format!("{}args.amount {} {}", not(rng), rng.pick(&cmp), rng.pick(&["resource.total", "subject.cap"])),
        5 => format!("resource.credit {} args.delta", rng.pick(&cmp)),
        6 => format!("{} {} resource.due", rng.pick(&["args.when", "now"]), rng.pick(&cmp)),
        7 => format!("args.s {} subject.accounts", rng.pick(&["in", "not in"])),
        8 => format!("args.vendor {} [resource.owner, \"acme\", subject.team]", rng.pick(&["in", "not in"])),
        9 => format!("args.tier {} subject.tier", rng.pick(&["==", "!="])),
        10 => format!("resource.total {} {}", rng.pick(&cmp), rng.pick(&["50 USD", "99.99 USD", "0 USD"])),
        11 => format!("{}can(subject, \"{}\", resource)", not(rng), rng.pick(&["edit", "read"])),
        _ => {
            let (a, b) = (term(rng), term(rng));
            format!("{}member_of({a}, {b})", not(rng))
        }
    }
}

/// A condition on time: a timestamp in a calendar (Berlin's, closed on holidays; New York's, across midnight;
/// Berlin's with dated lines and closed dates), or
/// the time between two timestamps compared with a duration.
fn time_atom(rng: &mut Rng) -> String {
    let instant = |rng: &mut Rng| rng.pick(&["now", "args.when", "resource.due"]).to_string();
    if rng.chance(50) {
        let not = if rng.chance(30) { "not " } else { "" };
        format!("{} {not}in {}", instant(rng), rng.pick(&["cal_b", "cal_ny", "cal_d"]))
    } else {
        let (later, earlier) = (instant(rng), instant(rng));
        let cmp = ["<", "<=", ">", ">=", "==", "!="];
        format!("{later} - {earlier} {} {}", rng.pick(&cmp), rng.pick(&["0s", "30m", "1h", "24h", "15m"]))
    }
}

fn atom(rng: &mut Rng, params: &[(&str, &str)]) -> String {
    if rng.chance(20) {
        return world_atom(rng);
    }
    if rng.chance(8) {
        return time_atom(rng);
    }
    let choice = rng.below(10);
    if choice == 0 {
        return format!("level {} {}", rng.pick(&["<=", ">", "=="]), rng.pick(&["research", "draft", "publish"]));
    }
    if choice == 1 {
        return format!("{}resource.id under \"{}\"", rng.pick(&["", "not "]), rng.pick(&["site/", "a", ""]));
    }
    if choice == 2 {
        return format!("subject.scopes contains \"{}\"", rng.pick(&["s1", "s2"]));
    }
    if choice == 3 {
        return format!("context.region {} \"{}\"", rng.pick(&["==", "!="]), rng.pick(&["eu", "us"]));
    }
    if choice == 4 {
        return format!("attempt {} {}", rng.pick(&["<", ">=", "=="]), rng.pick(&["1", "2"]));
    }
    if choice == 5 {
        return format!("now < {}", literal(rng, "timestamp"));
    }
    let (name, ty) = *rng.pick(params);
    let attr = format!("args.{name}");
    match ty {
        "bool" => {
            if rng.chance(50) {
                attr
            } else {
                format!("{attr} == {}", literal(rng, ty))
            }
        }
        "set<string>" => match rng.below(2) {
            0 => format!("{attr} contains \"{}\"", rng.pick(&["a", "b"])),
            _ => format!("{attr} within [\"a\", \"b\"{}]", if rng.chance(50) { ", \"c\"" } else { "" }),
        },
        "string" | "vendor" => match rng.below(3) {
            0 => format!("{attr} under \"{}\"", rng.pick(&["a", "x", ""])),
            1 => format!("{attr} in [{}, {}]", literal(rng, ty), literal(rng, ty)),
            _ => format!("{attr} {} {}", rng.pick(&["==", "!="]), literal(rng, ty)),
        },
        "tier" => format!("{attr} {} [{}]", rng.pick(&["in", "not in"]), literal(rng, ty)),
        _ => format!("{attr} {} {}", rng.pick(&["<", "<=", ">", ">=", "==", "!="]), literal(rng, ty)),
    }
}

fn condition(rng: &mut Rng, params: &[(&str, &str)], depth: u32) -> String {
    match if depth > 1 { 0 } else { rng.below(4) } {
        0 | 1 => atom(rng, params),
        2 => format!(
            "({} {} {})",
            condition(rng, params, depth + 1),
            rng.pick(&["and", "or"]),
            condition(rng, params, depth + 1)
        ),
        _ => format!("not {}", condition(rng, params, depth + 1)),
    }
}

fn policy(rng: &mut Rng) -> String {
    let mut out = String::from(
        "kind vendor\nenum tier { gold, silver, bronze }\ncontext region: string\neffect grp(amount: money)\n",
    );
    out.push_str(WORLD);
    let tools = 1 + rng.below(3);
    for t in 0..tools {
        let params: Vec<String> = PARAMS.iter().map(|(n, ty)| format!("{n}: {ty}")).collect();
        out.push_str(&format!(
            "tool t{t}({}, manifest: string) {{ effects grp level {} {} {} {} }}\n",
            params.join(", "),
            rng.pick(&["research", "draft", "publish"]),
            if rng.chance(30) { "open arguments" } else { "" },
            if rng.chance(60) { "side effects" } else { "" },
            if rng.chance(30) { "requires scope \"s1\", \"s3\"" } else { "" },
        ));
    }
    out.push_str(
        "approval ok_a { binds tool, target, arguments ttl 1h single use }\napproval ok_b { binds manifest ttl 1h }\n",
    );
    for m in 0..1 + rng.below(2) {
        // m1 is sometimes a sub-mandate of m0: gates of the chain, approvals issued up and down it.
        let head = if m == 1 && rng.chance(50) { "under m0".to_string() } else { format!("for \"user:p{m}\"") };
        // Sometimes held by a pattern too (`holder under`): subjects under it, beside it and climbing out of it.
        let holders = if rng.chance(30) { r#""agent:a", under "agent:g/""# } else { r#""agent:a", "agent:b""# };
        out.push_str(&format!("mandate m{m} {head} {{\n  holder {holders}\n"));
        if rng.chance(40) {
            out.push_str("  valid from 2026-12-01T00:00:00Z until 2027-01-01T00:00:00Z\n");
        }
        if rng.chance(30) {
            out.push_str(&format!("  max level {}\n", rng.pick(&["draft", "publish"])));
        }
        if rng.chance(50) {
            out.push_str("  otherwise escalate\n");
        }
        for _ in 0..1 + rng.below(5) {
            let target = if rng.chance(30) { "grp".to_string() } else { format!("t{}", rng.below(tools)) };
            let cond = condition(rng, &PARAMS, 0);
            let line = match rng.below(9) {
                0..=2 => {
                    if rng.chance(30) {
                        format!("allow {target}")
                    } else {
                        format!("allow {target} where {cond}")
                    }
                }
                3 => format!("forbid {target} where {cond}"),
                4 => format!("limit {target}: {cond}"),
                5 => format!(
                    "require approval {} for {target} where {cond}{}",
                    rng.pick(&["ok_a", "ok_b"]),
                    // From a copy of the source: the main stream, and so the mix of outcomes the test requires,
                    // stays as it was before gates could refuse.
                    if Rng(rng.0 ^ 0x9e37_79b9_7f4a_7c15).chance(15) { " else deny" } else { "" }
                ),
                6 => format!("require operation id for {target}"),
                7 => {
                    format!("budget b{}: at most {} calls to {target} per operation", rng.below(1000), 1 + rng.below(2))
                }
                _ => format!(
                    "fact f{} at version {} for {target}{}",
                    rng.below(2),
                    // Version 2 is written as a string (and sent as one, below).
                    ["1", "\"v2\""][rng.below(2)],
                    if rng.chance(50) { " else escalate" } else { "" }
                ),
            };
            out.push_str(&format!("  {line}\n"));
        }
        out.push_str("}\n");
    }
    out
}

fn value(rng: &mut Rng, ty: &str) -> serde_json::Value {
    use serde_json::json;
    if rng.chance(4) {
        return rng.pick(&[json!(null), json!(5), json!("x"), json!(true), json!([1])]).clone();
    }
    match ty {
        "int" => json!(rng.pick(&[0, 5, -3, 100, 7, 6])),
        "decimal" => {
            let text = *rng.pick(&["1.5", "0", "-2.25", "10.0", "\"3.000000001\"", "1e2"]);
            serde_json::from_str(text).unwrap()
        }
        "money" | "signed money" => {
            json!(rng.pick(&["10 USD", "99.99 USD", "100.00 USD", "5 EUR", "101 USD", "-5 USD", "-0.00 USD"]))
        }
        "string" | "vendor" => {
            json!(rng.pick(&["a", "acme", "a/b", "", "é", "x\"y", "ab", "a/../b", "a//b", "a%2Fb", " ", "a\\b"]))
        }
        "bool" => json!(rng.chance(50)),
        "timestamp" => json!(rng.pick(&["2026-12-01T00:00:00Z", "2026-12-15T12:00:00Z", "2027-02-01T00:00:00Z"])),
        "duration" => {
            let text = *rng.pick(&["60", "\"15m\"", "\"2h\"", "0"]);
            serde_json::from_str(text).unwrap()
        }
        "tier" => json!(rng.pick(&["gold", "silver", "bronze", "iron"])),
        _ => json!(rng.pick(&[vec!["a"], vec!["a", "b"], vec![], vec!["c"]])),
    }
}

fn request(rng: &mut Rng, program: &remit_lang::ir::Program) -> Vec<u8> {
    use serde_json::{json, Map, Value};
    let mut args = Map::new();
    for (name, ty) in PARAMS {
        if rng.chance(85) {
            args.insert(name.to_string(), value(rng, ty));
        }
    }
    args.insert("manifest".into(), json!(rng.pick(&["m1", "m2", " "])));
    // An argument no tool declares (closed tools deny it; `open arguments` tools accept it).
    if rng.chance(10) {
        args.insert("extra".into(), json!(1));
    }
    let own_tools = program.tools.iter().filter(|t| t.name.starts_with('t') && t.name.len() == 2).count();
    let extra = usize::from(rng.chance(10));
    let tool = format!("t{}", rng.below(own_tools + extra));
    let extra = usize::from(rng.chance(10));
    let mandate = format!("m{}", rng.below(program.mandates.len() + extra));
    let now = if rng.chance(80) {
        "2026-12-15T12:00:00Z"
    } else {
        *rng.pick(&["2026-11-30T00:00:00Z", "2027-01-01T00:00:00Z"])
    };
    let digest = remit_lang::eval::argument_digest(&tool, &Value::Object(args.clone()));
    let mut approvals = Vec::new();
    for i in 0..rng.below(3) {
        approvals.push(json!({
            "id": if rng.chance(5) { " ".to_string() } else { format!("ap{}", rng.below(3)) },
            "kind": rng.pick(&["ok_a", "ok_b"]),
            "mandate": if rng.chance(70) { mandate.clone() } else { format!("m{}", rng.below(2)) },
            "issued_at": "2026-12-15T11:30:00Z", "expires_at": rng.pick(&["2026-12-15T12:00:00Z", "2026-12-15T13:00:00Z"]),
            "tool": tool, "target": "site/x", "digest": if rng.chance(70) { digest.clone() } else { "sha256:0".into() },
            "manifest": rng.pick(&["m1", "m2"]), "consumed": i == 2,
        }));
    }
    let mut counters = Map::new();
    let mut facts = Map::new();
    for rule in program.mandates.iter().flat_map(|m| m.rules.iter()) {
        match &rule.kind {
            remit_lang::ir::RuleKind::Budget { name, .. } if rng.chance(80) => {
                counters.insert(name.clone(), json!(rng.below(3)));
            }
            remit_lang::ir::RuleKind::Fact { name, .. } if rng.chance(80) => {
                let version = if rng.below(2) == 0 { json!(1) } else { json!("v2") };
                // Now and then the other JSON type with the same digits (from a copy: the main stream stays).
                let version = match Rng(rng.0 ^ 0x51af_d7ed_558c_cd1d).chance(10) {
                    true if version == json!(1) => json!("1"),
                    true => json!(2),
                    false => version,
                };
                facts.insert(name.clone(), version);
            }
            _ => {}
        }
    }
    let mut req = json!({
        "subject": { "id": if rng.chance(80) { "agent:a" } else { rng.pick(&["agent:c", "agent:g/x", "agent:g", "agent:g/../a"]) } },
        "action": { "name": tool, "arguments": args },
        "context": { "mandate": mandate, "now": now, "attempt": rng.below(3), "approvals": approvals,
                     "counters": counters, "facts": facts, "attributes": { "region": rng.pick(&["eu", "us"]) } },
    });
    if rng.chance(80) {
        req["resource"] = json!({ "id": rng.pick(&["site/x", "a/b", "other", "site/../x", " ", "site//x"]) });
    }
    // Near the limits: a resource id and a manifest of 100,000 characters each, repeated by every missing approval.
    if rng.chance(2) {
        let long = "site/".to_string() + &"x".repeat(100_000);
        req["resource"] = json!({ "id": long });
        req["action"]["arguments"]["manifest"] = json!(long);
    }
    if rng.chance(70) {
        req["subject"]["credential"] =
            json!({ "id": "c", "scopes": if rng.chance(50) { vec!["s1", "s2"] } else { vec!["s2"] } });
    }
    if rng.chance(60) {
        req["context"]["operation_id"] = json!(rng.pick(&["op-1", "", " \t"]));
    }
    if rng.chance(10) {
        let named = format!("m{}", rng.below(2));
        // Half the time stops with ids and levels instead, on a mandate or a principal (two: the strongest is named),
        // drawn from a side generator so that the main stream, and so the policies and requests, stay as they were.
        let mut side = Rng((rng.0 ^ 0x9E37_79B9_7F4A_7C15) | 1);
        req["context"]["stops"] = if side.chance(50) {
            json!([named])
        } else {
            let mut stop = || {
                let level = side.pick(&["pause", "cancel", "revoke", "quarantine"]).to_string();
                let id = side.pick(&["STOP-1", "STOP-2", "S\"3"]).to_string();
                if side.chance(50) {
                    json!({ "id": id, "level": level, "mandate": format!("m{}", side.below(2)) })
                } else {
                    json!({ "id": id, "level": level, "principal": format!("user:p{}", side.below(2)) })
                }
            };
            json!([stop(), stop()])
        };
    }
    // The world: the subject's and the resource's properties and the relations' answers, drawn from a side generator
    // so that the rest of the request stays as it was.
    let mut side = Rng((rng.0 ^ 0x3c6e_f372_fe94_f82b) | 1);
    world(&mut side, &mut req);
    req.to_string().into_bytes()
}

/// tests/node/decide.mjs on `requests` (written to files in `dir`): one result per request.
fn node_decide(dir: &std::path::Path, wasm: &[u8], requests: &[Vec<u8>], visible_tools: bool) -> Vec<String> {
    let module = dir.join("policy.wasm");
    std::fs::write(&module, wasm).unwrap();
    let mut command = std::process::Command::new("node");
    command.arg(support::root().join("tests/node/decide.mjs"));
    if visible_tools {
        command.arg("--visible-tools");
    }
    command.arg(&module);
    for (i, request) in requests.iter().enumerate() {
        let path = dir.join(format!("request-{i:05}.json"));
        std::fs::write(&path, request).unwrap();
        command.arg(path);
    }
    let out = support::run(&mut command, std::time::Duration::from_secs(300));
    assert!(out.status.success(), "node failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert_eq!(lines.len(), requests.len());
    lines
}

/// Whether a rule's text reads a calendar or a duration.
fn reads_time(rule: &str) -> bool {
    rule.contains("in cal_") || [" - now ", " - args.when ", " - resource.due "].iter().any(|d| rule.contains(d))
}

/// Whether a rule's text reads a subject's or resource's declared attribute or a relation.
fn reads_world(rule: &str) -> bool {
    ["subject.team", "subject.cap", "subject.accounts", "subject.on_call", "subject.tier", "resource.owner"]
        .iter()
        .chain(&["resource.total", "resource.credit", "resource.due", "member_of(", "can("])
        .any(|name| rule.contains(name))
}

/// Fills `subject.properties`, `resource.properties` and `context.relations`: well-typed values mostly, now and
/// then missing, mistyped, negative or in another currency; relation lists over a small universe (so that terms meet
/// listed tuples), sometimes malformed or answering one tuple both ways.
fn world(rng: &mut Rng, req: &mut serde_json::Value) {
    use serde_json::{json, Map, Value};
    // Mostly one of `good`, now and then one of `bad`, sometimes absent.
    let pick_into =
        |rng: &mut Rng, map: &mut Map<String, Value>, key: &str, good: &[Value], bad: &[Value]| match rng.below(100) {
            0..=84 => drop(map.insert(key.to_string(), rng.pick(good).clone())),
            85..=93 => drop(map.insert(key.to_string(), rng.pick(bad).clone())),
            _ => {}
        };
    let mut subject = Map::new();
    pick_into(rng, &mut subject, "team", &[json!("ops"), json!("sales"), json!("team:a")], &[json!(5)]);
    pick_into(
        rng,
        &mut subject,
        "cap",
        &[json!("60 USD"), json!("10 USD")],
        &[json!("5 EUR"), json!("-1 USD"), json!("x")],
    );
    pick_into(
        rng,
        &mut subject,
        "accounts",
        &[json!(["a", "acme"]), json!(["b"]), json!([])],
        &[json!(["a", 3]), json!("a")],
    );
    pick_into(rng, &mut subject, "on_call", &[json!(true), json!(false)], &[json!("no")]);
    pick_into(rng, &mut subject, "tier", &[json!("gold"), json!("silver")], &[json!("iron")]);
    let mut resource = Map::new();
    let owners = [json!("agent:a"), json!("user:p0"), json!("user:p1"), json!("acme"), json!("a"), json!("ops")];
    pick_into(rng, &mut resource, "owner", &owners, &[json!(7)]);
    let totals = [json!("100 USD"), json!("10 USD"), json!("99.99 USD")];
    pick_into(rng, &mut resource, "total", &totals, &[json!("5 EUR"), json!("-3 USD")]);
    pick_into(
        rng,
        &mut resource,
        "credit",
        &[json!("-5 USD"), json!("10 USD"), json!("-100 USD")],
        &[json!("0 EUR"), json!(1)],
    );
    let dues = [json!("2026-12-15T12:00:00Z"), json!("2026-12-31T00:00:00Z"), json!("2026-12-01T00:00:00Z")];
    pick_into(rng, &mut resource, "due", &dues, &[json!("soon")]);
    if rng.chance(95) {
        req["subject"]["properties"] = if rng.chance(2) { json!("ops") } else { Value::Object(subject) };
    }
    if rng.chance(95) {
        let properties = if rng.chance(2) { json!([]) } else { Value::Object(resource) };
        match req.get_mut("resource") {
            Some(r) => r["properties"] = properties,
            None => req["resource"] = json!({ "properties": properties }),
        }
    }
    let whos = ["agent:a", "user:p0", "user:p1", "acme", "a", "ops", "site/x", "team:a"];
    let mut relations = Map::new();
    for (name, arity) in [("member_of", 2), ("can", 3)] {
        if !rng.chance(90) {
            continue;
        }
        let mut items = Vec::new();
        for _ in 0..rng.below(24) {
            let len = if rng.chance(3) { arity + 1 } else { arity };
            let args: Vec<Value> = (0..len)
                .map(|k| match (name, k) {
                    ("can", 0) => json!(rng.pick(&["agent:a", "agent:g/x", "agent:c"])),
                    ("can", 1) => json!(rng.pick(&["edit", "read"])),
                    ("can", 2) => json!(rng.pick(&["site/x", "a/b", "other"])),
                    _ => json!(rng.pick(&whos)),
                })
                .collect();
            let mut item = json!({ "args": args, "holds": rng.chance(60) });
            // Malformed now and then: a non-string argument, holds as a string or absent, an item that is no object.
            match rng.below(400) {
                0 => item["args"][0] = json!(1),
                1 => item["holds"] = json!("true"),
                2 => drop(item.as_object_mut().map(|o| o.remove("holds"))),
                3 => item = json!(["agent:a"]),
                _ => {}
            }
            // One tuple answered both ways.
            if rng.chance(1) && item.is_object() {
                let mut other = item.clone();
                other["holds"] = json!(!item["holds"].as_bool().unwrap_or(false));
                items.push(other);
            }
            items.push(item);
        }
        relations.insert(name.to_string(), if rng.chance(2) { json!({ "args": [] }) } else { Value::Array(items) });
    }
    if !relations.is_empty() || rng.chance(50) {
        req["context"]["relations"] = if rng.chance(1) { json!(["member_of"]) } else { Value::Object(relations) };
    }
    time(rng, req);
}

/// Instants near Berlin's and New York's daylight-saving transitions of 2026 (a nanosecond, a second, half an hour
/// either side), Berlin's local midnights around the holidays below and the edges of `cal_d`'s dated hours and
/// closures, some written with an offset.
const INSTANTS: [&str; 30] = [
    "2026-03-29T00:59:59.999999999Z",
    "2026-03-29T01:00:00Z",
    "2026-03-29T03:30:00+02:00",
    "2026-10-25T00:30:00Z",
    "2026-10-25T01:30:00Z",
    "2026-10-25T02:00:00Z",
    "2026-10-25T02:30:00+01:00",
    "2026-03-08T06:59:59Z",
    "2026-03-08T07:00:00Z",
    "2026-11-01T05:30:00Z",
    "2026-11-01T06:30:00.5Z",
    "2026-11-01T01:30:00-05:00",
    "2026-11-01T08:00:00Z",
    "2026-12-24T22:59:59.999999999Z",
    "2026-12-24T23:00:00Z",
    "2026-12-25T08:00:00Z",
    "2026-12-25T09:00:00+01:00",
    "2026-12-15T08:00:00Z",
    "2026-12-15T15:59:59Z",
    "2026-12-15T16:00:00Z",
    "2026-12-15T12:30:00Z",
    "2026-12-15T13:00:00.000000001Z",
    "2026-12-19T03:30:00Z",
    "2026-12-20T06:30:00Z",
    "2026-12-20T09:00:00Z",
    "2026-12-20T12:59:59.999999999Z",
    "2026-12-30T21:30:00Z",
    "2026-12-31T23:30:00Z",
    "2027-01-02T23:30:00Z",
    "2027-01-03T01:00:00Z",
];

/// `context.holidays.cal_b` (mostly well formed, now and then absent, malformed, or not an object at all), and
/// `now`, `args.when` and `resource.due` sometimes moved near a transition or a holiday.
fn time(rng: &mut Rng, req: &mut serde_json::Value) {
    use serde_json::json;
    // Mostly well formed; a list that is not an object (1 in 100) makes the whole request malformed.
    match rng.below(100) {
        0..=79 => {
            let lists = [json!(["2026-12-24", "2026-12-25"]), json!([]), json!(["2026-12-15"]), json!(["2026-10-25"])];
            req["context"]["holidays"] = json!({ "cal_b": rng.pick(&lists).clone() });
        }
        80..=89 => {}
        90..=96 => {
            let bad = [json!(["2026-12-24", "x"]), json!(["2026-02-29"]), json!("2026-12-24"), json!([20261224])];
            req["context"]["holidays"] = json!({ "cal_b": rng.pick(&bad).clone() });
        }
        97..=98 => req["context"]["holidays"] = json!({ "cal_ny": ["2026-12-24"] }),
        _ => req["context"]["holidays"] = json!(["2026-12-24"]),
    }
    // `now` seldom: outside the mandates' windows it denies before any condition is read.
    if rng.chance(8) {
        req["context"]["now"] = json!(rng.pick(&INSTANTS));
    }
    if rng.chance(30) {
        let args = req.get_mut("action").and_then(|a| a.get_mut("arguments"));
        if let Some(args) = args.and_then(serde_json::Value::as_object_mut) {
            args.insert("when".into(), json!(rng.pick(&INSTANTS)));
        }
    }
    if rng.chance(30) {
        let properties = req.get_mut("resource").and_then(|r| r.get_mut("properties"));
        if let Some(properties) = properties.and_then(serde_json::Value::as_object_mut) {
            properties.insert("due".into(), json!(rng.pick(&INSTANTS)));
        }
    }
}

#[test]
fn random_policies_decide_identically_in_wasm() {
    let engine = Engine::default();
    let policies: usize = std::env::var("REMIT_RANDOM_POLICIES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    // REMIT_RANDOM_SEED (hex) for other policies than the suite's, to run more of them in parallel.
    let seed = std::env::var("REMIT_RANDOM_SEED").ok().and_then(|v| u64::from_str_radix(&v, 16).ok());
    let mut rng = Rng(seed.unwrap_or(0x2545_f491_4f6c_dd1d) | 1);
    let (mut checked, mut requests, mut by_node) = (0, 0, 0);
    let node = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !node {
        eprintln!("`node` is not on PATH: Node's WebAssembly is left out");
    }
    let mut outcomes = std::collections::BTreeMap::new();
    // The values (false, true, error) of the rules that read the world, as the interpreter traced them.
    let mut world = [0usize; 3];
    // The same for the rules that read a calendar or a duration.
    let mut time = [0usize; 3];
    for _ in 0..policies * 4 {
        if checked == policies {
            break;
        }
        let text = policy(&mut rng);
        let mut sources = remit_lang::stdlib::sources();
        sources.add("random.remit", text.clone());
        // Decisions never depend on the narrowing proof; sub-mandates here may widen on purpose.
        let Some(program) = check_with(sources, Options { narrowing: false }).program else { continue };
        checked += 1;
        // The runtime natively over the image, and the module `remit build` writes, in wasmtime.
        let mut native = remit_lang::native::Native::new(&program).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        let bytes = remit_lang::wasm::compile(&program).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut wasm = Wasm::new(&engine, &bytes);
        // Each request with the interpreter's decision and listing, for Node afterwards.
        let mut asked = Vec::new();
        for _ in 0..200 {
            let req = request(&mut rng, &program);
            let decision = remit_lang::eval::decide(&program, &req);
            *outcomes.entry(decision.outcome.as_str()).or_insert(0) += 1;
            for rule in remit_lang::eval::trace(&program, &req) {
                if reads_world(&rule.rule) {
                    world[rule.result.map_or(2, usize::from)] += 1;
                }
                if reads_time(&rule.rule) {
                    time[rule.result.map_or(2, usize::from)] += 1;
                }
            }
            let expected = decision.to_json();
            let shown = || format!("policy:\n{text}\nrequest: {}", String::from_utf8_lossy(&req));
            assert_eq!(wasm.decide(&req), expected, "{}", shown());
            assert_eq!(String::from_utf8_lossy(&native.decide(&req)), expected, "native: {}", shown());
            let listing = remit_lang::eval::visible_tools(&program, &req).to_json();
            assert_eq!(wasm.visible(&req), listing, "listing: {}", shown());
            assert_eq!(String::from_utf8_lossy(&native.visible_tools(&req)), listing, "native listing: {}", shown());
            asked.push((req, expected, listing));
            requests += 1;
        }
        // Node's built-in WebAssembly on the same module, every tenth policy (a process per policy and entry point).
        if node && (checked - 1) % 10 == 0 {
            let dir = support::temp_dir("random-policies-node");
            let reqs: Vec<Vec<u8>> = asked.iter().map(|(r, _, _)| r.clone()).collect();
            for (visible, results) in
                [(false, node_decide(&dir, &bytes, &reqs, false)), (true, node_decide(&dir, &bytes, &reqs, true))]
            {
                for ((req, expected, listing), got) in asked.iter().zip(&results) {
                    let expected = if visible { listing } else { expected };
                    let shown = String::from_utf8_lossy(req);
                    assert_eq!(got, expected, "node (listing: {visible}): policy:\n{text}\nrequest: {shown}");
                    by_node += 1;
                }
            }
            std::fs::remove_dir_all(dir).ok();
        }
    }
    assert!(checked * 2 >= policies, "only {checked} of the random policies checked");
    // The comparison means something only if every outcome occurs often.
    eprintln!(
        "{checked} policies, {requests} requests (each decided and listed by the interpreter, the native runtime and \
         wasmtime; {by_node} answers by Node), outcomes {outcomes:?}, world rules [false, true, error] {world:?}, \
         time rules {time:?}"
    );
    assert!(time.iter().all(|&n| n * 100 >= requests), "too few rules on time: {time:?}");
    // The world's conditions are met in each of their outcomes, often: each outcome in at least one request in 40
    // (the suite's policies: one in 14; other seeds' seen down to one in 26).
    assert!(world.iter().all(|&n| n * 40 >= requests), "too few rules on the world: {world:?}");
    // At least one request in 25 (480 of the default 12,000): refusing gates, stops with levels and holders by
    // pattern made denies more frequent than the one in 20 this asked before them.
    for outcome in ["allow", "deny", "escalate"] {
        assert!(outcomes.get(outcome).copied().unwrap_or(0) * 25 >= requests, "too few `{outcome}`: {outcomes:?}");
    }
    assert!(requests >= checked * 200);
}
