//! The JSON acceptance rule shared by the interpreter and the decision module (docs/json.md): strict RFC 8259, plus a
//! nesting limit, a size limit and no duplicate object keys. The interpreter and the gateway read requests with
//! [`parse`]; the decision module's runtime (`remit_rt::json::parse`, crates/remit-rt) implements the same rule, and
//! the differential tests in tests/rt_native.rs and tests/runtime_artifact.rs hold the two to it.
//!
//! Duplicate keys are rejected because they are a smuggling vector: a gateway that keeps the first occurrence and a
//! policy that keeps the last would see two different requests in the same bytes.
//!
//! [`parse`] builds the `serde_json::Value` itself rather than handing the bytes to serde_json: with the
//! `arbitrary_precision` feature (which keeps decimals exact), serde_json's deserializer reads an object whose first
//! key is `$serde_json::private::Number` as a number, so a request could change shape between the rule and the
//! tree. Here every key is just a key.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Number, Value};

/// Largest request accepted, in bytes (docs/abi.md): a larger one is `request.oversize`. The runtime crate's
/// `remit_rt::MAX_INPUT` is the same (tests/rt_native.rs).
pub const MAX_INPUT: usize = 256 * 1024;

/// Deepest nesting accepted: the root container is at depth 1.
pub const MAX_DEPTH: usize = 64;

/// Why bytes are not an acceptable JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not RFC 8259 JSON (including invalid UTF-8 and lone surrogate escapes).
    Syntax,
    /// Containers nested deeper than [`MAX_DEPTH`].
    Depth,
    /// An object has two keys that are equal after unescaping.
    Duplicate,
    /// More than [`MAX_INPUT`] bytes.
    TooLarge,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonError::Syntax => "not valid JSON",
            JsonError::Depth => "JSON nested too deeply",
            JsonError::Duplicate => "duplicate key in a JSON object",
            JsonError::TooLarge => "JSON input too large",
        })
    }
}

impl std::error::Error for JsonError {}

/// Checks that `input` is one acceptable JSON document (see the module documentation).
pub fn validate(input: &[u8]) -> Result<(), JsonError> {
    parse(input).map(drop)
}

/// Reads `input` as one acceptable JSON document (see the module documentation).
pub fn parse(input: &[u8]) -> Result<Value, JsonError> {
    if input.len() > MAX_INPUT {
        return Err(JsonError::TooLarge);
    }
    parse_within(input, MAX_DEPTH)
}

/// Reads JSON the gateway wrote itself (a log entry, a stored access request): the same grammar and key rule
/// without the request limits — a stored entry wraps a request, so it may be larger and one level deeper — but
/// with serde_json's own depth limit, and, like [`parse`], never serde_json's magic keys.
pub fn parse_stored(text: &str) -> Result<Value, JsonError> {
    parse_within(text.as_bytes(), 2 * MAX_DEPTH)
}

fn parse_within(input: &[u8], max_depth: usize) -> Result<Value, JsonError> {
    // Outside strings only ASCII is allowed, so checking the whole input once is the same as checking every string.
    if std::str::from_utf8(input).is_err() {
        return Err(JsonError::Syntax);
    }
    let mut p = Parser { s: input, i: 0, max_depth };
    p.ws();
    let value = p.value(0)?;
    p.ws();
    if p.i != input.len() {
        return Err(JsonError::Syntax);
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.i += 1;
            Ok(())
        } else {
            Err(JsonError::Syntax)
        }
    }

    /// One value at the current position; `depth` is the number of enclosing containers.
    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek().ok_or(JsonError::Syntax)? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().and_then(text).map(Value::String),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            _ => Err(JsonError::Syntax),
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Result<Value, JsonError> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(value)
        } else {
            Err(JsonError::Syntax)
        }
    }

    fn digits(&mut self) -> Result<(), JsonError> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(JsonError::Syntax);
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        Ok(())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits()?,
            _ => return Err(JsonError::Syntax),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits()?;
        }
        // The text is ASCII and already matches the grammar; serde_json keeps it exactly (arbitrary precision).
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| JsonError::Syntax)?;
        Number::from_str(text).map(Value::Number).map_err(|_| JsonError::Syntax)
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > self.max_depth {
            return Err(JsonError::Depth);
        }
        self.i += 1;
        self.ws();
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(JsonError::Syntax),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > self.max_depth {
            return Err(JsonError::Depth);
        }
        self.i += 1;
        self.ws();
        // serde_json's map (an IndexMap with a randomly keyed hasher): no key set can be crafted to make the
        // duplicate check quadratic.
        let mut members = Map::new();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(JsonError::Syntax);
            }
            let key = text(self.string()?)?;
            if members.contains_key(&key) {
                return Err(JsonError::Duplicate);
            }
            self.ws();
            self.eat(b':')?;
            self.ws();
            let value = self.value(depth)?;
            members.insert(key, value);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(JsonError::Syntax),
            }
        }
    }

    fn hex4(&self, at: usize) -> Result<u32, JsonError> {
        let digits = self.s.get(at..at + 4).ok_or(JsonError::Syntax)?;
        let mut value = 0;
        for &d in digits {
            let digit = (d as char).to_digit(16).ok_or(JsonError::Syntax)?;
            value = value * 16 + digit;
        }
        Ok(value)
    }

    /// A string at the current position (on its opening quote); returns its unescaped content. The input is
    /// already known to be UTF-8, so raw bytes only need checking for control characters.
    fn string(&mut self) -> Result<Cow<'a, [u8]>, JsonError> {
        self.i += 1;
        let start = self.i;
        let mut owned: Option<Vec<u8>> = None;
        loop {
            let byte = self.peek().ok_or(JsonError::Syntax)?;
            match byte {
                b'"' => {
                    let content = match owned {
                        Some(bytes) => Cow::Owned(bytes),
                        None => Cow::Borrowed(&self.s[start..self.i]),
                    };
                    self.i += 1;
                    return Ok(content);
                }
                b'\\' => {
                    let out = owned.get_or_insert_with(|| self.s[start..self.i].to_vec());
                    let escape = *self.s.get(self.i + 1).ok_or(JsonError::Syntax)?;
                    let simple = match escape {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => 0,
                        _ => return Err(JsonError::Syntax),
                    };
                    if escape != b'u' {
                        out.push(simple);
                        self.i += 2;
                        continue;
                    }
                    let unit = self.hex4(self.i + 2)?;
                    self.i += 6;
                    let code = match unit {
                        0xDC00..=0xDFFF => return Err(JsonError::Syntax),
                        0xD800..=0xDBFF => {
                            if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                return Err(JsonError::Syntax);
                            }
                            let low = self.hex4(self.i + 2)?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return Err(JsonError::Syntax);
                            }
                            self.i += 6;
                            0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        }
                        unit => unit,
                    };
                    let c = char::from_u32(code).ok_or(JsonError::Syntax)?;
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                0x00..=0x1f => return Err(JsonError::Syntax),
                _ => {
                    if let Some(out) = owned.as_mut() {
                        out.push(byte);
                    }
                    self.i += 1;
                }
            }
        }
    }
}

/// A string's unescaped content as text: the input is UTF-8 and escapes decode to whole characters.
fn text(content: Cow<'_, [u8]>) -> Result<String, JsonError> {
    String::from_utf8(content.into_owned()).map_err(|_| JsonError::Syntax)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(text: &str) -> Result<(), JsonError> {
        validate(text.as_bytes())
    }

    fn ok(text: &str) {
        assert_eq!(check(text), Ok(()), "{text:?} should be accepted");
    }

    fn syntax(text: &[u8]) {
        assert_eq!(
            validate(text),
            Err(JsonError::Syntax),
            "{:?} should be a syntax error",
            String::from_utf8_lossy(text)
        );
    }

    /// serde_json (with `arbitrary_precision`) reads an object keyed `$serde_json::private::Number` as a number and
    /// fails on a non-numeric value; to the JSON rule it is an ordinary key (found by fuzzing the module against the
    /// interpreter: fuzz/regressions/decide-serde-magic-key.json).
    #[test]
    fn serde_json_magic_keys_are_ordinary_keys() {
        for key in ["$serde_json::private::Number", "$serde_json::private::RawValue"] {
            let text = format!(r#"{{"{key}": "acme", "n": 1.50}}"#);
            let value = parse(text.as_bytes()).expect("acceptable JSON");
            assert_eq!(value[key], Value::String("acme".into()));
            assert_eq!(value["n"].to_string(), "1.50");
        }
    }

    #[test]
    fn scalars_and_whitespace() {
        for text in ["null", "true", "false", "0", "\"\"", " \t\n\r1\r\n\t ", "[]", "{}", "[ ]", "{ \n}"] {
            ok(text);
        }
        for text in ["", " ", "nul", "nulll", "True", "tru", "falsey", "undefined", "NaN", "Infinity", "1 2", "[] []"] {
            syntax(text.as_bytes());
        }
        // Only the four JSON whitespace bytes, and no byte order mark.
        for text in ["\u{c}1", "1\u{b}", "\u{a0}1", "\u{feff}1", "1\0"] {
            syntax(text.as_bytes());
        }
    }

    #[test]
    fn numbers() {
        for text in
            ["0", "-0", "1", "-12", "10", "0.5", "-0.0", "12.50", "1e3", "1E3", "1e+3", "1e-3", "1.5E-07", "0e0"]
        {
            ok(text);
        }
        ok("123456789012345678901234567890.123456789012345678901234567890e999999");
        for text in
            ["01", "-01", "00", "+1", "-", ".5", "1.", "1.e3", "1e", "1e+", "1E-", "0x10", "1_0", "- 1", "--1", "1.5.5"]
        {
            syntax(text.as_bytes());
        }
    }

    #[test]
    fn strings_and_escapes() {
        for text in [
            r#""plain""#,
            r#""\" \\ \/ \b \f \n \r \t""#,
            r#""\u0000 \u001f \u00e9 \uFFFF \uabcd""#,
            r#""\ud83d\ude00""#,
            r#""\uD83D\uDE00""#,
            "\"é ✓ 😀 \u{7f}\"",
        ] {
            ok(text);
        }
        for text in
            [r#""unterminated"#, r#""\x""#, r#""\u12""#, r#""\u12G4""#, r#""\U0041""#, r#""\'""#, r#""\"#, r#""\u"#]
        {
            syntax(text.as_bytes());
        }
        // Raw control characters are not allowed in strings; DEL is.
        for control in 0u8..0x20 {
            syntax(&[b'"', control, b'"']);
        }
        ok("\"\u{7f}\"");
    }

    #[test]
    fn surrogates_must_pair() {
        for text in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\udfff\ud800""#,
            r#""\ud800x""#,
            r#""\ud800\n""#,
            r#""\ud800\u0041""#,
            r#""\ud800\ud800""#,
            r#""\ud800\u""#,
            r#""\ud800\udc0""#,
        ] {
            syntax(text.as_bytes());
        }
        ok(r#""\ud800\udc00 \udbff\udfff""#);
    }

    #[test]
    fn utf8_must_be_valid() {
        for bytes in [
            &b"\"\xff\""[..],
            b"\"\x80\"",
            b"\"\xc3\"",
            b"\"\xc0\xaf\"",         // overlong '/'
            b"\"\xe0\x80\xaf\"",     // overlong
            b"\"\xed\xa0\x80\"",     // encoded surrogate U+D800
            b"\"\xf4\x90\x80\x80\"", // above U+10FFFF
            b"\"\xf5\x80\x80\x80\"",
            b"\"\xe2\x9c\"",   // truncated ✓
            b"\xef\xbb\xbf{}", // byte order mark
            b"[\xc3\xa9]",     // non-ASCII outside a string
        ] {
            syntax(bytes);
        }
        ok("\"\u{80}\u{7ff}\u{800}\u{d7ff}\u{e000}\u{ffff}\u{10000}\u{10ffff}\"");
    }

    #[test]
    fn structure() {
        for text in ["[1,2]", r#"{"a":1,"b":[{}]}"#, r#"{ "a" : [ 1 , { "b" : null } ] }"#] {
            ok(text);
        }
        for text in [
            "[1,]",
            "[,1]",
            "[1 2]",
            "[",
            "]",
            "{",
            r#"{"a"}"#,
            r#"{"a":}"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"a":1,}"#,
            r#"{,"a":1}"#,
            r#"{1:1}"#,
            "[}",
            "{]",
            r#"{"a":1]"#,
            "[1}",
        ] {
            syntax(text.as_bytes());
        }
    }

    #[test]
    fn depth_limit() {
        let nested = |open: &str, close: &str, n: usize| open.repeat(n) + &close.repeat(n);
        ok(&nested("[", "]", 64));
        assert_eq!(check(&nested("[", "]", 65)), Err(JsonError::Depth));
        ok(&nested(r#"{"a":"#, "}", 63).replacen("}", "[]}", 1));
        ok(&nested(r#"{"a":"#, "}", 64).replacen("}", "1}", 1));
        assert_eq!(check(&nested(r#"{"a":"#, "}", 65).replacen("}", "1}", 1)), Err(JsonError::Depth));
        // Depth counts containers only: scalars inside the 64th level are fine.
        ok(&(("[".repeat(64)) + "1,\"x\",null" + &"]".repeat(64)));
        // Deep but unbalanced is still a depth error when the limit is reached first.
        assert_eq!(check(&"[".repeat(100_000)), Err(JsonError::Depth));
    }

    #[test]
    fn duplicate_keys() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"é":1,"\u00e9":2}"#,
            r#"{"😀":1,"\ud83d\ude00":2}"#,
            r#"{"\n":1,"\u000a":2}"#,
            r#"{"/":1,"\/":2}"#,
            r#"{"":1,"":2}"#,
            r#"{"x":{"a":1,"b":2,"a":3}}"#,
            r#"[{"a":1},{"b":1,"b":1}]"#,
        ] {
            assert_eq!(check(text), Err(JsonError::Duplicate), "{text}");
        }
        // The same key in different objects, and keys that differ only after escaping, are fine.
        for text in [r#"{"a":{"a":1},"b":{"a":2}}"#, r#"{"a":1,"A":2,"a ":3,"\u0062":4}"#, r#"[{"a":1},{"a":1}]"#] {
            ok(text);
        }
        let many: Vec<String> = (0..1000).map(|i| format!("\"k{i}\":{i}")).collect();
        ok(&format!("{{{}}}", many.join(",")));
        let with_dup = format!("{{{},\"k17\":0}}", many.join(","));
        assert_eq!(check(&with_dup), Err(JsonError::Duplicate));
    }

    #[test]
    fn size_limit() {
        let limit = MAX_INPUT;
        let mut text = vec![b' '; limit];
        text[0] = b'1';
        assert_eq!(validate(&text), Ok(()));
        text.push(b' ');
        assert_eq!(validate(&text), Err(JsonError::TooLarge));
        // Oversize wins over every other error.
        assert_eq!(validate(&vec![b'['; limit + 1]), Err(JsonError::TooLarge));
    }

    /// Valid JSON texts with the awkward parts of the grammar: escapes, surrogate pairs, non-ASCII, exponents.
    fn json_text() -> impl Strategy<Value = String> {
        let string = prop::collection::vec(
            prop_oneof![
                "[a-zA-Z0-9 ]{0,4}",
                Just("\\\"".to_string()),
                Just("\\\\".to_string()),
                Just("\\/".to_string()),
                Just("\\b\\f\\n\\r\\t".to_string()),
                "\\\\u00[0-1][0-9a-fA-F]",
                "\\\\u[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}",
                "\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}",
                "[é✓😀\u{7f}\u{80}\u{10ffff}]",
            ],
            0..4,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()));
        let number = "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,25})?([eE][+-]?[0-9]{1,6})?";
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            number.prop_map(|s| s.to_string()),
            string.clone(),
        ];
        let ws = "[ \t\n\r]{0,2}";
        leaf.prop_recursive(6, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec((ws, inner.clone(), ws), 0..6).prop_map(|items| {
                    let items: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                    format!("[{}]", items.join(","))
                }),
                prop::collection::btree_map("[a-z]{0,3}", inner, 0..6).prop_map(|entries| {
                    let items: Vec<String> = entries.into_iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect();
                    format!("{{{}}}", items.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// `parse` builds the tree serde_json would (on keys that are not serde_json's private magic key): same
        /// strings, same numbers kept as written, same member order.
        #[test]
        fn parse_builds_what_serde_json_builds(text in json_text()) {
            let ours = parse(text.as_bytes());
            let theirs = serde_json::from_str::<serde_json::Value>(&text);
            prop_assert!(theirs.is_ok(), "{}", text);
            prop_assert_eq!(ours, Ok(theirs.unwrap()));
        }

        #[test]
        fn validate_accepts_nothing_serde_json_rejects(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            if validate(&bytes).is_ok() {
                prop_assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok());
            }
        }

        #[test]
        fn validate_accepts_nothing_serde_json_rejects_near_json(
            text in json_text(), at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>(),
        ) {
            let mut bytes = text.into_bytes();
            let at = at.index(bytes.len().max(1)).min(bytes.len());
            if cut { bytes.truncate(at) } else if at < bytes.len() { bytes[at] = byte }
            if validate(&bytes).is_ok() {
                prop_assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(), "{:?}", bytes);
            }
        }
    }
}
