//! `remit fmt`: the canonical layout.
//!
//! - Fixtures: every `tests/format/NAME.input` formats to `tests/format/NAME.remit` (adding a test = adding two
//!   files), and the expected file is a fixed point.
//! - Every shipped `.remit` file (examples, stdlib, semantics and narrowing fixtures) is already formatted.
//! - Property: a shipped policy re-spaced at random (spaces, tabs, indentation) formats back to itself; one
//!   re-spaced with line breaks too, and with its declarations shuffled, formats to a fixed point that makes the
//!   same decision on every policy-test request of the example.
//! - The command: `--check` exits 1 and writes nothing; without it the file is rewritten; a file with a syntax
//!   error is refused and left as it was.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use remit_lang::eval::decide;
use remit_lang::syntax::ast::Decl;
use remit_lang::syntax::format::format;
use remit_lang::syntax::parse_file;
use support::examples::{compile, example, semantic, EXAMPLES};
use support::rng::Lcg as Rng;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn fixtures() {
    let dir = root().join("tests/format");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "input"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 3);
    for input in inputs {
        let expected = std::fs::read_to_string(input.with_extension("remit")).unwrap();
        let got = format(&std::fs::read_to_string(&input).unwrap()).unwrap();
        assert_eq!(got, expected, "{}", input.display());
        assert_eq!(format(&expected).unwrap(), expected, "{} is a fixed point", input.display());
        parse_file(0, &got).unwrap_or_else(|e| panic!("{}: output does not parse: {e:?}", input.display()));
    }
}

fn remit_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            remit_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "remit") {
            out.push(path);
        }
    }
}

#[test]
fn shipped_files_are_formatted() {
    let mut files = Vec::new();
    for dir in ["examples", "stdlib", "tests/semantics", "tests/narrowing", "tests/format"] {
        remit_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 50);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(format(&text).unwrap(), text, "`remit fmt {}` would change it", file.display());
    }
}

/// Replaces each run of blanks outside strings and comments with another one. With `breaks`, runs between
/// tokens may also become line breaks (never inside a money literal, whose grammar takes spaces only).
fn respace(text: &str, rng: &mut Rng, breaks: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let (mut i, mut in_string, mut in_comment) = (0, false, false);
    while i < chars.len() {
        let c = chars[i];
        if in_comment {
            in_comment = c != '\n';
        } else if in_string {
            if c == '\\' {
                out.push(c);
                i += 1;
                out.push(chars[i]);
                i += 1;
                continue;
            }
            in_string = c != '"';
        } else if c == '"' {
            in_string = true;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            in_comment = true;
        } else if c == ' ' || c == '\t' {
            let start = i;
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            let money =
                start > 0 && chars[start - 1].is_ascii_digit() && chars.get(i).is_some_and(|c| c.is_ascii_uppercase());
            let at_line_end = i == chars.len() || chars[i] == '\n';
            let choices: &[&str] = if money || !breaks || at_line_end || start == 0 || chars[start - 1] == '\n' {
                &[" ", "  ", "\t", "   \t "]
            } else {
                &[" ", "  ", "\t", "\n", "\n\n      ", " \n\t"]
            };
            out.push_str(choices[rng.below(choices.len())]);
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The file with its declarations in another order.
fn shuffle(text: &str, rng: &mut Rng) -> String {
    let file = parse_file(0, text).expect("example parses");
    let mut out = String::new();
    for index in rng.permutation(file.decls.len()) {
        let span = file.spans[index];
        if !matches!(file.decls[index], Decl::Import(_)) || rng.below(2) == 0 {
            out.push_str(&text[span.start as usize..span.end as usize]);
            out.push_str("\n\n");
        } else {
            // Imports stay (the loader needs them), in any position.
            out.push_str(&text[span.start as usize..span.end as usize]);
            out.push('\n');
        }
    }
    out
}

#[test]
fn respaced_policies_format_back_to_themselves() {
    let mut rng = Rng(7);
    for name in EXAMPLES {
        for (file, text) in &example(name).files {
            for _ in 0..20 {
                let respaced = respace(text, &mut rng, false);
                assert_eq!(format(&respaced).unwrap(), *text, "{name}/{file} re-spaced:\n{respaced}");
            }
        }
    }
}

#[test]
fn reshaped_policies_format_to_the_same_decisions() {
    let mut rng = Rng(11);
    for name in EXAMPLES {
        let example = example(name);
        let original = compile(&example.files);
        for round in 0..8 {
            let reshaped: Vec<(String, String)> = example
                .files
                .iter()
                .map(|(file, text)| {
                    let messy = respace(&shuffle(text, &mut rng), &mut rng, true);
                    let formatted = format(&messy).unwrap_or_else(|e| panic!("{name}/{file}: {e:?}\n{messy}"));
                    assert_eq!(format(&formatted).unwrap(), formatted, "{name}/{file}: not a fixed point");
                    (file.clone(), formatted)
                })
                .collect();
            let program = compile(&reshaped);
            for request in &example.requests {
                let bytes = request.to_string();
                assert_eq!(
                    semantic(&decide(&original, bytes.as_bytes())),
                    semantic(&decide(&program, bytes.as_bytes())),
                    "{name}, round {round}, request {bytes}"
                );
            }
        }
    }
}

fn remit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remit")).args(args).env("NO_COLOR", "1").output().expect("run remit")
}

#[test]
fn the_command_checks_writes_and_refuses() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fmt-command");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = std::fs::read_to_string(root().join("tests/format/spacing.input")).unwrap();
    let expected = std::fs::read_to_string(root().join("tests/format/spacing.remit")).unwrap();
    let file = dir.join("policy.remit");
    std::fs::write(&file, &input).unwrap();
    let path = file.to_str().unwrap();

    let check = remit(&["fmt", "--check", path]);
    assert_eq!(check.status.code(), Some(1), "{check:?}");
    assert!(String::from_utf8_lossy(&check.stdout).contains("not formatted"), "{check:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), input, "--check writes nothing");

    let write = remit(&["fmt", path]);
    assert_eq!(write.status.code(), Some(0), "{write:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
    assert_eq!(remit(&["fmt", "--check", path]).status.code(), Some(0));

    let broken = "mandate m for \"u\" {\n   alow t\n}\n";
    std::fs::write(&file, broken).unwrap();
    let refused = remit(&["fmt", path]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("remit::syntax"), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), broken, "a file that does not parse is left as it was");
}
