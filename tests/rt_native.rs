//! The runtime crate (crates/remit-rt) compiled natively, against the definitions it must reproduce:
//! - `json::parse` accepts and rejects exactly what `remit_lang::json::validate` does, with the same error kind, on
//!   generated documents and their mutations (truncations, flipped, inserted and deleted bytes), on random bytes,
//!   and on objects past the small-object limit (there the kind may differ only as json.rs says);
//! - `digest::argument_digest` equals `remit_lang::eval::argument_digest` on every accepted document;
//! - `sha256` equals the sha2 crate's; the output writer never writes past its buffer and reports overflow.
//!
//! The artifact compiled from the same crate is held to the native one in tests/runtime_artifact.rs.

mod support;

use proptest::prelude::*;
use remit_rt::json::JsonError;
use remit_rt::out::Out;
use remit_rt::Sink;
use sha2::{Digest, Sha256};

#[test]
fn the_input_limit_is_the_abi_s() {
    assert_eq!(remit_rt::MAX_INPUT, remit_lang::json::MAX_INPUT);
    assert_eq!(remit_rt::json::MAX_DEPTH, remit_lang::json::MAX_DEPTH);
}

fn native(bytes: &[u8]) -> Result<(), JsonError> {
    support::rt_parse(bytes, |parsed| parsed.map(drop))
}

fn reference(bytes: &[u8]) -> Result<(), JsonError> {
    remit_lang::json::validate(bytes).map_err(|e| match e {
        remit_lang::json::JsonError::Syntax => JsonError::Syntax,
        remit_lang::json::JsonError::Depth => JsonError::Depth,
        remit_lang::json::JsonError::Duplicate => JsonError::Duplicate,
        remit_lang::json::JsonError::TooLarge => JsonError::TooLarge,
    })
}

fn native_digest(bytes: &[u8], tool: &str) -> String {
    support::rt_parse(bytes, |parsed| {
        let (doc, keys) = parsed.unwrap();
        let (digest, complete) = remit_rt::digest::argument_digest(&doc, Some(0), tool.as_bytes(), keys);
        assert!(complete);
        String::from_utf8(digest.to_vec()).unwrap()
    })
}

/// Holds the crate to the interpreter on `bytes`: the same verdict and kind (`exact`), or the same verdict.
fn agree(bytes: &[u8], exact: bool) -> Result<(), TestCaseError> {
    let (mine, theirs) = (native(bytes), reference(bytes));
    let shown = String::from_utf8_lossy(bytes);
    if exact {
        prop_assert_eq!(mine, theirs, "{}", shown);
    } else {
        prop_assert_eq!(mine.is_ok(), theirs.is_ok(), "{}", shown);
    }
    if mine.is_ok() {
        let value = remit_lang::json::parse(bytes).unwrap();
        for tool in ["pay", "é\"\n"] {
            prop_assert_eq!(native_digest(bytes, tool), remit_lang::eval::argument_digest(tool, &value), "{}", shown);
        }
    }
    Ok(())
}

const WS: &[&str] = &["", "", "", " ", "\n", "\t", "\r\n  "];

fn ws() -> impl Strategy<Value = String> {
    prop::sample::select(WS).prop_map(str::to_string)
}

/// A string literal: characters that need escaping, non-ASCII ones, written plainly or escaped in every way.
fn string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(&["a", "b", "A", "é", "✓", "😀", "\u{7f}", "\u{ffff}", "/", " "][..])
            .prop_map(str::to_string),
        prop::sample::select(
            &[
                "\\\"",
                "\\\\",
                "\\/",
                "\\b",
                "\\f",
                "\\n",
                "\\r",
                "\\t",
                "\\u0061",
                "\\u00e9",
                "\\u00E9",
                "\\u0000",
                "\\u001f",
                "\\ud83d\\ude00",
                "\\uD83D\\uDE00",
                "\\uffff"
            ][..]
        )
        .prop_map(str::to_string),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(&["0", "-0", "1", "12.50", "1e3", "1E3", "1e+3", "1.5E-07", "-0.0e+00", "1e999999"][..])
            .prop_map(str::to_string),
        (any::<bool>(), 0u64..u64::MAX, prop::option::of(0u32..1000), prop::option::of(-30i32..30)).prop_map(
            |(neg, int, frac, exp)| {
                let mut s = if neg { "-".to_string() } else { String::new() };
                s.push_str(&int.to_string());
                if let Some(f) = frac {
                    s.push_str(&format!(".{f}"));
                }
                if let Some(e) = exp {
                    s.push_str(&format!("E{e}"));
                }
                s
            }
        ),
    ]
}

/// Keys from a small pool (some spelled two ways), so objects sometimes have duplicate keys.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&["\"a\"", "\"\\u0061\"", "\"b\"", "\"ab\"", "\"\"", "\"é\"", "\"\\u00e9\"", "\"id\""][..])
        .prop_map(str::to_string)
}

fn document() -> impl Strategy<Value = String> {
    let leaf =
        prop_oneof![string(), number(), prop::sample::select(&["true", "false", "null"][..]).prop_map(str::to_string),];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            (prop::collection::vec((ws(), inner.clone(), ws()), 0..6), ws()).prop_map(|(items, w)| {
                let items: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                format!("[{w}{}]", items.join(","))
            }),
            // Whitespace in every place of an entry: before the key, around the colon, after the value.
            (prop::collection::vec((ws(), key(), ws(), ws(), inner, ws()), 0..6), ws()).prop_map(|(entries, w)| {
                let entries: Vec<String> =
                    entries.into_iter().map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}")).collect();
                format!("{{{w}{}}}", entries.join(","))
            }),
        ]
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    const BYTES: &[u8] = b"{}[]\":,0123456789.-+eEtrufalsn \\u\x00\x1f\x7f\x80\xc3\xa9\xed\xa0\xff";
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::sample::select(BYTES)).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::sample::select(BYTES)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len();
        match *m {
            Mutation::Truncate(i) => bytes.truncate(i % (len + 1)),
            Mutation::Flip(i, b) if len > 0 => bytes[i % len] = b,
            Mutation::Insert(i, b) => bytes.insert(i % (len + 1), b),
            Mutation::Delete(i) if len > 0 => {
                bytes.remove(i % len);
            }
            _ => {}
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn documents_agree_with_the_interpreter(doc in document(), w in ws()) {
        agree(format!("{w}{doc}{w}").as_bytes(), true)?;
    }

    #[test]
    fn mutated_documents_agree_with_the_interpreter(doc in document(), ms in prop::collection::vec(mutation(), 1..4)) {
        agree(&mutate(doc.into_bytes(), &ms), true)?;
    }

    #[test]
    fn random_bytes_agree_with_the_interpreter(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        agree(&bytes, true)?;
    }

    #[test]
    fn deep_nesting_agrees_with_the_interpreter(depth in 60usize..70, tail in prop::sample::select(&["", "1", "{\"a\":", "[1,", "{}"][..])) {
        let text = format!("{}{tail}{}", "[".repeat(depth), "]".repeat(depth));
        agree(text.as_bytes(), true)?;
        let open = format!("{}{tail}", "[{\"k\":".repeat(depth / 2));
        agree(open.as_bytes(), true)?;
    }

    /// Objects past 16 keys are checked by sorting when they close: the same verdict, and with one fault the same
    /// kind.
    #[test]
    fn large_objects_agree_with_the_interpreter(n in 17usize..80, dup in prop::option::of((0usize..80, 0usize..80)), escape in any::<bool>(), ms in prop::collection::vec(mutation(), 0..2)) {
        let mut keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        if let Some((a, b)) = dup {
            let (a, b) = (a % n, b % n);
            if a != b {
                keys[b] = keys[a].clone();
            }
        }
        let entries: Vec<String> = keys
            .iter()
            .map(|k| if escape { format!("\"\\u006b{}\":[{{}}]", &k[1..]) } else { format!("\"{k}\":1") })
            .collect();
        let text = format!("{{{}}}", entries.join(","));
        agree(text.as_bytes(), true)?;
        agree(&mutate(text.into_bytes(), &ms), false)?;
    }

    #[test]
    fn sha256_agrees_with_sha2(bytes in prop::collection::vec(any::<u8>(), 0..300), split in any::<usize>()) {
        prop_assert_eq!(remit_rt::sha256::sha256(&bytes).to_vec(), Sha256::digest(&bytes).to_vec());
        let mut h = remit_rt::sha256::Sha256::new();
        let at = split % (bytes.len() + 1);
        h.write(&bytes[..at]);
        h.write(&bytes[at..]);
        prop_assert_eq!(h.finish().to_vec(), Sha256::digest(&bytes).to_vec());
    }

    /// Each write lands whole or not at all; the flag says whether one did not.
    #[test]
    fn the_writer_never_writes_past_its_buffer(size in 0usize..64, writes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..10)) {
        let mut buf = vec![0xaa; size + 8];
        let mut expected = Vec::new();
        let mut overflow = false;
        {
            let mut out = Out::new(&mut buf[..size]);
            for w in &writes {
                if expected.len() + w.len() <= size {
                    expected.extend_from_slice(w);
                } else {
                    overflow = true;
                }
                out.write(w);
            }
            prop_assert_eq!(out.written(), &expected[..]);
            prop_assert_eq!(out.overflow(), overflow);
        }
        prop_assert!(buf[size..].iter().all(|&b| b == 0xaa));
    }
}

/// The corpus requests as a whole (many keys, real shapes), and the limit.
#[test]
fn corpus_requests_and_the_limit() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/wallet/requests");
    let mut paths: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        let mut text = std::fs::read(path).unwrap();
        agree(&text, true).unwrap();
        text.resize(remit_rt::MAX_INPUT, b' ');
        agree(&text, true).unwrap();
        text.push(b' ');
        assert_eq!(native(&text), Err(JsonError::TooLarge));
        agree(&text, true).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Reading requests (crates/remit-rt/src/request.rs, the twin of crates/remit-lang/src/eval/request.rs).

use remit_rt::json::Doc;
use remit_rt::request::Need;
use serde_json::{json, Value};

/// A request as read, in the interpreter's terms: strings unescaped, JSON values as serde_json's, absent objects
/// empty.
#[derive(Debug, PartialEq)]
struct Read {
    subject_id: String,
    scopes: Option<Vec<String>>,
    call: Option<(String, Option<Value>)>,
    resource_id: Option<String>,
    mandate: Option<String>,
    grants: Option<Value>,
    now: i128,
    operation_id: Option<String>,
    attempt: Option<i128>,
    approvals: Vec<Value>,
    stops: Vec<Value>,
    facts: Value,
    counters: Value,
    attributes: Value,
    subject_properties: Value,
    resource_properties: Value,
    relations: Value,
}

/// A token as a serde_json value (strings from their unescaped content).
fn json_of(doc: &Doc<'_>, tok: u32) -> Value {
    let t = doc.token(tok);
    if t.kind() == remit_rt::json::STRING {
        return Value::String(String::from_utf8(doc.text(tok).collect()).unwrap());
    }
    serde_json::from_slice(&doc.input[t.start as usize..t.end as usize]).unwrap()
}

fn text_of(doc: &Doc<'_>, tok: u32) -> String {
    String::from_utf8(doc.text(tok).collect()).unwrap()
}

/// The runtime crate's reading of `bytes`: the fields, or the reason codes.
fn rt_read(bytes: &[u8], need: Need) -> Result<Read, Vec<String>> {
    support::rt_parse(bytes, |parsed| {
        let codes = |e: remit_rt::request::RequestError| e.codes().map(str::to_string).collect::<Vec<_>>();
        let (doc, keys) = parsed.map_err(|e| codes(remit_rt::request::RequestError::json(e)))?;
        let r = remit_rt::request::parse(&doc, need).map_err(codes)?;
        let strings = |array: u32| remit_rt::request::elements(&doc, array).map(|s| text_of(&doc, s)).collect();
        let object = |tok: Option<u32>| tok.map_or_else(|| json!({}), |t| json_of(&doc, t));
        Ok(Read {
            subject_id: text_of(&doc, r.subject_id),
            scopes: r.scopes.map(strings),
            call: r.call.map(|c| (text_of(&doc, c.name), c.arguments.map(|a| json_of(&doc, a)))),
            resource_id: r.resource_id.map(|t| text_of(&doc, t)),
            mandate: r.mandate.map(|m| text_of(&doc, m)),
            grants: r.grants.map(|g| json_of(&doc, g)),
            now: r.now,
            operation_id: r.operation_id.map(|t| text_of(&doc, t)),
            attempt: r.attempt,
            approvals: r.approvals(&doc, keys, &mut []).unwrap().iter().map(|&a| json_of(&doc, a)).collect(),
            stops: r
                .stops
                .map(|a| remit_rt::request::elements(&doc, a).map(|s| json_of(&doc, s)).collect())
                .unwrap_or_default(),
            facts: object(r.facts),
            counters: object(r.counters),
            attributes: object(r.attributes),
            subject_properties: object(r.subject_properties),
            resource_properties: object(r.resource_properties),
            relations: object(r.relations),
        })
    })
}

/// The interpreter's verdict on `bytes` (its `request.*` reasons: for a decision all of them, for a listing the
/// first, which is all it shows), and otherwise the fields as docs/requests.md defines them, read with serde_json.
fn reference_read(program: &remit_lang::ir::Program, bytes: &[u8], need: Need) -> Result<Read, Vec<String>> {
    let codes: Vec<String> = match need {
        // Resolving the mandate by holder (`context.grants`, no `context.mandate`) names `context.mandate` missing
        // when the subject holds none: a step after the reading, which read the request.
        Need::Call => {
            let decision = remit_lang::eval::decide(program, bytes);
            let resolved = decision.fields.len() == 1
                && decision.fields[0].field == "context.mandate"
                && serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["context"]["grants"].is_array());
            if resolved {
                Vec::new()
            } else {
                decision.reasons
            }
        }
        Need::Listing => {
            let codes: Vec<String> =
                remit_lang::eval::visible_tools(program, bytes).hidden.into_iter().map(|h| h.reason).take(1).collect();
            // As for a call: a subject that holds nothing among `context.grants` and the policy's mandates.
            let json = serde_json::from_slice::<Value>(bytes).unwrap_or_default();
            let resolved = json["context"]["grants"].is_array()
                && json["context"].get("mandate").is_none()
                && json["subject"]["id"].is_string()
                && json["context"]["now"].is_string();
            if resolved && codes == ["request.missing-field"] {
                Vec::new()
            } else {
                codes
            }
        }
    };
    // The reading's own codes (a decision has others, like `request.undeclared-argument`, from later steps).
    const READING: [&str; 3] = ["request.malformed", "request.missing-field", "request.oversize"];
    let codes: Vec<String> = codes.into_iter().filter(|c| READING.contains(&c.as_str())).collect();
    if !codes.is_empty() {
        return Err(codes);
    }
    let root: Value = serde_json::from_slice(bytes).expect("a request the interpreter reads is JSON");
    let at = |path: &[&str]| path.iter().try_fold(&root, |v, k| v.get(k));
    let string = |path: &[&str]| at(path).and_then(Value::as_str).map(str::to_string);
    let strings = |path: &[&str]| {
        at(path).and_then(Value::as_array).map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    let blank = |s: &String| s.chars().all(char::is_whitespace);
    let object = |path: &[&str]| at(path).cloned().unwrap_or_else(|| json!({}));
    Ok(Read {
        subject_id: string(&["subject", "id"]).unwrap(),
        scopes: strings(&["subject", "credential", "scopes"]),
        call: (need == Need::Call)
            .then(|| (string(&["action", "name"]).unwrap(), at(&["action", "arguments"]).cloned())),
        resource_id: string(&["resource", "id"]).filter(|s| !blank(s)),
        mandate: string(&["context", "mandate"]),
        grants: at(&["context", "grants"]).cloned(),
        now: remit_lang::value::parse_instant(&string(&["context", "now"]).unwrap()).unwrap(),
        operation_id: string(&["context", "operation_id"]).filter(|s| !blank(s)),
        attempt: at(&["context", "attempt"]).map(|n| {
            let n = n.as_number().unwrap();
            let whole = n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)).unwrap();
            whole * 1_000_000_000
        }),
        approvals: usable_approvals(at(&["context", "approvals"]).and_then(Value::as_array).map_or(&[], Vec::as_slice)),
        stops: at(&["context", "stops"]).and_then(Value::as_array).cloned().unwrap_or_default(),
        facts: object(&["context", "facts"]),
        counters: object(&["context", "counters"]),
        attributes: object(&["context", "attributes"]),
        subject_properties: object(&["subject", "properties"]),
        resource_properties: object(&["resource", "properties"]),
        relations: object(&["context", "relations"]),
    })
}

/// docs/requests.md's rule for presented approvals, with serde_json: well formed (string id, kind, mandate; valid
/// timestamps; optional fields, `approved_by` among them, strings; `consumed` a bool; a blank id is none), and no
/// other approval with the same id
/// that differs in any field or is not well formed.
fn usable_approvals(items: &[Value]) -> Vec<Value> {
    const FIELDS: [&str; 11] = [
        "id",
        "kind",
        "mandate",
        "issued_at",
        "expires_at",
        "tool",
        "target",
        "digest",
        "manifest",
        "consumed",
        "approved_by",
    ];
    let well_formed = |item: &Value| -> bool {
        let Some(map) = item.as_object() else { return false };
        let string = |k: &str| map.get(k).and_then(Value::as_str);
        let optional = |k: &str| map.get(k).is_none_or(Value::is_string);
        string("id").is_some_and(|id| !id.chars().all(char::is_whitespace))
            && string("kind").is_some()
            && string("mandate").is_some()
            && string("issued_at").and_then(remit_lang::value::parse_instant).is_some()
            && string("expires_at").and_then(remit_lang::value::parse_instant).is_some()
            && ["tool", "target", "digest", "manifest", "approved_by"].into_iter().all(optional)
            && map.get("consumed").is_none_or(Value::is_boolean)
    };
    let id = |item: &Value| item.get("id").and_then(Value::as_str).map(str::to_string);
    items
        .iter()
        .filter(|item| well_formed(item))
        .filter(|item| {
            items
                .iter()
                .filter(|other| id(other) == id(item))
                .all(|other| well_formed(other) && FIELDS.iter().all(|k| other.get(k) == item.get(k)))
        })
        .cloned()
        .collect()
}

/// Holds the runtime crate's reading of `bytes` to the interpreter's, for a decision and for a listing.
fn same_reading(program: &remit_lang::ir::Program, bytes: &[u8]) {
    for need in [Need::Call, Need::Listing] {
        let mine = rt_read(bytes, need);
        let mine_shown = match (&mine, need) {
            (Err(codes), Need::Listing) => Err(codes.iter().take(1).cloned().collect()),
            _ => mine,
        };
        assert_eq!(mine_shown, reference_read(program, bytes, need), "{need:?}: {}", String::from_utf8_lossy(bytes));
    }
}

#[test]
fn corpus_requests_are_read_as_the_interpreter_reads_them() {
    let mut total = 0;
    for unit in support::corpus() {
        for request in unit.requests.iter().chain(&unit.subjects) {
            same_reading(&unit.program, request);
            total += 1;
        }
    }
    assert!(total >= 300, "only {total} requests");
}

#[test]
fn mutated_requests_are_read_as_the_interpreter_reads_them() {
    use support::mutate::{damage, Rng};
    let rounds: usize = std::env::var("REMIT_DIFF_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000);
    let corpus = support::corpus();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..rounds {
        let unit = &corpus[round % corpus.len()];
        let Some(base) = unit.requests.get(rng.below(unit.requests.len())) else { continue };
        let mut value: Value = serde_json::from_slice(base).unwrap();
        for _ in 0..=rng.below(3) {
            support::mutate::mutate(&mut rng, &mut value, 0);
        }
        let text = value.to_string();
        let request = if rng.below(4) == 0 { damage(&mut rng, &text) } else { text.into_bytes() };
        same_reading(&unit.program, &request);
        if rt_read(&request, Need::Call).is_ok() {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    // Both outcomes are exercised (most mutations break a required field: about 5% are read).
    assert!(accepted > rounds / 50 && refused > rounds / 10, "{accepted} accepted, {refused} refused");
}

#[test]
fn approvals_that_share_an_id_are_read_as_the_interpreter_reads_them() {
    let corpus = support::corpus();
    let unit = corpus.iter().find(|u| u.name.ends_with("wallet")).expect("the wallet example");
    let approval = json!({"id": "a", "kind": "k", "mandate": "wallet", "issued_at": "2026-11-30T11:00:00Z",
        "expires_at": "2026-11-30T13:00:00Z", "tool": "pay"});
    let variants = [
        approval.clone(),
        json!({"id": "a", "kind": "k", "mandate": "wallet", "issued_at": "2026-11-30T11:00:00Z",
            "expires_at": "2026-11-30T13:00:00Z", "tool": "pay", "consumed": false}),
        json!({"tool": "pay", "expires_at": "2026-11-30T13:00:00Z", "issued_at": "2026-11-30T11:00:00Z",
            "mandate": "wallet", "kind": "k", "id": "a"}),
        json!({"id": "a", "kind": 1}),
        json!({"id": "b", "kind": "k", "mandate": "wallet", "issued_at": "2026-11-30T11:00:00Z",
            "expires_at": "2026-11-30T13:00:00Z"}),
        json!({"id": " ", "kind": "k", "mandate": "wallet", "issued_at": "2026-11-30T11:00:00Z",
            "expires_at": "2026-11-30T13:00:00Z"}),
        json!(7),
    ];
    let mut rng = support::mutate::Rng(77);
    for _ in 0..400 {
        let items: Vec<Value> = (0..rng.below(5)).map(|_| variants[rng.below(variants.len())].clone()).collect();
        let request = json!({"subject": {"id": "agent:shopper"}, "action": {"name": "pay"},
            "context": {"mandate": "wallet", "now": "2026-11-30T12:00:00Z", "approvals": items}});
        same_reading(&unit.program, request.to_string().as_bytes());
    }
}
