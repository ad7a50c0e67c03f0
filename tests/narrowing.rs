//! The narrowing check on fixtures: every `tests/narrowing/widen/*.remit` must fail `remit check` with
//! `remit::widens-parent` (its first line, `// widens: …`, is part of the expected message), with two labels
//! and a witness request that the reference interpreter confirms (the sub-mandate standing alone allows it,
//! the parent refuses it); a fixture whose second line is `// witness: none` (delegation depth) has none.
//! Every `tests/narrowing/narrow/*.remit` must check without any diagnostic. Adding a test means adding a
//! file. A few fixtures are also snapshotted (source and rendered report) like `tests/ui.rs` does.
//! `remit diff` is tested on `tests/narrowing/diff/{old,new}` (every status, confirmed witnesses, exit 1) and on
//! each example against a copy with renamed files and every declaration and clause in reverse order (unchanged,
//! exit 0).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use remit_lang::check::narrowing::for_parent;
use remit_lang::check::{check_with, Options};
use remit_lang::eval::{decide, Outcome};
use remit_lang::ir::Program;
use remit_lang::syntax::ast::Decl;
use remit_lang::syntax::parse_file;
use serde_json::Value;
use support::examples::{self, EXAMPLES};

fn fixtures(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/narrowing").join(folder);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "remit"))
        .collect();
    out.sort();
    out
}

fn remit(args: &[&str], path: &Path) -> std::process::Output {
    // `remit check` on 2026-11-01T00:00:00Z (`SOURCE_DATE_EPOCH`): no `remit::mandate-expiring` depends on the date.
    let mut command = Command::new(env!("CARGO_BIN_EXE_remit"));
    command.args(args).arg(path).env("NO_COLOR", "1").env("SOURCE_DATE_EPOCH", "1793491200");
    command.output().expect("run remit")
}

/// The fixture as a program, without the narrowing check (which is what fails).
fn program(path: &Path) -> Program {
    let mut sources = remit_lang::stdlib::sources();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    sources.add(name, std::fs::read_to_string(path).unwrap());
    let checked = check_with(sources, Options { narrowing: false });
    checked.program.unwrap_or_else(|| panic!("{} does not check: {:#?}", path.display(), checked.diagnostics))
}

/// Confirms a witness independently of the checker: the sub-mandate without its parent allows it; the parent,
/// asked for the same call by the same agent, does not.
fn confirm(program: &Program, witness: &Value) -> Result<(), String> {
    let child_name = witness.pointer("/context/mandate").and_then(Value::as_str).ok_or("no context.mandate")?;
    let child = program.mandate(child_name).ok_or("unknown mandate")?;
    let parent = program.mandates[child].parent.ok_or("not a sub-mandate")?;
    let mut standalone = program.clone();
    standalone.mandates[child].parent = None;
    let alone = decide(&standalone, witness.to_string().as_bytes());
    if alone.outcome != Outcome::Allow {
        return Err(format!("the sub-mandate alone does not allow it: {}", alone.to_json()));
    }
    let mut as_parent = program.clone();
    let subject = witness.pointer("/subject/id").and_then(Value::as_str).unwrap_or_default().to_string();
    as_parent.mandates[parent].holders.push(subject);
    let request = for_parent(witness, child_name, &program.mandates[parent].name);
    let refused = decide(&as_parent, request.to_string().as_bytes());
    if refused.outcome == Outcome::Allow {
        return Err(format!("the parent allows it too: {}", refused.to_json()));
    }
    Ok(())
}

/// A `widen/template_*` fixture: every widening the parametric proof finds names an instance within the bounds
/// (the instance is built from the template with those values) on which the witness confirms independently: the
/// instance standing alone allows it, its parent refuses it.
fn confirm_template_findings(program: &Program, path: &Path) {
    use remit_lang::check::narrowing::parametric::{analyse, instance, TemplateKind};
    let findings = analyse(program);
    assert!(!findings.is_empty(), "{}: the proof finds nothing", path.display());
    for f in findings {
        let TemplateKind::Widens { widening, params } = f.kind else {
            panic!("{}: not a confirmed widening: {:?}", path.display(), f.kind)
        };
        // The instance names someone: an id `for` / `holder` lists when they list one, else a member of a prefix,
        // never the bare prefix (`user:` is a namespace, not a principal).
        let t = &program.templates[f.template];
        for (name, ids, prefixes) in
            [("principal", &t.principals, &t.principal_prefixes), ("holder", &t.holders, &t.holder_prefixes)]
        {
            let Some(value) = params.get(name).and_then(Value::as_str) else { continue };
            if !ids.is_empty() {
                assert!(ids.iter().any(|id| id == value), "{}: `{name}` = {value:?}, not an id listed", path.display());
            }
            assert!(!prefixes.iter().any(|p| p == value), "{}: `{name}` = {value:?} is a bare prefix", path.display());
        }
        let (concrete, _) = instance(program, f.template, &params)
            .unwrap_or_else(|e| panic!("{}: the witness's instance is refused ({e}): {params:?}", path.display()));
        if let Err(e) = confirm(&concrete, &widening.witness) {
            panic!(
                "{}: witness does not confirm on its instance {params:?}: {e}\n{}",
                path.display(),
                widening.witness
            );
        }
    }
}

#[test]
fn widen_fixtures_fail_with_a_confirmed_witness() {
    let fixtures = fixtures("widen");
    assert!(fixtures.len() >= 15, "expected at least 15 widen fixtures, found {}", fixtures.len());
    for path in fixtures {
        let source = std::fs::read_to_string(&path).unwrap();
        let mut lines = source.lines();
        let expected = lines
            .next()
            .and_then(|l| l.strip_prefix("// widens: "))
            .unwrap_or_else(|| panic!("{} must start with `// widens: MESSAGE`", path.display()));
        let without_witness = lines.next() == Some("// witness: none");
        let out = remit(&["check", "--format", "json"], &path);
        assert_eq!(out.status.code(), Some(1), "{}: `remit check` must fail", path.display());
        let diagnostics: Vec<Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let program = program(&path);
        let template = path.file_name().unwrap().to_string_lossy().starts_with("template_");
        if template {
            confirm_template_findings(&program, &path);
        }
        let mut found = false;
        for d in &diagnostics {
            if template {
                assert_eq!(d["code"], "remit::template-widens", "{}: unexpected diagnostic {d}", path.display());
                assert_eq!(d["labels"].as_array().unwrap().len(), 2, "{}: two labels: {d}", path.display());
                assert!(d.get("witness").is_some(), "{}: a witness: {d}", path.display());
                found |= d["message"].as_str().unwrap().contains(expected);
                continue;
            }
            assert_eq!(d["code"], "remit::widens-parent", "{}: unexpected diagnostic {d}", path.display());
            let labels = d["labels"].as_array().unwrap();
            assert_eq!(labels.len(), 2, "{}: two labels (the sub-mandate's clause, the parent's): {d}", path.display());
            // Every witness shown must confirm, not only the expected one.
            match d.get("witness") {
                Some(witness) => {
                    if let Err(e) = confirm(&program, witness) {
                        panic!("{}: witness does not confirm: {e}\n{witness}", path.display());
                    }
                }
                None => assert!(
                    d["message"].as_str().unwrap().contains("delegation"),
                    "{}: only delegation depth comes without a witness: {d}",
                    path.display()
                ),
            }
            if d["message"].as_str().unwrap().contains(expected) {
                found = true;
                assert_eq!(d.get("witness").is_none(), without_witness, "{}: witness presence: {d}", path.display());
            }
        }
        assert!(found, "{}: no diagnostic says `{expected}`:\n{diagnostics:#?}", path.display());
    }
}

#[test]
fn narrow_fixtures_pass() {
    let fixtures = fixtures("narrow");
    assert!(fixtures.len() >= 15, "expected at least 15 narrow fixtures, found {}", fixtures.len());
    for path in fixtures {
        let source = std::fs::read_to_string(&path).unwrap();
        assert!(source.starts_with("// narrows: "), "{} must start with `// narrows: WHY`", path.display());
        let out = remit(&["check", "--format", "json"], &path);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.trim().is_empty(),
            "{}: expected no diagnostic, got:\n{stdout}",
            path.display()
        );
    }
}

#[test]
fn rendered_reports() {
    for name in [
        "dropped_prohibition",
        "dropped_gate",
        "argument_range",
        "bare_child_grant",
        "window_end",
        "delegation_depth",
        "unsafe_path_equality",
        "equality_detour",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/narrowing/widen/{name}.remit"));
        let source = std::fs::read_to_string(&path).unwrap();
        let out = remit(&["check", "--format", "human"], &path);
        let rendered = String::from_utf8_lossy(&out.stderr).into_owned();
        insta::with_settings!({ snapshot_path => "narrowing/snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(name, format!("{source}\n----- remit check -----\n{rendered}"));
        });
    }
}

/// Every `.remit` file under `dir` (and the standard library) as one program, without the narrowing check.
fn program_of_folder(dir: &Path) -> Program {
    fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                collect(&path, out);
            } else if path.extension().is_some_and(|e| e == "remit") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    collect(dir, &mut files);
    files.sort();
    let mut sources = remit_lang::stdlib::sources();
    for file in files {
        sources.add(file.strip_prefix(dir).unwrap().to_string_lossy(), std::fs::read_to_string(&file).unwrap());
    }
    let checked = check_with(sources, Options { narrowing: false });
    checked.program.unwrap_or_else(|| panic!("{} does not check: {:#?}", dir.display(), checked.diagnostics))
}

fn diff(old: &Path, new: &Path, format: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["diff", "--format", format])
        .arg(old)
        .arg(new)
        .output()
        .expect("run remit diff")
}

#[test]
fn diff_reports_every_status_with_confirmed_witnesses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/narrowing/diff");
    let (old_dir, new_dir) = (root.join("old"), root.join("new"));
    let out = diff(&old_dir, &new_dir, "json");
    assert_eq!(out.status.code(), Some(1), "authority widened: exit 1\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    let (old, new) = (program_of_folder(&old_dir), program_of_folder(&new_dir));
    let expected = [
        ("fresh", "added"),
        ("gone", "removed"),
        ("heir", "narrowed"),
        ("mixed", "both"),
        ("narrower", "narrowed"),
        ("same", "unchanged"),
        ("wider", "widened"),
    ];
    let mandates = report["mandates"].as_array().unwrap();
    assert_eq!(mandates.len(), expected.len(), "{report:#}");
    for (entry, (name, status)) in mandates.iter().zip(expected) {
        assert_eq!((entry["mandate"].as_str().unwrap(), entry["status"].as_str().unwrap()), (name, status));
        // Each direction's witnesses (one per clause) are decided by the interpreter in both versions.
        for (direction, allows, refuses) in [("widened", &new, &old), ("narrowed", &old, &new)] {
            let examples = entry[direction].as_array().unwrap();
            let expected_here = match status {
                "both" => true,
                "added" | "widened" => direction == "widened",
                "removed" | "narrowed" => direction == "narrowed",
                _ => false,
            };
            assert_eq!(!examples.is_empty(), expected_here, "{name}: {direction}: {entry:#}");
            for example in examples {
                let bytes = example["witness"].to_string();
                assert_eq!(decide(allows, bytes.as_bytes()).outcome, Outcome::Allow, "{name} {direction}: {bytes}");
                assert_ne!(decide(refuses, bytes.as_bytes()).outcome, Outcome::Allow, "{name} {direction}: {bytes}");
            }
        }
    }
    assert_eq!(report["widened"], true);
    // The other formats say the same, and a version compared with itself is unchanged.
    let human = String::from_utf8_lossy(&diff(&old_dir, &new_dir, "human").stdout).into_owned();
    assert!(human.contains("widened    wider") && human.contains("both       mixed"), "{human}");
    let github = String::from_utf8_lossy(&diff(&old_dir, &new_dir, "github").stdout).into_owned();
    assert!(
        github.lines().any(|l| l.starts_with("::error file=mandates/all.remit") && l.contains("`wider` widened")),
        "{github}"
    );
    assert!(github.lines().any(|l| l.starts_with("::notice") && l.contains("`narrower` narrowed")), "{github}");
    assert_eq!(diff(&old_dir, &old_dir, "human").status.code(), Some(0));
}

/// The file with every declaration, and every clause of each mandate, in reverse order; imports dropped (the
/// copy is loaded as a folder).
fn reversed(text: &str) -> String {
    let file = parse_file(0, text).expect("example parses");
    let mut out = String::new();
    for index in (0..file.decls.len()).rev() {
        let span = file.spans[index];
        match &file.decls[index] {
            Decl::Import(_) => {}
            Decl::Mandate(m) if !m.clauses.is_empty() => {
                out.push_str(&text[span.start as usize..m.clauses[0].span.start as usize]);
                for clause in m.clauses.iter().rev() {
                    out.push_str("\n  ");
                    out.push_str(&text[clause.span.start as usize..clause.span.end as usize]);
                }
                out.push_str("\n}\n\n");
            }
            _ => {
                out.push_str(&text[span.start as usize..span.end as usize]);
                out.push_str("\n\n");
            }
        }
    }
    out
}

#[test]
fn diff_of_a_reordered_renamed_copy_is_unchanged() {
    for name in EXAMPLES {
        let dir = examples::dir(name);
        let copy = std::env::temp_dir().join(format!("remit-diff-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(copy.join("renamed")).unwrap();
        for (i, (_, text)) in examples::remit_files(&dir).iter().rev().enumerate() {
            std::fs::write(copy.join("renamed").join(format!("part-{i}.remit")), reversed(text)).unwrap();
        }
        let out = diff(&dir, &copy, "json");
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(0), "{name}: {report:#}");
        for entry in report["mandates"].as_array().unwrap() {
            assert_eq!(entry["status"], "unchanged", "{name}: {entry:#}");
        }
        let _ = std::fs::remove_dir_all(&copy);
    }
}

/// A witness can be replayed on the very policy that fails the proof: `remit eval` refuses that policy, and
/// `remit eval --no-narrowing` evaluates it — through the real chain, which refuses the witness (the run-time
/// defence docs/narrowing.md describes).
#[test]
fn witnesses_replay_with_no_narrowing() {
    let dir = std::env::temp_dir().join(format!("remit-witness-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut replayed = 0;
    for path in fixtures("widen") {
        let out = remit(&["check", "--format", "json"], &path);
        let first_witness = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?.get("witness").cloned())
            .next();
        let Some(witness) = first_witness else { continue };
        let request = dir.join("witness.json");
        std::fs::write(&request, witness.to_string()).unwrap();
        let eval = |extra: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_remit"))
                .arg("eval")
                .args(extra)
                .arg(&path)
                .arg("--request")
                .arg(&request)
                .env("NO_COLOR", "1")
                .output()
                .expect("run remit")
        };
        let refused = eval(&[]);
        assert_eq!(refused.status.code(), Some(1), "{}: `remit eval` refuses a widening policy", path.display());
        let replay = eval(&["--no-narrowing"]);
        assert_eq!(replay.status.code(), Some(0), "{}: {}", path.display(), String::from_utf8_lossy(&replay.stderr));
        let decision: Value = serde_json::from_slice(&replay.stdout).expect("a decision");
        assert_ne!(decision["decision"], "allow", "{}: the chain must refuse its witness: {decision}", path.display());
        replayed += 1;
    }
    assert!(replayed >= 10, "only {replayed} witnesses replayed");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Templates are not compared yet (their proof is issue 31's next step): `remit diff` says so, naming each template
/// added, removed or kept, rather than pass over them; the mandates' report is what it would be without them.
#[test]
fn diff_reports_added_and_removed_templates() {
    let new_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/semantics/templates");
    let policy = std::fs::read_to_string(new_dir.join("policy.remit")).unwrap();
    let old_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diff-templates-old");
    let _ = std::fs::remove_dir_all(&old_dir);
    std::fs::create_dir_all(&old_dir).unwrap();
    let without = &policy[..policy.find("\ntemplate ").expect("the policy has templates")];
    std::fs::write(old_dir.join("policy.remit"), without).unwrap();

    let out = diff(&old_dir, &new_dir, "json");
    // An added template is new authority: a review.
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    let statuses = |report: &Value, key: &str, name: &str| -> Vec<(String, String)> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m[name].as_str().unwrap().to_string(), m["status"].as_str().unwrap().to_string()))
            .collect()
    };
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    assert_eq!(statuses(&report, "mandates", "mandate"), pairs(&[("tp_ceiling", "unchanged")]));
    assert_eq!(statuses(&report, "templates", "template"), pairs(&[("tp_errands", "added"), ("tp_shopping", "added")]));
    let back = diff(&new_dir, &old_dir, "json");
    assert_eq!(back.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&back.stdout).expect("one JSON report");
    assert_eq!(
        statuses(&report, "templates", "template"),
        pairs(&[("tp_errands", "removed"), ("tp_shopping", "removed")])
    );
    // The same policy: every template unchanged.
    let same = diff(&new_dir, &new_dir, "json");
    assert_eq!(same.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&same.stdout).expect("one JSON report");
    assert_eq!(
        statuses(&report, "templates", "template"),
        pairs(&[("tp_errands", "unchanged"), ("tp_shopping", "unchanged")])
    );
}

/// `tests/narrowing/diff_templates/{old,new}`: clauses changed, a bound widened (an instance the new version admits
/// and the old refuses, confirmed here), a rule narrowed (a request an instance of both allowed before and not now,
/// confirmed here on both concrete instances), a parameter added (not compared), added and removed templates, and a
/// template under a template whose rule widened.
#[test]
fn diff_compares_templates() {
    use remit_lang::check::narrowing::parametric::instance;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/narrowing/diff_templates");
    let (old, new) = (root.join("old"), root.join("new"));
    let out = diff(&old, &new, "human");
    assert_eq!(out.status.code(), Some(1));
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    insta::with_settings!({ snapshot_path => "narrowing/snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("diff_templates", human);
    });
    let out = diff(&old, &new, "json");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    let (old_program, new_program) = (program_of_folder(&old), program_of_folder(&new));
    let shopping = report["templates"].as_array().unwrap().iter().find(|t| t["template"] == "shopping").unwrap();
    assert_eq!(shopping["status"], "both");
    let id = |p: &Program| p.templates.iter().position(|t| t.name == "shopping").unwrap();
    let widened = &shopping["instances_widened"][0]["params"];
    let params = widened.as_object().unwrap();
    assert!(instance(&new_program, id(&new_program), params).is_ok(), "{widened}");
    assert!(instance(&old_program, id(&old_program), params).is_err(), "{widened}");
    let narrowed = &shopping["narrowed"][0];
    let params = narrowed["params"].as_object().unwrap();
    let alone = |p: &Program| {
        let (mut concrete, child) = instance(p, id(p), params).expect("admitted by both");
        concrete.mandates[child].parent = None;
        decide(&concrete, narrowed["witness"].to_string().as_bytes()).outcome
    };
    assert_eq!(alone(&old_program), Outcome::Allow);
    assert_ne!(alone(&new_program), Outcome::Allow);
    // A template under a template: its rule widened on a chain of instances both versions admit (its values and
    // its parent instance's, `parent.cap`), confirmed here on both concrete chains.
    let errand = report["templates"].as_array().unwrap().iter().find(|t| t["template"] == "errand").unwrap();
    assert_eq!(errand["status"], "widened", "{errand}");
    let widened = &errand["widened"][0];
    let params = widened["params"].as_object().unwrap();
    assert!(params.contains_key("parent.cap"), "{widened}");
    let id = |p: &Program| p.templates.iter().position(|t| t.name == "errand").unwrap();
    let alone = |p: &Program| {
        let (mut concrete, child) = instance(p, id(p), params).expect("admitted by both");
        concrete.mandates[child].parent = None;
        decide(&concrete, widened["witness"].to_string().as_bytes()).outcome
    };
    assert_ne!(alone(&old_program), Outcome::Allow);
    assert_eq!(alone(&new_program), Outcome::Allow);
}
