//! Nesting is bounded (issue 7, item 2): parentheses, `not`s and `set<…>` deeper than
//! `remit_lang::syntax::MAX_NESTING` get `remit::nesting-too-deep` and exit 1 from `check`, `build` and `eval`, never a
//! stack overflow; at the maximum every phase (parser, checker, narrowing, interpreter, codegen) still works on a
//! thread with the default stack size.

use std::path::{Path, PathBuf};
use std::process::Command;

use remit_lang::syntax::MAX_NESTING;

fn policy(condition: &str) -> String {
    format!(
        "tool t(a: string)\nmandate m for \"org:x\" {{\n  holder \"agent:b\"\n  purpose \"p\"\n  allow t\n  \
         forbid t where {condition}\n}}\nmandate n under m {{\n  holder \"agent:c\"\n  purpose \"q\"\n  \
         allow t\n  forbid t where {condition}\n}}\n"
    )
}

fn parens(n: usize) -> String {
    format!("{}args.a == \"x\"{}", "(".repeat(n), ")".repeat(n))
}

/// At the maximum, with `not in` (an operator, not a level) innermost.
fn parens_not_in(n: usize) -> String {
    format!("{}args.a not in [\"y\", \"inner\"]{}", "(".repeat(n), ")".repeat(n))
}

fn nots(n: usize) -> String {
    format!("{}args.a == \"x\"", "not ".repeat(n))
}

fn not_parens(n: usize) -> String {
    format!("{}args.a == \"x\"{}", "not (".repeat(n), ")".repeat(n))
}

/// At every level an `or` and an `and`, so the checker, `sat` and codegen see real structure at each depth.
fn mixed(n: usize) -> String {
    let mut c = "args.a == \"x\"".to_string();
    for i in 0..n {
        c = format!("(args.a == \"v{i}\" or (args.a != \"w{i}\" and {c}))");
    }
    c
}

const REQUEST: &str = r#"{"subject":{"id":"agent:b"},"action":{"name":"t","arguments":{"a":"x"}},"resource":{"id":"r"},"context":{"mandate":"m","now":"2026-12-03T15:30:00Z"}}"#;

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remit-nesting-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn remit(args: &[&str], paths: &[&Path]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_remit")).args(args).args(paths).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The band that overflowed the stack (3,000–100,000 levels) and the first level past the maximum: `check`,
/// `build` and `eval` each exit 1 with the diagnostic (a crash is a signal: no exit code, and the test fails).
#[test]
fn too_deep_is_a_diagnostic_in_check_build_and_eval() {
    let request = scratch("request.json", REQUEST);
    let wasm = std::env::temp_dir().join(format!("remit-nesting-{}/out.wasm", std::process::id()));
    for n in [MAX_NESTING + 1, 3_000, 5_000, 10_000, 30_000, 100_000] {
        for (shape, condition) in [("parens", parens(n)), ("nots", nots(n)), ("not-parens", not_parens(n / 2 + 1))] {
            let path = scratch(&format!("{shape}-{n}.remit"), &policy(&condition));
            for args in [
                &["check"][..],
                &["build", "-o", wasm.to_str().unwrap()][..],
                &["eval", "--request", request.to_str().unwrap()][..],
            ] {
                let (code, stderr) = remit(args, &[&path]);
                assert_eq!(code, Some(1), "{shape} {n} `remit {}`: {}", args[0], &stderr[..stderr.len().min(2000)]);
                assert!(
                    stderr.contains("remit::nesting-too-deep"),
                    "{shape} {n}: {}",
                    &stderr[..stderr.len().min(2000)]
                );
            }
        }
    }
    let types = format!("tool t(a: {}string{})\n", "set<".repeat(10_000), ">".repeat(10_000));
    let (code, stderr) = remit(&["check"], &[&scratch("sets.remit", &types)]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("remit::nesting-too-deep"), "{stderr}");
}

/// At the maximum, every phase runs on a thread with the default stack size (2 MiB, the smallest a gateway or
/// test harness gives a thread), the interpreter and the module agree, and the `remit` binary says the same.
#[test]
fn the_maximum_depth_works_in_every_phase() {
    let shapes = [
        parens(MAX_NESTING),
        parens_not_in(MAX_NESTING),
        nots(MAX_NESTING),
        not_parens(MAX_NESTING / 2),
        mixed(MAX_NESTING / 2),
    ];
    for condition in shapes {
        let text = policy(&condition);
        let worker = std::thread::spawn({
            let text = text.clone();
            move || {
                let mut sources = remit_lang::stdlib::sources();
                sources.add("deep.remit", text);
                let checked = remit_lang::check::check(sources);
                let program = checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
                let decision = remit_lang::eval::decide(&program, REQUEST.as_bytes()).to_json();
                let wasm = remit_lang::wasm::compile(&program).unwrap();
                let runtime = remit_host::Runtime::new().unwrap();
                let module = std::sync::Arc::new(runtime.load(&wasm).unwrap());
                let from_module = module.evaluator().unwrap().decide(REQUEST.as_bytes());
                assert_eq!(decision.as_bytes(), &from_module[..]);
                decision
            }
        });
        let decision = worker.join().expect("no phase overflows a default-sized stack at the maximum depth");
        let path = scratch("max.remit", &text);
        let (code, stderr) = remit(&["check"], &[&path]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(decision.contains("\"decision\""));
    }
}
