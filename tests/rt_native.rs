//! The runtime crate (crates/remit-rt) compiled natively, against the definitions it must reproduce:
//! - `json::parse` accepts and rejects exactly what `remit::json::validate` does, with the same error kind, on
//!   generated documents and their mutations (truncations, flipped, inserted and deleted bytes), on random bytes,
//!   and on objects past the small-object limit (there the kind may differ only as json.rs says);
//! - `digest::argument_digest` equals `remit::eval::argument_digest` on every accepted document;
//! - `sha256` equals the sha2 crate's; the output writer never writes past its buffer and reports overflow.
//!
//! The artifact compiled from the same crate is held to the native one in tests/runtime_artifact.rs.

use proptest::prelude::*;
use remit_rt::json::{capacity, parse, Doc, JsonError, Token};
use remit_rt::out::Out;
use remit_rt::Sink;
use sha2::{Digest, Sha256};

#[test]
fn the_input_limit_is_the_abi_s() {
    assert_eq!(remit_rt::MAX_INPUT, remit::wasm::layout::MAX_INPUT as usize);
    assert_eq!(remit_rt::json::MAX_DEPTH, remit::json::MAX_DEPTH);
}

fn native(bytes: &[u8]) -> Result<(), JsonError> {
    let mut tape = vec![Token::default(); capacity(bytes.len())];
    let mut keys = vec![0u32; capacity(bytes.len())];
    parse(bytes, &mut tape, &mut keys).map(drop)
}

fn reference(bytes: &[u8]) -> Result<(), JsonError> {
    remit::json::validate(bytes).map_err(|e| match e {
        remit::json::JsonError::Syntax => JsonError::Syntax,
        remit::json::JsonError::Depth => JsonError::Depth,
        remit::json::JsonError::Duplicate => JsonError::Duplicate,
        remit::json::JsonError::TooLarge => JsonError::TooLarge,
    })
}

fn native_digest(bytes: &[u8], tool: &str) -> String {
    let mut tape = vec![Token::default(); capacity(bytes.len())];
    let mut keys = vec![0u32; capacity(bytes.len())];
    let n = parse(bytes, &mut tape, &mut keys).unwrap();
    let doc = Doc { input: bytes, tape: &tape[..n as usize] };
    let (digest, complete) = remit_rt::digest::argument_digest(&doc, Some(0), tool.as_bytes(), &mut keys);
    assert!(complete);
    String::from_utf8(digest.to_vec()).unwrap()
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
        let value = remit::json::parse(bytes).unwrap();
        for tool in ["pay", "é\"\n"] {
            prop_assert_eq!(native_digest(bytes, tool), remit::eval::argument_digest(tool, &value), "{}", shown);
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
            (prop::collection::vec((key(), ws(), inner, ws()), 0..6), ws()).prop_map(|(entries, w)| {
                let entries: Vec<String> = entries.into_iter().map(|(k, a, v, b)| format!("{k}{a}:{b}{v}")).collect();
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
