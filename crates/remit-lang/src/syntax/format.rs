//! The canonical layout of a `.remit` file (`remit fmt`). The formatter works on tokens, not on the tree: it
//! keeps every token and every comment exactly as written, in the same order, and decides only the whitespace
//! between them — so it cannot change what a policy means, and it keeps comments where they were. What it
//! decides:
//!
//! - indentation: two spaces per `{` block; a clause or declaration continued on the next line is indented four
//!   more; the lines inside a `[`/`(` list two more than the line that opened it; a closing `]`/`)` that starts
//!   a line lines up with the line that opened it, a closing `}` with the first line of the statement that opened
//!   it (a header continued on the next lines closes its block where it began);
//! - spacing within a line: one space between tokens, none before `,` `:` `)` `]`, none after `(` `[`, none
//!   around the angle brackets of `set<…>`, none between a tool's or effect's name and its `(`;
//! - lines: the author's line breaks are kept (a clause per line stays a clause per line); runs of blank lines
//!   become one; no blank line just inside a block; no trailing whitespace; one newline at the end.
//!
//! [`format`] checks its own output: the output must hold the same tokens in the same order, and formatting it
//! again must change nothing. The caller (`remit fmt`) also re-parses and re-checks the output and compares the
//! checked programs before it writes anything.

/// Why a file was not formatted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The output would not hold the input's tokens; a bug in the formatter, never written.
    TokensChanged,
    /// Formatting the output again changed it; a bug in the formatter, never written.
    NotIdempotent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An identifier, keyword or attribute (`args.amount`).
    Word,
    /// Something that starts with a digit or a minus: a number, a timestamp, a duration.
    Number,
    String,
    Comment,
    Punct,
}

#[derive(Debug, Clone)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
    /// Line breaks in the whitespace before the token.
    breaks: usize,
}

/// Splits `text` into tokens (whitespace dropped, comments kept).
fn lex(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let (mut i, mut breaks) = (0, 0);
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            breaks += 1;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let kind = if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            Kind::Comment
        } else if c == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                i += if bytes[i] == b'\\' && i + 1 < bytes.len() && bytes[i + 1] != b'\n' { 2 } else { 1 };
            }
            if i < bytes.len() && bytes[i] == b'"' {
                i += 1;
            }
            Kind::String
        } else if c.is_ascii_digit() || (c == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || b"_.:-".contains(&bytes[i])) {
                i += 1;
            }
            Kind::Number
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || b"_.".contains(&bytes[i])) {
                i += 1;
            }
            Kind::Word
        } else {
            let two = text.get(i..i + 2).unwrap_or("");
            i += if ["==", "!=", "<=", ">="].contains(&two) {
                2
            } else {
                text[i..].chars().next().map_or(1, char::len_utf8)
            };
            Kind::Punct
        };
        let token_text = if kind == Kind::Comment { text[start..i].trim_end() } else { &text[start..i] };
        tokens.push(Token { kind, text: token_text, breaks });
        breaks = 0;
    }
    tokens
}

/// Words that begin a declaration or a clause when they begin a line; any other line continues the one before.
const STARTERS: &[&str] = &[
    // declarations
    "import",
    "effect",
    "levels",
    "kind",
    "enum",
    "context",
    "approval",
    "tool",
    "classify",
    "mandate",
    "template",
    "subject",
    "resource",
    "principal",
    "relation",
    "calendar",
    // mandate clauses
    "holder",
    "purpose",
    "valid",
    "max",
    "otherwise",
    "delegation",
    "allow",
    "forbid",
    "limit",
    "scope",
    "require",
    "budget",
    "fact",
    // template clauses (`for` also reads well continuing a gate, `require approval k\n for t`: it starts a line
    // only as a template's clause in the policies we know, and either way only whitespace changes)
    "for",
    "granted",
    // tool clauses
    "effects",
    "level",
    "side",
    "requires",
    "administers",
    "open",
    "target",
    // approval clauses
    "binds",
    "ttl",
    "single",
    "approved",
];

/// An open `{`, `(`, `[` or `set<`, and the indentation of the line that opened it.
#[derive(Debug, Clone, Copy)]
struct Open {
    token: u8,
    indent: usize,
    /// For `{`: whether the block lists items (`enum … { a, b }`) rather than clauses; for `(`: whether it is a
    /// template's parameter list.
    items: bool,
}

/// Formats one file. `text` should parse (the caller checks); a file that does not is still never corrupted,
/// because the output is checked to hold the same tokens.
pub fn format(text: &str) -> Result<String, FormatError> {
    let once = layout(text);
    if !same_tokens(text, &once) {
        return Err(FormatError::TokensChanged);
    }
    if layout(&once) != once {
        return Err(FormatError::NotIdempotent);
    }
    Ok(once)
}

/// One clause on one line, as decisions and listings name it: its tokens as written (comments dropped), spaced as
/// [`format`] spaces a line, a comma just before a closing bracket dropped. A clause's label is the same however
/// it was laid out or commented, so reformatting a policy never changes a decision's `rules`.
pub fn one_line(text: &str) -> String {
    let tokens: Vec<Token<'_>> = lex(text).into_iter().filter(|t| t.kind != Kind::Comment).collect();
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<&Token<'_>> = None;
    for (i, token) in tokens.iter().enumerate() {
        let closing_next = tokens.get(i + 1).is_some_and(|n| n.kind == Kind::Punct && matches!(n.text, ")" | "]"));
        if token.kind == Kind::Punct && token.text == "," && closing_next {
            continue;
        }
        if let Some(p) = prev {
            if space_between(p, token, &[], false, &[]) {
                out.push(' ');
            }
        }
        out.push_str(token.text);
        prev = Some(token);
    }
    out
}

fn same_tokens(a: &str, b: &str) -> bool {
    let (a, b) = (lex(a), lex(b));
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.kind == y.kind && x.text == y.text)
}

fn layout(text: &str) -> String {
    let tokens = lex(text);
    let mut out = String::with_capacity(text.len());
    let mut stack: Vec<Open> = Vec::new();
    // The indentation of the current statement's first line, and its first two words.
    let mut statement_indent = 0;
    let mut statement: Vec<&str> = Vec::new();
    let mut prev: Option<&Token<'_>> = None;
    for token in &tokens {
        let new_line = prev.is_none() || token.breaks > 0;
        let closes = matches!(token.text, "}" | ")" | "]") && token.kind == Kind::Punct;
        let closes_angle = token.text == ">" && stack.last().is_some_and(|o| o.token == b'<');
        if new_line {
            if prev.is_some() {
                let after_open = prev.is_some_and(|p| p.text == "{" && p.kind == Kind::Punct);
                let blank = token.breaks > 1 && !after_open && !(closes && token.text == "}");
                out.push('\n');
                if blank {
                    out.push('\n');
                }
            }
            let innermost = stack.last().copied();
            let brace_depth = stack.iter().filter(|o| o.token == b'{').count();
            let indent = if closes {
                innermost.map_or(0, |o| o.indent)
            } else {
                match innermost {
                    // A template's parameter continued on the next line (its bound, `cap > 0 USD\n and …`): four
                    // more, as a clause's continuation. A line after `,` or `(` starts a parameter.
                    Some(o)
                        if o.token == b'('
                            && o.items
                            && prev.is_some_and(|p| p.kind != Kind::Comment && !matches!(p.text, "," | "(")) =>
                    {
                        o.indent + 6
                    }
                    Some(o) if o.token != b'{' => o.indent + 2,
                    Some(o) if o.items => 2 * brace_depth,
                    _ => {
                        let starts = token.kind == Kind::Comment
                            || (token.kind == Kind::Word && STARTERS.contains(&token.text))
                            || statement.is_empty();
                        if starts && token.kind != Kind::Comment {
                            statement.clear();
                            statement_indent = 2 * brace_depth;
                        }
                        if starts {
                            2 * brace_depth
                        } else {
                            statement_indent + 4
                        }
                    }
                }
            };
            out.extend(std::iter::repeat_n(' ', indent));
        } else if let Some(p) = prev {
            if space_between(p, token, &statement, closes_angle, &stack) {
                out.push(' ');
            }
        }
        out.push_str(token.text);
        // Track brackets and statements.
        match (token.kind, token.text) {
            (Kind::Punct, "{") => {
                // Enum variants and the attributes of subjects, resources and principals are items, one per line.
                let items =
                    matches!(statement.first(), Some(&"enum" | &"subject" | &"resource" | &"principal" | &"calendar"));
                // The block lines up with its statement's first line, not with the line the `{` is on: a header
                // continued on the next lines (`template t(a: int,\n  b: int) under p {`, `\n    under p {`)
                // closes its block where it began, as its clauses are indented by the depth of blocks.
                let indent = if stack.last().is_none_or(|o| o.token == b'{') {
                    statement_indent
                } else {
                    current_line_indent(&out)
                };
                stack.push(Open { token: b'{', indent, items });
                statement.clear();
            }
            (Kind::Punct, "(" | "[") => {
                let indent = current_line_indent(&out);
                // A template's parameter list holds items (parameters), each of which may continue on the next lines.
                let items = token.text == "("
                    && statement.first() == Some(&"template")
                    && stack.last().is_none_or(|o| o.token == b'{');
                stack.push(Open { token: token.text.as_bytes()[0], indent, items });
            }
            (Kind::Punct, "<") if prev.is_some_and(|p| p.text == "set") => {
                let indent = current_line_indent(&out);
                stack.push(Open { token: b'<', indent, items: false });
            }
            (Kind::Punct, ">") if closes_angle => {
                stack.pop();
            }
            (Kind::Punct, "}" | ")" | "]") => {
                let was_brace = stack.pop().is_some_and(|o| o.token == b'{');
                if was_brace {
                    statement.clear();
                }
            }
            (Kind::Comment, _) => {}
            _ => {
                if stack.last().is_none_or(|o| o.token == b'{') && statement.len() < 2 {
                    statement.push(token.text);
                }
            }
        }
        prev = Some(token);
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

fn current_line_indent(out: &str) -> usize {
    let line = out.rsplit('\n').next().unwrap_or("");
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether one space separates `prev` and `token` on a line.
fn space_between(prev: &Token<'_>, token: &Token<'_>, statement: &[&str], closes_angle: bool, stack: &[Open]) -> bool {
    if token.kind == Kind::Comment {
        return true;
    }
    if token.kind == Kind::Punct && matches!(token.text, "," | ":" | ")" | "]") {
        return false;
    }
    if prev.kind == Kind::Punct && matches!(prev.text, "(" | "[") {
        return false;
    }
    if closes_angle {
        return false;
    }
    // `set<`: the angle bracket opens a type.
    if token.text == "<" && prev.text == "set" {
        return false;
    }
    if prev.text == "<" && stack.last().is_some_and(|o| o.token == b'<') {
        return false;
    }
    if token.text == "}" && prev.text == "{" {
        return false;
    }
    // `tool name(`, `tool "quoted/name"(`, `effect name(`, `relation name(` and a relation atom `member_of(`: the
    // parameters or terms follow the name. Only the connectives open a parenthesised condition after a space.
    if token.text == "(" && prev.kind == Kind::Word && !matches!(prev.text, "where" | "and" | "or" | "not") {
        return false;
    }
    if token.text == "(" && prev.kind == Kind::String && matches!(statement, ["tool", _] | ["effect", _]) {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacing_and_indentation() {
        let source = "mandate  m for \"u\"{\n\n holder \"a\" ,\"b\"\n   allow t where args.x in [ \"a\",\"b\" ]\n     and args.n<=5\n\n\n  forbid t // why\n\n}\n\n\n\ntool t( x : set < string > ,n:int ) {\nlevel draft\n}\n";
        let expected = "mandate m for \"u\" {\n  holder \"a\", \"b\"\n  allow t where args.x in [\"a\", \"b\"]\n      and args.n <= 5\n\n  forbid t // why\n}\n\ntool t(x: set<string>, n: int) {\n  level draft\n}\n";
        assert_eq!(format(source).unwrap(), expected);
    }

    #[test]
    fn lists_over_several_lines() {
        let source = "mandate m {\nforbid t where args.p not in [\n\"a\",\n    \"b\",\n        ]\n}\nenum e {\n  x,\n      y\n}\n";
        let expected =
            "mandate m {\n  forbid t where args.p not in [\n    \"a\",\n    \"b\",\n  ]\n}\nenum e {\n  x,\n  y\n}\n";
        assert_eq!(format(source).unwrap(), expected);
    }

    #[test]
    fn comments_stay_where_they_were() {
        let source = "// head   \n\n/// doc\ntool t() {\n   // inside\n  level draft   // trailing\n}\n// tail\n";
        let expected = "// head\n\n/// doc\ntool t() {\n  // inside\n  level draft // trailing\n}\n// tail\n";
        assert_eq!(format(source).unwrap(), expected);
    }

    #[test]
    fn money_and_timestamps_are_single_tokens() {
        let source = "mandate m {\n valid from 2026-11-01T00:00:00Z until 2027-01-01T00:00:00Z\n limit t: args.a <= 100   USD\n}\n";
        let out = format(source).unwrap();
        assert!(out.contains("valid from 2026-11-01T00:00:00Z until 2027-01-01T00:00:00Z\n"), "{out}");
        assert!(out.contains("limit t: args.a <= 100 USD\n"), "{out}");
    }

    #[test]
    fn principal_attributes_are_items() {
        let source = "principal customer {\naccounts: set<string>,\n      region : string\n}\n";
        let expected = "principal customer {\n  accounts: set<string>,\n  region: string\n}\n";
        assert_eq!(format(source).unwrap(), expected);
    }

    #[test]
    fn calendar_lines_are_items() {
        // `09:00-17:00` is one token; a dash written apart stays apart (the formatter changes no token).
        let source = "calendar c in \"Europe/Berlin\" {\n mon..fri 09:00-17:00, 18:00 - 19:00\n  sat,sun 10:00-12:00\n 2026-12-27..2027-01-03   10:00-14:00,15:00-16:00\nclosed  on holidays,2026-12-25, 2026-12-31..2027-01-01\n}\n";
        let expected = "calendar c in \"Europe/Berlin\" {\n  mon..fri 09:00-17:00, 18:00 - 19:00\n  sat, sun 10:00-12:00\n  2026-12-27..2027-01-03 10:00-14:00, 15:00-16:00\n  closed on holidays, 2026-12-25, 2026-12-31..2027-01-01\n}\n";
        assert_eq!(format(source).unwrap(), expected);
    }

    #[test]
    fn empty_file() {
        assert_eq!(format("").unwrap(), "");
        assert_eq!(format("\n\n  \n").unwrap(), "");
    }
}
