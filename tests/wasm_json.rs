//! The wasm runtime's JSON parser, tape accessors and output writer (src/wasm/rt/json.rs, out.rs), run in wasmtime
//! against the Rust definitions they must reproduce:
//! - `json_parse` accepts and rejects exactly what `remit::json::validate` does (differential, over generated
//!   documents and their mutations: truncations, flipped and inserted bytes, duplicate keys, deep nesting, invalid
//!   UTF-8, lone surrogates, raw control characters);
//! - the tape of every accepted document agrees with serde_json's reading of it;
//! - `out_json_string_tok` / `out_json_string_raw` write strings byte for byte as the interpreter does;
//! - nothing ever traps: every call unwraps its result, and a trap is an `Err`.
//!
//! `cargo test --release --test wasm_json -- --ignored --nocapture parse_speed` measures `json_parse`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use remit::eval::{Decision, Outcome};
use remit::json::{validate, JsonError};
use remit::wasm::layout::{INPUT_BASE, MAX_INPUT, SCRATCH_BASE};
use remit::wasm::module::ModuleBuilder;
use serde_json::Value;
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

const EXPORTS: &[&str] = &[
    "json_parse",
    "json_kind",
    "json_next",
    "json_start",
    "json_end",
    "json_count",
    "json_get",
    "json_index",
    "json_str_eq",
    "json_str_eq_tok",
    "json_str_cmp_tok",
    "json_str_starts_with",
    "json_str_unescape",
    "out_reset",
    "out_to",
    "out_pos",
    "out_overflow",
    "out_byte",
    "out_bytes",
    "out_json_string_tok",
    "out_json_string_raw",
];

fn compiled() -> &'static (Engine, Module) {
    static MODULE: OnceLock<(Engine, Module)> = OnceLock::new();
    MODULE.get_or_init(|| {
        let mut m = ModuleBuilder::new();
        remit::wasm::rt::declare(&mut m);
        remit::wasm::rt::define(&mut m);
        for name in EXPORTS {
            m.export_func(name, name);
        }
        let bytes = m.finish().expect("the runtime module validates");
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes).expect("wasmtime compiles the runtime");
        (engine, module)
    })
}

type F1 = TypedFunc<i32, i32>;
type F2 = TypedFunc<(i32, i32), i32>;
type F3 = TypedFunc<(i32, i32, i32), i32>;

/// One instance of the runtime and typed handles on its exports.
struct Rt {
    store: Store<()>,
    memory: Memory,
    parse_fn: F2,
    kind_fn: F1,
    next_fn: F1,
    start_fn: F1,
    end_fn: F1,
    count_fn: F1,
    get_fn: F3,
    index_fn: F2,
    str_eq_fn: F3,
    str_eq_tok_fn: F2,
    str_cmp_tok_fn: F2,
    starts_with_fn: F3,
    unescape_fn: F2,
    out_reset_fn: TypedFunc<(), ()>,
    out_to_fn: TypedFunc<(i32, i32), ()>,
    out_pos_fn: TypedFunc<(), i32>,
    out_overflow_fn: TypedFunc<(), i32>,
    out_byte_fn: TypedFunc<i32, ()>,
    out_bytes_fn: TypedFunc<(i32, i32), ()>,
    out_tok_fn: TypedFunc<i32, ()>,
    out_raw_fn: TypedFunc<(i32, i32), ()>,
}

/// Test data written by the tests (keys to look up, raw strings) lives here; the runtime never writes it.
const DATA: u32 = SCRATCH_BASE;
/// Where `json_str_unescape` writes in the tests.
const UNESCAPED: u32 = SCRATCH_BASE + MAX_INPUT;

impl Rt {
    fn new() -> Rt {
        let (engine, module) = compiled();
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, module, &[]).expect("instantiates with no imports");
        let memory = instance.get_memory(&mut store, "memory").expect("exports memory");
        macro_rules! f {
            ($name:literal) => {
                instance.get_typed_func(&mut store, $name).expect($name)
            };
        }
        Rt {
            parse_fn: f!("json_parse"),
            kind_fn: f!("json_kind"),
            next_fn: f!("json_next"),
            start_fn: f!("json_start"),
            end_fn: f!("json_end"),
            count_fn: f!("json_count"),
            get_fn: f!("json_get"),
            index_fn: f!("json_index"),
            str_eq_fn: f!("json_str_eq"),
            str_eq_tok_fn: f!("json_str_eq_tok"),
            str_cmp_tok_fn: f!("json_str_cmp_tok"),
            starts_with_fn: f!("json_str_starts_with"),
            unescape_fn: f!("json_str_unescape"),
            out_reset_fn: f!("out_reset"),
            out_to_fn: f!("out_to"),
            out_pos_fn: f!("out_pos"),
            out_overflow_fn: f!("out_overflow"),
            out_byte_fn: f!("out_byte"),
            out_bytes_fn: f!("out_bytes"),
            out_tok_fn: f!("out_json_string_tok"),
            out_raw_fn: f!("out_json_string_raw"),
            memory,
            store,
        }
    }

    fn write(&mut self, at: u32, bytes: &[u8]) {
        self.memory.write(&mut self.store, at as usize, bytes).expect("in memory");
    }

    fn read(&self, at: i32, len: i32) -> Vec<u8> {
        let mut out = vec![0; len as usize];
        self.memory.read(&self.store, at as u32 as usize, &mut out).expect("in memory");
        out
    }

    /// Parses `bytes` placed at `INPUT_BASE` (only the length matters when it is over the limit).
    fn parse(&mut self, bytes: &[u8]) -> i32 {
        if bytes.len() <= MAX_INPUT as usize {
            self.write(INPUT_BASE, bytes);
        }
        self.parse_fn.call(&mut self.store, (INPUT_BASE as i32, bytes.len() as i32)).expect("json_parse traps")
    }

    fn call1(&mut self, f: F1, a: i32) -> i32 {
        f.call(&mut self.store, a).expect("trap")
    }
    fn call2(&mut self, f: F2, a: i32, b: i32) -> i32 {
        f.call(&mut self.store, (a, b)).expect("trap")
    }
    fn kind(&mut self, t: i32) -> i32 {
        self.call1(self.kind_fn.clone(), t)
    }
    fn next(&mut self, t: i32) -> i32 {
        self.call1(self.next_fn.clone(), t)
    }
    fn start(&mut self, t: i32) -> i32 {
        self.call1(self.start_fn.clone(), t)
    }
    fn end(&mut self, t: i32) -> i32 {
        self.call1(self.end_fn.clone(), t)
    }
    fn count(&mut self, t: i32) -> i32 {
        self.call1(self.count_fn.clone(), t)
    }
    fn index(&mut self, t: i32, i: i32) -> i32 {
        self.call2(self.index_fn.clone(), t, i)
    }
    fn get(&mut self, t: i32, key: &[u8]) -> i32 {
        self.write(DATA, key);
        self.get_fn.call(&mut self.store, (t, DATA as i32, key.len() as i32)).expect("trap")
    }
    fn str_eq(&mut self, t: i32, s: &[u8]) -> i32 {
        self.write(DATA, s);
        self.str_eq_fn.call(&mut self.store, (t, DATA as i32, s.len() as i32)).expect("trap")
    }
    fn starts_with(&mut self, t: i32, s: &[u8]) -> i32 {
        self.write(DATA, s);
        self.starts_with_fn.call(&mut self.store, (t, DATA as i32, s.len() as i32)).expect("trap")
    }
    fn str_eq_tok(&mut self, a: i32, b: i32) -> i32 {
        self.call2(self.str_eq_tok_fn.clone(), a, b)
    }
    fn str_cmp_tok(&mut self, a: i32, b: i32) -> i32 {
        self.call2(self.str_cmp_tok_fn.clone(), a, b)
    }
    fn unescape(&mut self, t: i32) -> Vec<u8> {
        let len = self.call2(self.unescape_fn.clone(), t, UNESCAPED as i32);
        self.read(UNESCAPED as i32, len)
    }

    fn out_reset(&mut self) {
        self.out_reset_fn.call(&mut self.store, ()).expect("trap");
    }
    fn out_pos(&mut self) -> i32 {
        self.out_pos_fn.call(&mut self.store, ()).expect("trap")
    }
    fn out_overflow(&mut self) -> i32 {
        self.out_overflow_fn.call(&mut self.store, ()).expect("trap")
    }
    /// Runs `write` on a reset writer and returns what it wrote.
    fn output(&mut self, write: impl FnOnce(&mut Rt)) -> Vec<u8> {
        self.out_reset();
        let base = self.out_pos();
        write(self);
        assert_eq!(self.out_overflow(), 0);
        let end = self.out_pos();
        self.read(base, end - base)
    }
    fn out_tok(&mut self, t: i32) -> Vec<u8> {
        self.output(|rt| rt.out_tok_fn.call(&mut rt.store, t).expect("trap"))
    }
    fn out_raw(&mut self, s: &[u8]) -> Vec<u8> {
        self.write(DATA, s);
        self.output(|rt| rt.out_raw_fn.call(&mut rt.store, (DATA as i32, s.len() as i32)).expect("trap"))
    }
}

/// The result class `json_parse` must return for what `validate` says.
fn class(result: Result<(), JsonError>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(JsonError::Syntax | JsonError::Depth | JsonError::Duplicate) => 1,
        Err(JsonError::TooLarge) => 2,
    }
}

/// The interpreter's JSON string writer (`write_string`), reached through the public decision JSON.
fn write_string(s: &str) -> Vec<u8> {
    let mut d = Decision::deny(Vec::new(), "");
    d.outcome = Outcome::Escalate;
    d.escalate_to = Some(s.to_string());
    let json = d.to_json();
    let start = json.find("\"escalate_to\":").expect("field") + "\"escalate_to\":".len();
    let end = json.len() - ",\"policy\":\"\"}".len();
    json.as_bytes()[start..end].to_vec()
}

// ---------------------------------------------------------------------------------------------------------------
// Generators

/// A JSON string literal: its text (with random escaping choices) and its content.
fn string_literal() -> impl Strategy<Value = (String, String)> {
    let piece = prop_oneof![
        4 => "[a-z]{1,6}".prop_map(|s| (s.clone(), s)),
        1 => "[A-Z0-9 _.:-]{1,3}".prop_map(|s| (s.clone(), s)),
        1 => Just(("\\\"".to_string(), "\"".to_string())),
        1 => Just(("\\\\".to_string(), "\\".to_string())),
        1 => Just(("\\/".to_string(), "/".to_string())),
        1 => prop::sample::select(vec![('b', '\u{8}'), ('f', '\u{c}'), ('n', '\n'), ('r', '\r'), ('t', '\t')])
            .prop_map(|(e, c)| (format!("\\{e}"), c.to_string())),
        2 => any::<char>().prop_map(|c| (json_escape(c), c.to_string())),
        1 => (0u32..0x20).prop_map(|c| (format!("\\u{c:04x}"), char::from_u32(c).unwrap().to_string())),
        1 => prop::sample::select(vec!['é', '✓', '😀', '\u{7f}', '\u{80}', '\u{7ff}', '\u{800}', '\u{ffff}', '\u{10000}', '\u{10ffff}'])
            .prop_map(|c| (c.to_string(), c.to_string())),
        1 => prop::sample::select(vec!['é', '😀', 'A', '\u{10ffff}']).prop_map(|c| (json_escape(c), c.to_string())),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| {
        let text: String = pieces.iter().map(|p| p.0.as_str()).collect();
        let content: String = pieces.iter().map(|p| p.1.as_str()).collect();
        (format!("\"{text}\""), content)
    })
}

/// `c` as `\uXXXX` escapes (a surrogate pair above the BMP), in random-looking but fixed letter case.
fn json_escape(c: char) -> String {
    let mut units = [0u16; 2];
    c.encode_utf16(&mut units)
        .iter()
        .map(|u| if u % 2 == 0 { format!("\\u{u:04x}") } else { format!("\\u{u:04X}") })
        .collect()
}

/// Object keys from a small set, so that duplicates (also through escapes) are common.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z]{1,2}".prop_map(|k| format!("\"{k}\"")),
        1 => Just("\"\\u0061\"".to_string()),
        1 => Just("\"\\u00e9\"".to_string()),
        1 => Just("\"é\"".to_string()),
        1 => Just("\"\"".to_string()),
        1 => Just("\"\\/\"".to_string()),
        1 => Just("\"/\"".to_string()),
        2 => string_literal().prop_map(|(text, _)| text),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof!["-?(0|[1-9][0-9]{0,3})", "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,12})?([eE][+-]?[0-9]{1,3})?",]
}

fn ws() -> impl Strategy<Value = String> {
    prop_oneof![8 => Just(String::new()), 1 => "[ \t\n\r]{1,3}"]
}

/// JSON texts: valid except for duplicate keys, which the small key set makes frequent. Some objects are wide
/// (more than 16 keys) to reach the sort-based duplicate check.
fn document() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
        3 => number(),
        4 => string_literal().prop_map(|(text, _)| text),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            3 => prop::collection::vec((ws(), inner.clone(), ws()), 0..8).prop_map(|items| {
                let items: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                format!("[{}]", items.join(","))
            }),
            4 => prop::collection::vec((key(), ws(), inner.clone()), 0..6).prop_map(|entries| {
                let items: Vec<String> = entries.into_iter().map(|(k, w, v)| format!("{k}{w}:{v}")).collect();
                format!("{{{}}}", items.join(","))
            }),
            1 => prop::collection::btree_set("[a-z]{1,3}", 17..40).prop_flat_map(move |keys| {
                let n = keys.len();
                (Just(keys), prop::collection::vec(inner.clone(), n), any::<Option<prop::sample::Index>>())
            }).prop_map(|(keys, values, dup)| {
                let keys: Vec<String> = keys.into_iter().collect();
                let mut items: Vec<String> = keys.iter().zip(values).map(|(k, v)| format!("\"{k}\":{v}")).collect();
                // Sometimes repeat one key, possibly spelled with escapes.
                if let Some(dup) = dup {
                    let k = &keys[dup.index(keys.len())];
                    let spelled: String = k.chars().map(json_escape).collect();
                    items.insert(dup.index(items.len() + 1) / 2, format!("\"{spelled}\":0"));
                }
                format!("{{{}}}", items.join(","))
            }),
        ]
    })
}

/// One mutation of a text.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Delete(prop::sample::Index),
    /// Bytes inserted right after a quote (so usually inside a string).
    InString(prop::sample::Index, Vec<u8>),
    /// Wrapped in this many arrays or objects.
    Nest(usize, bool),
    /// A key repeated in an object: after a `{`, `"k":1,"k":2,` (or with the second spelled with an escape).
    Duplicate(prop::sample::Index, bool),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let nasty = prop_oneof![
        Just(b"\xff".to_vec()),
        Just(b"\xc0\xaf".to_vec()),
        Just(b"\xc3".to_vec()),
        Just(b"\xe2\x9c".to_vec()),
        Just(b"\xed\xa0\x80".to_vec()),
        Just(b"\xed\xbf\xbf".to_vec()),
        Just(b"\xf4\x90\x80\x80".to_vec()),
        Just(b"\xf0\x8f\xbf\xbf".to_vec()),
        Just(b"\xe0\x9f\xbf".to_vec()),
        Just(b"\x80".to_vec()),
        Just(b"\\ud800".to_vec()),
        Just(b"\\udc00".to_vec()),
        Just(b"\\uDBFF\\u0041".to_vec()),
        Just(b"\\ud800\\ud800".to_vec()),
        Just(b"\\u12".to_vec()),
        Just(b"\\x".to_vec()),
        Just(b"\\".to_vec()),
        (0u8..0x20).prop_map(|c| vec![c]),
        Just(b"\\ud83d\\ude00".to_vec()),
        Just("é✓😀".as_bytes().to_vec()),
    ];
    prop_oneof![
        2 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        3 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        2 => (any::<prop::sample::Index>(), prop::sample::select(b"{}[]\",:0-.eE \\tfn\x00\x7f\xc3".to_vec()))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Delete),
        4 => (any::<prop::sample::Index>(), nasty).prop_map(|(i, b)| Mutation::InString(i, b)),
        1 => (55usize..70, any::<bool>()).prop_map(|(n, o)| Mutation::Nest(n, o)),
        2 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(i, e)| Mutation::Duplicate(i, e)),
    ]
}

fn apply(text: &[u8], mutation: &Mutation) -> Vec<u8> {
    let mut bytes = text.to_vec();
    let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
    match mutation {
        Mutation::Truncate(i) => bytes.truncate(at(i, bytes.len())),
        Mutation::Flip(i, b) => {
            if !bytes.is_empty() {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
        }
        Mutation::Insert(i, b) => bytes.insert(at(i, bytes.len()), *b),
        Mutation::Delete(i) => {
            if !bytes.is_empty() {
                bytes.remove(i.index(bytes.len()));
            }
        }
        Mutation::InString(i, insert) => {
            let from = at(i, bytes.len());
            let quote = bytes[from..].iter().position(|&b| b == b'"').map(|p| from + p + 1).unwrap_or(from);
            bytes.splice(quote..quote, insert.iter().copied());
        }
        Mutation::Nest(n, object) => {
            let (open, close): (&[u8], &[u8]) = if *object { (b"{\"k\":", b"}") } else { (b"[", b"]") };
            let mut nested = open.repeat(*n);
            nested.extend_from_slice(&bytes);
            nested.extend_from_slice(&close.repeat(*n));
            bytes = nested;
        }
        Mutation::Duplicate(i, escaped) => {
            let from = at(i, bytes.len());
            let brace = bytes[from..].iter().chain(bytes[..from].iter()).position(|&b| b == b'{');
            if let Some(p) = brace {
                let p = (from + p) % bytes.len() + 1;
                let second: &[u8] = if *escaped { b"\"\\u0071\"" } else { b"\"q\"" };
                let mut insert = b"\"q\":1,".to_vec();
                insert.extend_from_slice(second);
                insert.extend_from_slice(b":2,");
                bytes.splice(p..p, insert);
            }
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------------------------------
// (a) differential: json_parse's result class equals validate's.

#[test]
fn json_parse_agrees_with_validate_on_generated_and_mutated_inputs() {
    let rt = RefCell::new(Rt::new());
    let inputs = AtomicUsize::new(0);
    let accepted = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config { cases: 1500, failure_persistence: None, ..Config::default() });
    let strategy = (document(), prop::collection::vec(mutation(), 14));
    let result = runner.run(&strategy, |(doc, mutations)| {
        let mut rt = rt.borrow_mut();
        let mut texts = vec![doc.clone().into_bytes()];
        texts.extend(mutations.iter().map(|m| apply(doc.as_bytes(), m)));
        // Two mutations at once, too.
        texts.push(apply(&apply(doc.as_bytes(), &mutations[0]), &mutations[1]));
        for text in texts {
            let expected = class(validate(&text));
            let got = rt.parse(&text);
            inputs.fetch_add(1, Ordering::Relaxed);
            if expected == 0 {
                accepted.fetch_add(1, Ordering::Relaxed);
            }
            prop_assert_eq!(got, expected, "input {:?}", String::from_utf8_lossy(&text));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (inputs, accepted) = (inputs.into_inner(), accepted.into_inner());
    assert!(inputs >= 20_000, "only {inputs} inputs");
    // The generators must exercise both sides.
    assert!(accepted > inputs / 10 && accepted < inputs * 9 / 10, "{accepted} of {inputs} accepted");
}

#[test]
fn json_parse_agrees_with_validate_on_random_bytes() {
    let rt = RefCell::new(Rt::new());
    let mut runner = TestRunner::new(Config { cases: 3000, failure_persistence: None, ..Config::default() });
    let alphabet = prop::sample::select(
        b"{}[]\":,0123456789-+.eE \t\n\rtrufalsenul\\u/bfDdcC\x00\x1f\x7f\x80\xbf\xc2\xe0\xed\xf0\xf4\xff".to_vec(),
    );
    let result = runner.run(&prop::collection::vec(alphabet, 0..40), |bytes| {
        let mut rt = rt.borrow_mut();
        prop_assert_eq!(rt.parse(&bytes), class(validate(&bytes)), "input {:?}", String::from_utf8_lossy(&bytes));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn edge_cases_agree() {
    let mut rt = Rt::new();
    let nested = |open: &str, close: &str, n: usize| open.repeat(n) + &close.repeat(n);
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b" ".to_vec(),
        b"1".to_vec(),
        b"-0.0e-0".to_vec(),
        b"01".to_vec(),
        b"\"\\ud800\\udc00\"".to_vec(),
        b"\"\\udc00\"".to_vec(),
        b"\"\\ud800\"".to_vec(),
        b"\"\\ud800\\u00\"".to_vec(),
        b"\xef\xbb\xbf{}".to_vec(),
        b"{\"a\":1,\"\\u0061\":2}".to_vec(),
        b"{\"\\u0061\":1,\"a\":2}".to_vec(),
        b"{\"\\u00e9\":1,\"\xc3\xa9\":2}".to_vec(),
        b"{\"\":1,\"\":2}".to_vec(),
        nested("[", "]", 64).into_bytes(),
        nested("[", "]", 65).into_bytes(),
        "[".repeat(100_000).into_bytes(),
        nested("{\"a\":", "}", 64).replacen('}', "1}", 1).into_bytes(),
        nested("{\"a\":", "}", 65).replacen('}', "1}", 1).into_bytes(),
        // Strings of every length around the 8-byte scanner, with the special byte at every position.
        b"\"12345678\"".to_vec(),
        b"\"1234567\x01\"".to_vec(),
        b"\"12345678\x01\"".to_vec(),
        b"\"123456789\\n\"".to_vec(),
        b"\"1234567".to_vec(),
        b"\"12345678".to_vec(),
        b"[\"abcdefgh\",\"abcdefghijklmnop\",\"\xc3\xa9abcdefg\"]".to_vec(),
        b"\"\xe2\x9c\x93\xe2\x9c\x93\xe2\x9c\x93\"".to_vec(),
        b"\"\xf4\x8f\xbf\xbf\"".to_vec(),
        b"\"\xf4\x90\x80\x80\"".to_vec(),
        b"\"\xed\x9f\xbf\"".to_vec(),
        b"\"\xed\xa0\x80\"".to_vec(),
        b"\"\xee\x80\x80\"".to_vec(),
        b"\"\xc2\x80\"".to_vec(),
        b"\"\xc1\xbf\"".to_vec(),
        b"tru".to_vec(),
        b"fals".to_vec(),
        b"nul".to_vec(),
        b"[true,false,null]".to_vec(),
        b"[truee]".to_vec(),
    ];
    // Whitespace runs of every length up to 20, with a non-whitespace byte (form feed, vertical tab, NUL, a digit)
    // at every position of the run.
    let mut cases = cases;
    for len in 0..20 {
        let run: Vec<u8> = (0..len).map(|i| b" \t\n\r"[i * 7 % 4]).collect();
        let mut doc = run.clone();
        doc.extend_from_slice(b"[");
        doc.extend_from_slice(&run);
        doc.extend_from_slice(b"1");
        doc.extend_from_slice(&run);
        doc.extend_from_slice(b",{");
        doc.extend_from_slice(&run);
        doc.extend_from_slice(b"\"a\"");
        doc.extend_from_slice(&run);
        doc.extend_from_slice(b":");
        doc.extend_from_slice(&run);
        doc.extend_from_slice(b"2}]");
        doc.extend_from_slice(&run);
        cases.push(doc.clone());
        for at in 0..len {
            for bad in [0x0c, 0x0b, 0, b'7'] {
                let mut bytes = doc.clone();
                bytes[at] = bad;
                cases.push(bytes.clone());
                let inner = len + 1 + at;
                bytes[at] = run[at];
                bytes[inner] = bad;
                cases.push(bytes);
            }
        }
    }
    for (i, case) in cases.iter().enumerate() {
        for cut in [case.len(), case.len().saturating_sub(1)] {
            let text = &case[..cut];
            assert_eq!(rt.parse(text), class(validate(text)), "case {i}: {:?}", String::from_utf8_lossy(text));
        }
    }
}

#[test]
fn size_limit() {
    let mut rt = Rt::new();
    let limit = MAX_INPUT as usize;
    let mut text = vec![b' '; limit];
    text[limit / 2] = b'7';
    assert_eq!(rt.parse(&text), 0);
    assert_eq!(rt.kind(0), 4);
    // Over the limit: 2, whatever the bytes (the input is not even read).
    assert_eq!(rt.parse(&vec![b' '; limit + 1]), 2);
    assert_eq!(rt.kind(0), 0, "a failed parse leaves no tape");
    let parse = rt.parse_fn.clone();
    for (ptr, len) in [(INPUT_BASE as i32, -1), (0, i32::MAX), (-1, 10), (i32::MAX, 1)] {
        let got = parse.call(&mut rt.store, (ptr, len)).expect("no trap");
        assert_ne!(got, 0, "({ptr}, {len})");
    }
    // An input that runs past the end of memory is rejected, not read.
    let pages = rt.memory.size(&rt.store) as i64;
    let last = (pages * 65536 - 4) as i32;
    assert_eq!(parse.call(&mut rt.store, (last, 8)).expect("no trap"), 1);
    assert_eq!(parse.call(&mut rt.store, (last, 4)).expect("no trap"), 1);
}

#[test]
fn large_inputs() {
    let mut rt = Rt::new();
    let limit = MAX_INPUT as usize;
    // The longest array: more elements than the 16-bit stored count.
    let n = (limit - 1) / 2;
    let text = format!("[{}0]", "0,".repeat(n - 1));
    assert_eq!(rt.parse(text.as_bytes()), 0);
    assert_eq!(rt.count(0), n as i32);
    assert_eq!(rt.index(0, n as i32 - 1), n as i32);
    assert_eq!(rt.next(0), n as i32 + 1);
    // Wide objects: the sort-based duplicate check, with and without a duplicate.
    let keys: Vec<String> = (0..20_000).map(|i| format!("\"k{i}\":{}", i % 10)).collect();
    let text = format!("{{{}}}", keys.join(","));
    let started = std::time::Instant::now();
    assert_eq!(rt.parse(text.as_bytes()), 0);
    assert!(started.elapsed().as_secs() < 5, "wide object took {:?}", started.elapsed());
    assert_eq!(rt.count(0), 20_000);
    assert_eq!(rt.get(0, b"k19999"), 40_000);
    let text = format!("{{{},\"k\\u0031234\":0}}", keys.join(","));
    assert_eq!(rt.parse(text.as_bytes()), 1);
    // Keys crafted to look alike (same length, first and last bytes) stay fast too.
    let keys: Vec<String> = (0..15_000).map(|i| format!("\"a{i:08}a\":0")).collect();
    let text = format!("{{{}}}", keys.join(","));
    let started = std::time::Instant::now();
    assert_eq!(rt.parse(text.as_bytes()), 0);
    assert!(started.elapsed().as_secs() < 5, "look-alike keys took {:?}", started.elapsed());
    // A long string with escapes everywhere.
    let s = "\\u00e9\\n\\\"x".repeat(limit / 16);
    let text = format!("\"{s}\"");
    assert_eq!(rt.parse(text.as_bytes()), 0);
    assert_eq!(rt.unescape(0), "é\n\"x".repeat(limit / 16).into_bytes());
}

// ---------------------------------------------------------------------------------------------------------------
// (b) the tape agrees with serde_json.

/// Checks token `tok` against `value`; `raw` is the document.
fn check_value(rt: &mut Rt, tok: i32, value: &Value, strings: &mut Vec<(i32, String)>) {
    let kind = rt.kind(tok);
    let (start, end) = (rt.start(tok), rt.end(tok));
    match value {
        Value::Null => assert_eq!(kind, 1),
        Value::Bool(b) => assert_eq!(kind, if *b { 3 } else { 2 }),
        Value::Number(n) => {
            assert_eq!(kind, 4);
            let text = rt.read(start, end - start);
            let reparsed: Value = serde_json::from_slice(&text).expect("a number token is a number");
            assert_eq!(&reparsed, value, "{n}");
        }
        Value::String(s) => {
            assert_eq!(kind, 5);
            check_string(rt, tok, s);
            strings.push((tok, s.clone()));
        }
        Value::Array(items) => {
            assert_eq!(kind, 6);
            assert_eq!(rt.read(start, 1), b"[");
            assert_eq!(rt.read(end - 1, 1), b"]");
            assert_eq!(rt.count(tok), items.len() as i32);
            let mut expected = tok + 1;
            for (i, item) in items.iter().enumerate() {
                let t = rt.index(tok, i as i32);
                assert_eq!(t, expected, "elements are consecutive siblings");
                check_value(rt, t, item, strings);
                expected = rt.next(t);
            }
            assert_eq!(rt.next(tok), expected);
            assert_eq!(rt.index(tok, items.len() as i32), -1);
            assert_eq!(rt.index(tok, -1), -1);
            assert_eq!(rt.get(tok, b"a"), -1, "an array has no keys");
        }
        Value::Object(map) => {
            assert_eq!(kind, 7);
            assert_eq!(rt.read(start, 1), b"{");
            assert_eq!(rt.read(end - 1, 1), b"}");
            assert_eq!(rt.count(tok), map.len() as i32);
            let mut expected_key = tok + 1;
            for (k, v) in map {
                let t = rt.get(tok, k.as_bytes());
                // preserve_order: entries come in document order.
                assert_eq!(t, expected_key + 1, "key {k:?}");
                assert_eq!(rt.next(expected_key), t, "a key's next is its value");
                check_string(rt, expected_key, k);
                strings.push((expected_key, k.clone()));
                check_value(rt, t, v, strings);
                expected_key = rt.next(t);
            }
            assert_eq!(rt.next(tok), expected_key);
            assert_eq!(rt.get(tok, b"\xff not a key"), -1);
            assert_eq!(rt.index(tok, 0), -1, "an object has no elements");
        }
    }
    if !matches!(value, Value::String(_)) {
        assert_eq!(rt.str_eq(tok, b""), 0);
        assert_eq!(rt.unescape(tok), b"");
        assert_eq!(rt.out_tok(tok), b"null");
    }
    if !matches!(value, Value::Array(_) | Value::Object(_)) {
        assert_eq!(rt.count(tok), 0);
        assert_eq!(rt.next(tok), tok + 1);
    }
}

fn check_string(rt: &mut Rt, tok: i32, s: &str) {
    let (start, end) = (rt.start(tok), rt.end(tok));
    assert_eq!(rt.read(start - 1, 1), b"\"");
    assert_eq!(rt.read(end, 1), b"\"");
    assert_eq!(rt.unescape(tok), s.as_bytes());
    assert_eq!(rt.str_eq(tok, s.as_bytes()), 1);
    let mut longer = s.as_bytes().to_vec();
    longer.push(b'x');
    assert_eq!(rt.str_eq(tok, &longer), 0);
    assert_eq!(rt.starts_with(tok, &longer), 0);
    assert_eq!(rt.starts_with(tok, s.as_bytes()), 1);
    if let Some((cut, _)) = s.char_indices().nth(s.chars().count() / 2) {
        assert_eq!(rt.starts_with(tok, &s.as_bytes()[..cut]), 1);
        if cut > 0 {
            assert_eq!(rt.str_eq(tok, &s.as_bytes()[..cut]), 0);
        }
    }
    // (c) written back exactly as the interpreter writes strings.
    let expected = write_string(s);
    assert_eq!(rt.out_tok(tok), expected, "{s:?}");
    assert_eq!(rt.out_raw(s.as_bytes()), expected, "{s:?}");
    assert_eq!(expected, serde_json::to_string(s).unwrap().into_bytes());
}

#[test]
fn the_tape_agrees_with_serde_json() {
    let rt = RefCell::new(Rt::new());
    let mut runner = TestRunner::new(Config { cases: 600, failure_persistence: None, ..Config::default() });
    let checked = AtomicUsize::new(0);
    let result = runner.run(&(document(), any::<u64>()), |(doc, seed)| {
        if validate(doc.as_bytes()).is_err() {
            return Ok(());
        }
        checked.fetch_add(1, Ordering::Relaxed);
        let rt = &mut *rt.borrow_mut();
        prop_assert_eq!(rt.parse(doc.as_bytes()), 0);
        let value: Value = serde_json::from_str(&doc).expect("serde_json takes what validate takes");
        let mut strings = Vec::new();
        check_value(rt, 0, &value, &mut strings);
        // Every token is accounted for, and past the tape everything reads as absent.
        let ntok = rt.next(0);
        prop_assert_eq!(rt.kind(ntok), 0);
        prop_assert_eq!(rt.next(ntok), -1);
        prop_assert_eq!(rt.kind(-1), 0);
        prop_assert_eq!(rt.count(-1), 0);
        prop_assert_eq!(rt.get(-1, b"a"), -1);
        // Comparisons between string tokens agree with Rust's byte order.
        let mut state = seed;
        for _ in 0..strings.len().min(12) {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (ta, a) = &strings[(state >> 33) as usize % strings.len()];
            let (tb, b) = &strings[(state >> 13) as usize % strings.len()];
            prop_assert_eq!(rt.str_eq_tok(*ta, *tb), i32::from(a == b));
            prop_assert_eq!(rt.str_cmp_tok(*ta, *tb), a.as_bytes().cmp(b.as_bytes()) as i32);
        }
        if let Some((t, _)) = strings.first() {
            prop_assert_eq!(rt.str_eq_tok(*t, ntok), 0);
            prop_assert_eq!(rt.str_cmp_tok(*t, -1), i32::from(!strings[0].1.is_empty()));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(checked.into_inner() > 200);
}

// ---------------------------------------------------------------------------------------------------------------
// (c) the output writer.

#[test]
fn strings_are_written_like_the_interpreter_writes_them() {
    let cell = RefCell::new(Rt::new());
    let mut runner = TestRunner::new(Config { cases: 2000, failure_persistence: None, ..Config::default() });
    let result = runner.run(&string_literal(), |(text, content)| {
        let mut rt = cell.borrow_mut();
        prop_assert_eq!(rt.parse(text.as_bytes()), 0);
        let expected = write_string(&content);
        prop_assert_eq!(rt.out_tok(0), expected.clone(), "{:?}", text);
        prop_assert_eq!(rt.out_raw(content.as_bytes()), expected, "{:?}", content);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let mut rt = cell.into_inner();
    // Every control character, each ASCII punctuation byte, DEL and a few non-ASCII ones.
    let all: String = (0u8..0x80).map(char::from).chain("é✓😀\u{80}\u{10ffff}".chars()).collect();
    assert_eq!(rt.out_raw(all.as_bytes()), write_string(&all));
    let escaped: String = all.chars().map(json_escape).collect();
    assert_eq!(rt.parse(format!("\"{escaped}\"").as_bytes()), 0);
    assert_eq!(rt.out_tok(0), write_string(&all));
}

#[test]
fn the_writer_never_passes_its_limit() {
    let mut rt = Rt::new();
    rt.write(DATA, b"0123456789");
    let base = (DATA + 64) as i32;
    // A 12-byte window.
    rt.out_reset();
    let out_to = rt.out_to_fn.clone();
    let out_bytes = rt.out_bytes_fn.clone();
    let out_byte = rt.out_byte_fn.clone();
    let out_raw = rt.out_raw_fn.clone();
    out_to.call(&mut rt.store, (base, base + 12)).unwrap();
    out_bytes.call(&mut rt.store, (DATA as i32, 10)).unwrap();
    assert_eq!((rt.out_pos(), rt.out_overflow()), (base + 10, 0));
    // Does not fit: nothing is written, the cursor stays, the flag is set.
    out_bytes.call(&mut rt.store, (DATA as i32, 3)).unwrap();
    assert_eq!((rt.out_pos(), rt.out_overflow()), (base + 10, 1));
    out_raw.call(&mut rt.store, (DATA as i32, 1)).unwrap();
    assert_eq!(rt.out_pos(), base + 10, "a string of 3 bytes does not fit in 2");
    out_byte.call(&mut rt.store, b'x' as i32).unwrap();
    out_byte.call(&mut rt.store, b'y' as i32).unwrap();
    out_byte.call(&mut rt.store, b'z' as i32).unwrap();
    assert_eq!(rt.out_pos(), base + 12);
    assert_eq!(rt.read(base, 12), b"0123456789xy");
    assert_eq!(rt.read(base + 12, 1), b"\0", "nothing past the limit");
    // A limit below the base is clamped: nothing fits. Negative lengths never fit.
    out_to.call(&mut rt.store, (base, base - 100)).unwrap();
    out_byte.call(&mut rt.store, 1).unwrap();
    out_bytes.call(&mut rt.store, (DATA as i32, -1)).unwrap();
    assert_eq!(rt.out_pos(), base);
    // A token that is not a string writes `null`; an out-of-range token too.
    assert_eq!(rt.parse(b"[1]"), 0);
    assert_eq!(rt.out_tok(1), b"null");
    assert_eq!(rt.out_tok(99), b"null");
    assert_eq!(rt.out_tok(-1), b"null");
}

#[test]
fn accessors_are_total() {
    let mut rt = Rt::new();
    assert_eq!(rt.parse(br#"{"a":[1,"x",{"b":null}],"\u0063":"\u00e9"}"#), 0);
    assert_eq!(rt.get(0, b"c"), 9);
    assert_eq!(rt.str_eq(9, "é".as_bytes()), 1);
    assert_eq!(rt.next(0), 10);
    for t in [-1, -2, 10, 11, 1 << 20, i32::MAX, i32::MIN] {
        assert_eq!(rt.kind(t), 0);
        assert_eq!(rt.next(t), -1);
        assert_eq!((rt.start(t), rt.end(t), rt.count(t)), (0, 0, 0));
        assert_eq!(rt.get(t, b"a"), -1);
        assert_eq!(rt.index(t, 0), -1);
        assert_eq!(rt.str_eq(t, b""), 0);
        assert_eq!(rt.starts_with(t, b""), 0);
        assert_eq!(rt.str_eq_tok(t, 9), 0);
        assert_eq!(rt.str_eq_tok(9, t), 0);
        assert_eq!(rt.str_cmp_tok(t, 9), -1);
        assert_eq!(rt.str_cmp_tok(9, t), 1);
        assert_eq!(rt.unescape(t), b"");
    }
    assert_eq!(rt.index(2, i32::MAX), -1);
    assert_eq!(rt.index(2, i32::MIN), -1);
    // After a failed parse nothing of the old tape is visible.
    assert_eq!(rt.parse(b"{\"a\":"), 1);
    assert_eq!(rt.kind(0), 0);
    assert_eq!(rt.get(0, b"a"), -1);
}

// ---------------------------------------------------------------------------------------------------------------
// Speed (release builds): `cargo test --release --test wasm_json -- --ignored --nocapture parse_speed`

#[test]
#[ignore]
fn parse_speed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bank-disputes/requests");
    let pretty = std::fs::read(dir.join("allow-reading-the-account-needs-no-approval.json")).unwrap();
    let compact = serde_json::to_vec(&serde_json::from_slice::<Value>(&pretty).unwrap()).unwrap();
    let wallet = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/wallet/requests/allow-reading-orders-with-the-wide-credential.json"),
    )
    .unwrap();
    let wallet_compact = serde_json::to_vec(&serde_json::from_slice::<Value>(&wallet).unwrap()).unwrap();
    let mut rt = Rt::new();
    let parse = rt.parse_fn.clone();
    for (name, text) in [
        ("bank pretty", &pretty),
        ("bank compact", &compact),
        ("wallet pretty", &wallet),
        ("wallet compact", &wallet_compact),
    ] {
        rt.write(INPUT_BASE, text);
        let args = (INPUT_BASE as i32, text.len() as i32);
        assert_eq!(parse.call(&mut rt.store, args).unwrap(), 0);
        let mut samples = Vec::new();
        for _ in 0..201 {
            let started = std::time::Instant::now();
            for _ in 0..1000 {
                parse.call(&mut rt.store, args).unwrap();
            }
            samples.push(started.elapsed().as_nanos() as f64 / 1000.0);
        }
        samples.sort_by(f64::total_cmp);
        let empty = rt.kind_fn.clone();
        let started = std::time::Instant::now();
        for _ in 0..1_000_000 {
            empty.call(&mut rt.store, 0).unwrap();
        }
        let call = started.elapsed().as_nanos() as f64 / 1e6;
        println!(
            "{name:>15}: {} bytes, {} tokens, json_parse median {:.0} ns (p10 {:.0}, p90 {:.0}); a bare call {call:.0} ns",
            text.len(),
            rt.next(0),
            samples[100],
            samples[20],
            samples[180],
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The interpreter runs the same rule first.

#[test]
fn the_interpreter_maps_rejections_to_reason_codes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/wallet");
    let mut sources = remit::stdlib::sources();
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries.iter().filter(|p| p.extension().is_some_and(|e| e == "remit")) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sources.add(name, std::fs::read_to_string(path).unwrap());
    }
    let checked = remit::check::check(sources);
    let program = checked.program.expect("the wallet example checks");
    let request = std::fs::read(dir.join("requests/allow-reading-orders-with-the-wide-credential.json")).unwrap();
    let reasons = |bytes: &[u8]| remit::eval::decide(&program, bytes).reasons;
    let baseline = reasons(&request);
    assert!(baseline.iter().all(|r| !r.starts_with("request.")), "{baseline:?}");

    // Padded with whitespace to exactly the limit: decided as before; one byte more: oversize, alone.
    let mut padded = request.clone();
    padded.resize(MAX_INPUT as usize, b' ');
    assert_eq!(reasons(&padded), baseline);
    padded.push(b' ');
    assert_eq!(reasons(&padded), ["request.oversize"]);
    let listing = remit::eval::visible_tools(&program, &padded);
    assert!(listing.visible.is_empty());
    assert!(listing.hidden.iter().all(|h| h.reason == "request.oversize"));

    // A duplicate key anywhere, also spelled differently, and nesting past 64: malformed.
    let text = String::from_utf8(request.clone()).unwrap();
    let dup = text.replacen("\"mandate\"", "\"mandate\": \"other\", \"\\u006dandate\"", 1);
    assert_eq!(reasons(dup.as_bytes()), ["request.malformed"]);
    let deep = text.replacen('{', &format!("{{\"deep\": {}{}, ", "[".repeat(64), "]".repeat(64)), 1);
    assert_eq!(reasons(deep.as_bytes()), ["request.malformed"]);
    let fine = text.replacen('{', &format!("{{\"deep\": {}{}, ", "[".repeat(63), "]".repeat(63)), 1);
    assert_eq!(reasons(fine.as_bytes()), baseline);
}
