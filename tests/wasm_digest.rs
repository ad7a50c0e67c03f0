//! The module runtime's SHA-256 and argument digest, run in wasmtime, against the `sha2` crate and the reference
//! interpreter's `remit::eval::argument_digest`, on fixed vectors and random inputs (random JSON texts with every
//! number form, escapes, unicode and whitespace, parsed by the module's `json_parse`). Duplicate keys, which
//! `json_parse` rejects, are checked on tapes built here in the same format.

mod support;

use std::collections::HashSet;

use remit::wasm::layout::{INPUT_BASE, MAX_INPUT, OUT_BASE, TAPE_BASE};
use remit::wasm::module::ModuleBuilder;
use remit::wasm::rt;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use support::rng::SplitMix as Rng;
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

struct Rt {
    store: Store<()>,
    memory: Memory,
    sha256: TypedFunc<(i32, i32, i32), ()>,
    json_parse: TypedFunc<(i32, i32), i32>,
    digest_args: TypedFunc<(i32, i32, i32, i32), ()>,
}

impl Rt {
    fn new() -> Rt {
        let mut m = ModuleBuilder::new();
        rt::declare(&mut m);
        rt::define(&mut m);
        m.export_func("sha256", "sha256");
        m.export_func("digest_args", "digest_args");
        m.export_func("json_parse", "json_parse");
        let bytes = m.finish().expect("the runtime module validates");
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes).expect("compiles");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let memory = instance.get_memory(&mut store, "memory").expect("memory");
        let sha256 = instance.get_typed_func(&mut store, "sha256").expect("sha256");
        let json_parse = instance.get_typed_func(&mut store, "json_parse").expect("json_parse");
        let digest_args = instance.get_typed_func(&mut store, "digest_args").expect("digest_args");
        Rt { store, memory, sha256, json_parse, digest_args }
    }

    fn sha256(&mut self, at: u32, data: &[u8]) -> [u8; 32] {
        self.memory.write(&mut self.store, at as usize, data).expect("in memory");
        self.sha256.call(&mut self.store, (at as i32, data.len() as i32, OUT_BASE as i32)).expect("no trap");
        let mut out = [0u8; 32];
        self.memory.read(&self.store, OUT_BASE as usize, &mut out).expect("in memory");
        out
    }

    /// Places `args` (JSON text) in the input area, parses it with `json_parse` (which must accept it) and places
    /// `tool` after it; the module's digest.
    fn digest(&mut self, args: Option<&str>, tool: &[u8]) -> String {
        self.digest_with(args, tool, false)
    }

    /// The same with the tape built by [`tape_of`] (for texts `json_parse` rightly rejects: duplicate keys).
    fn digest_own_tape(&mut self, args: &str, tool: &[u8]) -> String {
        self.digest_with(Some(args), tool, true)
    }

    fn digest_with(&mut self, args: Option<&str>, tool: &[u8], own_tape: bool) -> String {
        assert!(args.map_or(0, str::len) + tool.len() <= MAX_INPUT as usize, "the test input fits");
        let mut at = INPUT_BASE;
        let mut tok = -1;
        if let Some(text) = args {
            self.memory.write(&mut self.store, INPUT_BASE as usize, text.as_bytes()).expect("in memory");
            if own_tape {
                let tape = tape_of(text.as_bytes(), INPUT_BASE);
                self.memory.write(&mut self.store, TAPE_BASE as usize, &tape).expect("in memory");
            } else {
                let status =
                    self.json_parse.call(&mut self.store, (INPUT_BASE as i32, text.len() as i32)).expect("no trap");
                assert_eq!(status, 0, "json_parse accepts {text}");
            }
            at += text.len() as u32;
            tok = 0;
        }
        self.memory.write(&mut self.store, at as usize, tool).expect("in memory");
        self.digest_args.call(&mut self.store, (tok, at as i32, tool.len() as i32, OUT_BASE as i32)).expect("no trap");
        let mut out = [0u8; 71];
        self.memory.read(&self.store, OUT_BASE as usize, &mut out).expect("in memory");
        String::from_utf8(out.to_vec()).expect("ASCII")
    }
}

/// The JSON tape of a valid JSON text placed at `base` (the format `json_parse` writes: 16-byte tokens of kind,
/// flags, start, end, next).
fn tape_of(text: &[u8], base: u32) -> Vec<u8> {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
        toks: Vec<(u8, u8, u32, u32, u32)>,
        base: u32,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }
        fn string(&mut self) {
            self.i += 1;
            let start = self.i;
            let mut flags = 0;
            while self.s[self.i] != b'"' {
                if self.s[self.i] == b'\\' {
                    flags = 1;
                    self.i += 1;
                }
                self.i += 1;
            }
            self.toks.push((5, flags, self.base + start as u32, self.base + self.i as u32, self.toks.len() as u32 + 1));
            self.i += 1;
        }
        fn value(&mut self) {
            self.ws();
            let at = self.toks.len();
            match self.s[self.i] {
                b'"' => self.string(),
                b'n' | b't' | b'f' => {
                    let (kind, len) = match self.s[self.i] {
                        b'n' => (1, 4),
                        b'f' => (2, 5),
                        _ => (3, 4),
                    };
                    let start = self.base + self.i as u32;
                    self.toks.push((kind, 0, start, start + len, at as u32 + 1));
                    self.i += len as usize;
                }
                open @ (b'[' | b'{') => {
                    let close = if open == b'[' { b']' } else { b'}' };
                    let start = self.base + self.i as u32;
                    self.toks.push((if open == b'[' { 6 } else { 7 }, 0, start, 0, 0));
                    self.i += 1;
                    self.ws();
                    if self.s[self.i] == close {
                        self.i += 1;
                    } else {
                        loop {
                            if open == b'{' {
                                self.ws();
                                self.string();
                                self.ws();
                                self.i += 1; // ':'
                            }
                            self.value();
                            self.ws();
                            let c = self.s[self.i];
                            self.i += 1;
                            if c == close {
                                break;
                            }
                        }
                    }
                    self.toks[at].3 = self.base + self.i as u32;
                    self.toks[at].4 = self.toks.len() as u32;
                }
                _ => {
                    let start = self.i;
                    while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                        self.i += 1;
                    }
                    self.toks.push((4, 0, self.base + start as u32, self.base + self.i as u32, at as u32 + 1));
                }
            }
        }
    }
    let mut p = P { s: text, i: 0, toks: Vec::new(), base };
    p.value();
    let mut out = Vec::with_capacity(p.toks.len() * 16);
    for (kind, flags, start, end, next) in p.toks {
        out.extend_from_slice(&[kind, flags, 0, 0]);
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&end.to_le_bytes());
        out.extend_from_slice(&next.to_le_bytes());
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn reference(args: Option<&str>, tool: &[u8]) -> String {
    let value: Json = match args {
        Some(text) => serde_json::from_str(text).unwrap_or_else(|e| panic!("test JSON {text:?} parses: {e}")),
        None => Json::Object(serde_json::Map::new()),
    };
    remit::eval::argument_digest(std::str::from_utf8(tool).expect("UTF-8 tool"), &value)
}

#[test]
fn sha256_nist_vectors() {
    let mut rt = Rt::new();
    let cases: [(&[u8], &str); 4] = [
        (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        ),
        (
            b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
        ),
    ];
    for (data, expected) in cases {
        assert_eq!(hex(&rt.sha256(INPUT_BASE, data)), expected, "{:?}", String::from_utf8_lossy(data));
    }
}

#[test]
fn sha256_matches_sha2_on_random_inputs() {
    let mut rt = Rt::new();
    let mut rng = Rng(1);
    for len in 0..300 {
        for _ in 0..3 {
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // unaligned addresses too
            let at = INPUT_BASE + rng.below(8) as u32;
            assert_eq!(rt.sha256(at, &data), <[u8; 32]>::from(Sha256::digest(&data)), "length {len}");
        }
    }
    for len in [4095, 4096, 65_537, MAX_INPUT as usize] {
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert_eq!(rt.sha256(INPUT_BASE, &data), <[u8; 32]>::from(Sha256::digest(&data)), "length {len}");
    }
}

#[test]
fn digest_of_fixed_cases() {
    let mut rt = Rt::new();
    // the reference's own vectors
    assert_eq!(
        rt.digest(Some(r#"{ "merchant":"acme","amount":"25.00 USD" }"#), b"pay"),
        "sha256:4c32a2e75e970c681e0162da2416da6dc0bbec36565b866fe1b1edbec497f97f"
    );
    assert_eq!(rt.digest(None, b"t"), "sha256:8fd627452e8a504048e4617df4e2cda85034bf48d3e7df4c3e2eb4a4acb0133e");
    assert_eq!(rt.digest(Some("{}"), b"t"), "sha256:8fd627452e8a504048e4617df4e2cda85034bf48d3e7df4c3e2eb4a4acb0133e");
    let cases: &[(&str, &[u8])] = &[
        (
            r#"{"n": [1, -2, 12.50, 1.0, 18446744073709551615, 1e3, 1E20, 1.5e-7, 0.1, -0, 1E+2, 0.5E03, -0.0e-0]}"#,
            b"t",
        ),
        (r#"{"big": 12345678901234567890123, "neg": -12345678901234567890123.000e-0}"#, b"t"),
        (r#"{"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "B": true}, "\u00e9": null, "Z": "s"}"#, b"t"),
        (r#"{"s": "q\" b\\ n\n t\t r\r b\b f\f nul\u0000 us\u001F del\u007f / \/ \u00E9 \u2713 \ud83d\ude00"}"#, b"t"),
        (r#"{"é": 1, "e\u0301": 3, "\uffff": 4, "😀": 5, "\ud83d\ude01": 6, "": 7, "\u0000": 8, "\u0000a": 9}"#, b"t"),
        (r#"{"\"": 1, "\\": 2, "A": 3, "\u001f": 4, "\u007f": 5, "\/": 6, "\u00e8": 7, "\u00e9\u0000": 8}"#, b"t"),
        (r#"{"k": [[[], {}], [{}, []], null, true, false, "", 0]}"#, b"tool \"\\\n\t\r\x08\x0c\x01\x1f\x7f \xc3\xa9"),
        ("{}", b""),
    ];
    for (args, tool) in cases {
        assert_eq!(rt.digest(Some(args), tool), reference(Some(args), tool), "{args}");
    }
}

#[test]
fn duplicate_keys_keep_the_last_value_like_serde_json() {
    // `json_parse` rejects these requests; a tape that has them anyway digests as serde_json's map (the last wins).
    let mut rt = Rt::new();
    let cases = [
        r#"{"a": 1, "a": 2, "\u0061": 3, "b": {"x": 1, "x": [], "y": 0}}"#,
        r#"{"é": 1, "\u00e9": 2, "\u00E9": 3, "e\u0301": 4, "😀": 5, "\ud83d\ude00": 6, "\"": 7, "\u0022": 8}"#,
    ];
    for args in cases {
        assert_eq!(rt.digest_own_tape(args, b"t"), reference(Some(args), b"t"), "{args}");
    }
    let mut args = String::from("{");
    for k in (0..15_000).rev() {
        if k < 14_999 {
            args.push(',');
        }
        args.push_str(&format!(r#""k{}":{k}"#, k % 11_000));
    }
    args.push('}');
    assert_eq!(rt.digest_own_tape(&args, b"t"), reference(Some(&args), b"t"));
}

/// Random JSON texts whose parse by serde_json is the reference.
struct Gen {
    rng: Rng,
}

const CHARS: &[char] = &[
    'a',
    'b',
    'A',
    'Z',
    'z',
    '0',
    ' ',
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{1}',
    '\u{8}',
    '\u{9}',
    '\u{a}',
    '\u{c}',
    '\u{d}',
    '\u{1f}',
    '\u{7f}',
    '\u{80}',
    'é',
    'ß',
    '\u{7ff}',
    '\u{800}',
    '✓',
    '\u{2028}',
    '\u{d7ff}',
    '\u{e000}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10000}',
    '😀',
    '\u{10ffff}',
];

impl Gen {
    fn ws(&mut self, out: &mut String) {
        if self.rng.chance(20) {
            out.push_str(self.rng.word(&[" ", "\n", "\t", "  ", "\r\n "]));
        }
    }

    fn char_escaped(&mut self, c: char, out: &mut String) {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '\r' => Some("\\r"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '/' if self.rng.chance(50) => Some("\\/"),
            _ => None,
        };
        let must = (c as u32) < 0x20 || c == '"' || c == '\\';
        match short {
            Some(s) if self.rng.chance(70) => out.push_str(s),
            _ if must || self.rng.chance(25) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if self.rng.chance(50) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
            _ => out.push(c),
        }
    }

    /// Writes a random string of `len` characters from `pool`; returns its value.
    fn string(&mut self, out: &mut String, len: usize, pool: &[char]) -> String {
        out.push('"');
        let mut value = String::new();
        for _ in 0..len {
            let c = *self.rng.pick(pool);
            self.char_escaped(c, out);
            value.push(c);
        }
        out.push('"');
        value
    }

    /// A key not in `seen`: few distinct characters, so keys share prefixes and differ in escaping.
    fn key(&mut self, out: &mut String, seen: &mut HashSet<String>) {
        let pool = ['a', 'b', 'é', '"', '\u{0}', 'A', '😀', '\u{ffff}'];
        loop {
            let mut text = String::new();
            let len = self.rng.below(4);
            let value = self.string(&mut text, len, &pool);
            if seen.insert(value) {
                out.push_str(&text);
                return;
            }
        }
    }

    fn digits(&mut self, out: &mut String, n: usize) {
        for _ in 0..n {
            out.push(char::from(b'0' + self.rng.below(10) as u8));
        }
    }

    fn number(&mut self, out: &mut String) {
        if self.rng.chance(20) {
            out.push_str(self.rng.word(&["-0", "0", "1.50", "1e3", "1E-7", "12345678901234567890123", "-0.0E+00"]));
            return;
        }
        if self.rng.chance(30) {
            out.push('-');
        }
        if self.rng.chance(25) {
            out.push('0');
        } else {
            out.push(char::from(b'1' + self.rng.below(9) as u8));
            let n = *self.rng.pick(&[0, 1, 2, 5, 18, 19, 20, 30]);
            self.digits(out, n);
        }
        if self.rng.chance(40) {
            out.push('.');
            let n = 1 + self.rng.below(12);
            self.digits(out, n);
        }
        if self.rng.chance(30) {
            out.push_str(self.rng.word(&["e", "E"]));
            out.push_str(self.rng.word(&["", "+", "-"]));
            let n = 1 + self.rng.below(3);
            self.digits(out, n);
        }
    }

    fn value(&mut self, out: &mut String, depth: usize) {
        let kinds = if depth >= 5 { 5 } else { 7 };
        match self.rng.below(kinds) {
            0 => out.push_str(self.rng.word(&["null", "true", "false"])),
            1 | 2 => self.number(out),
            3 | 4 => {
                let len = self.rng.below(12);
                self.string(out, len, CHARS);
            }
            5 => {
                out.push('[');
                let n = self.rng.below(5);
                for k in 0..n {
                    if k > 0 {
                        out.push(',');
                    }
                    self.ws(out);
                    self.value(out, depth + 1);
                    self.ws(out);
                }
                out.push(']');
            }
            _ => self.object(out, depth),
        }
    }

    fn object(&mut self, out: &mut String, depth: usize) {
        out.push('{');
        self.ws(out);
        let n = self.rng.below(if depth == 0 { 10 } else { 6 });
        let mut seen = HashSet::new();
        for k in 0..n {
            if k > 0 {
                out.push(',');
                self.ws(out);
            }
            self.key(out, &mut seen);
            self.ws(out);
            out.push(':');
            self.ws(out);
            self.value(out, depth + 1);
            self.ws(out);
        }
        out.push('}');
    }

    fn tool(&mut self) -> String {
        let n = self.rng.below(10);
        (0..n).map(|_| *self.rng.pick(CHARS)).collect()
    }
}

#[test]
fn digest_matches_the_interpreter_on_random_arguments() {
    let mut rt = Rt::new();
    let mut gen = Gen { rng: Rng(7) };
    for case in 0..6000 {
        let mut args = String::new();
        gen.object(&mut args, 0);
        let tool = gen.tool();
        let expected = reference(Some(&args), tool.as_bytes());
        let got = rt.digest(Some(&args), tool.as_bytes());
        assert_eq!(got, expected, "case {case}: tool {tool:?}, arguments {args}");
    }
}

#[test]
fn digest_of_large_arguments() {
    let mut rt = Rt::new();
    let mut gen = Gen { rng: Rng(11) };
    // long strings and numbers (longer than the stream buffer), escaped and not
    let long = "x".repeat(9000);
    let long_escaped = "\\u00e9\\n".repeat(3000);
    let long_number = format!("1{}.{}E5", "2".repeat(5000), "3".repeat(5000));
    let args = format!(r#"{{"b": "{long}", "a": "{long_escaped}", "n": {long_number}, "{long}": 1}}"#);
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
    // many keys, in reverse order (the Shell sort's long gaps), then as many short keys as fit, shuffled
    let mut args = String::from("{");
    for k in (0..15_000).rev() {
        if k < 14_999 {
            args.push(',');
        }
        args.push_str(&format!(r#""k{k}":{k}"#));
    }
    args.push('}');
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
    let digits: Vec<char> = ('0'..='9').chain('a'..='z').chain('A'..='Z').collect();
    let mut keys: Vec<String> =
        (0..31_000).map(|k| [k / 3844, k / 62 % 62, k % 62].iter().map(|&d| digits[d]).collect()).collect();
    for k in (1..keys.len()).rev() {
        keys.swap(k, gen.rng.below(k + 1));
    }
    let args = format!("{{{}}}", keys.iter().map(|k| format!("\"{k}\":0")).collect::<Vec<_>>().join(","));
    assert!(args.len() <= MAX_INPUT as usize);
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
    // the deepest nesting json_parse accepts
    let args = format!(r#"{{"d": {}1{}}}"#, "[".repeat(62), "]".repeat(62));
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
    // deep nesting
    let args = format!(r#"{{"d": {}1{}}}"#, r#"[{"x":"#.repeat(30), "}]".repeat(30));
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
    // many random objects in one big text
    let mut args = String::from("{");
    for k in 0..400 {
        if k > 0 {
            args.push(',');
        }
        args.push_str(&format!("\"{k}\":"));
        gen.object(&mut args, 1);
    }
    args.push('}');
    assert!(args.len() < MAX_INPUT as usize);
    assert_eq!(rt.digest(Some(&args), b"t"), reference(Some(&args), b"t"));
}

/// `cargo test --release --test wasm_digest -- --ignored --nocapture`: time per digest of a ~100-byte argument object.
/// Samples of 100 calls are short enough to mostly fit in one scheduler time slice on a loaded machine.
#[test]
#[ignore]
fn digest_speed() {
    let mut rt = Rt::new();
    let args = r#"{"merchant": "acme-supplies", "amount": "25.00 USD", "order": "order:991", "items": [1, 2, 3], "note": "x"}"#;
    rt.memory.write(&mut rt.store, INPUT_BASE as usize, args.as_bytes()).expect("in memory");
    assert_eq!(rt.json_parse.call(&mut rt.store, (INPUT_BASE as i32, args.len() as i32)).expect("no trap"), 0);
    let tool_at = INPUT_BASE + args.len() as u32;
    rt.memory.write(&mut rt.store, tool_at as usize, b"pay").expect("in memory");
    let call = (0, tool_at as i32, 3, OUT_BASE as i32);
    let mut samples = Vec::new();
    for _ in 0..2000 {
        let start = std::time::Instant::now();
        for _ in 0..100 {
            rt.digest_args.call(&mut rt.store, call).expect("no trap");
        }
        samples.push(start.elapsed().as_nanos() as f64 / 100.0);
    }
    samples.sort_by(f64::total_cmp);
    assert_eq!(rt.digest(Some(args), b"pay"), reference(Some(args), b"pay"));
    println!("digest_args, {} bytes of arguments: median {:.0} ns", args.len(), samples[samples.len() / 2]);
    let data = vec![b'a'; 1024];
    rt.memory.write(&mut rt.store, INPUT_BASE as usize, &data).expect("in memory");
    let mut samples = Vec::new();
    for _ in 0..2000 {
        let start = std::time::Instant::now();
        for _ in 0..100 {
            rt.sha256.call(&mut rt.store, (INPUT_BASE as i32, 1024, OUT_BASE as i32)).expect("no trap");
        }
        samples.push(start.elapsed().as_nanos() as f64 / 100.0);
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!("sha256 of 1 KiB (17 blocks): median {median:.0} ns, {:.0} ns per block", median / 17.0);
    // the same work natively, for scale on a loaded machine
    let value: Json = serde_json::from_str(args).expect("parses");
    let time = |f: &mut dyn FnMut()| {
        let mut samples = Vec::new();
        for _ in 0..2000 {
            let start = std::time::Instant::now();
            for _ in 0..100 {
                f();
            }
            samples.push(start.elapsed().as_nanos() as f64 / 100.0);
        }
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    };
    let native_digest = time(&mut || {
        std::hint::black_box(remit::eval::argument_digest("pay", std::hint::black_box(&value)));
    });
    let native_sha = time(&mut || {
        std::hint::black_box(Sha256::digest(std::hint::black_box(&data)));
    });
    println!("native: argument_digest (parsed value) {native_digest:.0} ns, sha2 of 1 KiB {native_sha:.0} ns");
}
