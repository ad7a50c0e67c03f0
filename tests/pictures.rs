//! Pictures of authority (`remit graph`, `remit diff --format html|svg`, `remit explain`).
//!
//! - Golden outputs: the Mermaid and DOT of every example, and the explanation (text) of every example request,
//!   are insta snapshots (`tests/pictures/snapshots`); adding an example or a request adds snapshots.
//! - Graphviz (`dot`) accepts every DOT output and draws every mandate.
//! - The README's Mermaid block is exactly what `remit graph examples/wallet` prints.
//! - In a real browser (Debian's chromium driven by Playwright, `tests/browser/pictures.py`): the SVG graph with
//!   a stop, the Mermaid rendered by the mermaid package, the diff page and SVG of `tests/narrowing/diff`, and the
//!   explanation page of an escalation — each checked for its labels and its colours, and screenshotted into
//!   the test's temporary folder. `scripts/test-deps.sh` installs the browser and packages.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn remit(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("run remit");
    assert!(
        out.status.code() == Some(0) || args[0] == "diff",
        "remit {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn snapshot(name: &str, content: &str) {
    insta::with_settings!({ snapshot_path => "pictures/snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, content);
    });
}

#[test]
fn graphs_of_the_examples() {
    for example in examples() {
        let path = format!("examples/{example}");
        snapshot(&format!("graph-{example}.mmd"), &remit(&["graph", &path, "--format", "mermaid"]));
        snapshot(&format!("graph-{example}.dot"), &remit(&["graph", &path, "--format", "dot"]));
    }
}

/// Templates are drawn under their parents (a mandate, or another template), with their parameters and grantors,
/// in their own class; a stop on the mandate above reaches them.
#[test]
fn graphs_draw_templates_under_their_parents() {
    let policy = "tests/semantics/templates/policy.remit";
    let mermaid = remit(&["graph", policy, "--format", "mermaid"]);
    snapshot("graph-templates.mmd", &mermaid);
    let id = |name: &str| {
        let line = mermaid.lines().find(|l| l.contains(&format!("<b>{name}</b>"))).unwrap_or_else(|| panic!("{name}"));
        line.trim().split('[').next().unwrap().to_string()
    };
    let (ceiling, shopping, errands) = (id("tp_ceiling"), id("tp_shopping"), id("tp_errands"));
    assert!(mermaid.contains(&format!("{ceiling} --> {shopping}\n")), "{mermaid}");
    assert!(mermaid.contains(&format!("{shopping} --> {errands}\n")), "{mermaid}");
    assert!(mermaid.contains(&format!("class {shopping} template\n")), "{mermaid}");
    assert!(mermaid.contains("parameter cap: money where cap #gt; 0 USD and cap #lt;= 500 USD"), "{mermaid}");
    assert!(mermaid.contains("granted by the principal, any id under ops:"), "{mermaid}");
    assert!(mermaid.contains("classDef template"), "{mermaid}");
    let stopped = remit(&["graph", policy, "--format", "svg", "--stop", "tp_ceiling"]);
    assert!(stopped.contains("STOPPED via tp_ceiling"), "a stop on the ceiling reaches its templates");
    let dot = remit(&["graph", policy, "--format", "dot"]);
    assert!(dot.contains("\"tp_shopping\" -> \"tp_errands\";"), "{dot}");
}

/// `remit graph --instances FILE` draws instances of templates under their templates, named as decisions name them
/// (`TEMPLATE/ID@VERSION`), with their parameters, holder, window and grantor; a revoked one and one outside its
/// template (the check every decision runs: the failing bound and the value) in classes of their own. The file is
/// `GET /v1/grants`'s answer, or a list as `context.grants` carries it (the same nodes).
#[test]
fn graphs_draw_instances_under_their_templates() {
    let policy = "tests/semantics/templates/policy.remit";
    let listed = "tests/pictures/instances.json";
    let mermaid = remit(&["graph", policy, "--instances", listed, "--format", "mermaid"]);
    snapshot("graph-instances.mmd", &mermaid);
    let id = |name: &str| {
        let line = mermaid.lines().find(|l| l.contains(&format!("<b>{name}</b>"))).unwrap_or_else(|| panic!("{name}"));
        line.trim().split('[').next().unwrap().to_string()
    };
    let shopping = id("tp_shopping");
    let (alice, bob, dan) = (
        id("tp_shopping/g-0000000000000001@2"),
        id("tp_shopping/g-0000000000000002@1"),
        id("tp_shopping/g-0000000000000003@1"),
    );
    for instance in [&alice, &bob, &dan] {
        assert!(mermaid.contains(&format!("{shopping} --> {instance}\n")), "{mermaid}");
    }
    assert!(mermaid.contains(&format!("class {alice} instance\n")), "{mermaid}");
    assert!(mermaid.contains(&format!("class {bob} revoked\n")), "{mermaid}");
    assert!(mermaid.contains(&format!("class {dan} invalid\n")), "{mermaid}");
    assert!(mermaid.contains("parameter cap = 40 USD<br/>"), "{mermaid}");
    assert!(mermaid.contains("granted by user:alice at 2026-12-04T15:30:00Z"), "{mermaid}");
    assert!(mermaid.contains("for user:alice · held by agent:shopper"), "{mermaid}");
    assert!(mermaid.contains("valid … → 2026-12-13T15:30:00Z"), "{mermaid}");
    assert!(mermaid.contains("REVOKED at 2026-12-05T15:30:00Z"), "{mermaid}");
    assert!(mermaid.contains("OUTSIDE its template: bound-failed: #96;params.cap#96;"), "{mermaid}");
    // Without the file the picture is the templates' own.
    assert_eq!(
        remit(&["graph", policy, "--format", "mermaid"]).matches("class ").count() + 3,
        mermaid.matches("class ").count()
    );
    // `context.grants`' shape (a list, `granted` as RFC 3339): the same nodes, the grantor unknown.
    let dir = std::env::temp_dir().join(format!("remit-pictures-instances-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let carried = json!([{"id": "g-0000000000000001", "version": 2, "template": "tp_shopping", "principal": "user:alice",
                          "holder": "agent:shopper", "granted": "2026-12-04T15:30:00Z",
                          "params": {"merchants": ["acme"], "cap": "40 USD", "until": "2026-12-13T15:30:00Z"}}]);
    let file = write(&dir, "grants.json", &carried.to_string());
    let request = write(&dir, "request.json", &json!({"context": {"grants": carried}}).to_string());
    for given in [&file, &request] {
        let drawn = remit(&["graph", policy, "--instances", given, "--format", "dot"]);
        assert!(drawn.contains("\"tp_shopping\" -> \"tp_shopping/g-0000000000000001@2\";"), "{drawn}");
        assert!(drawn.contains("granted at 2026-12-04T15:30:00Z"), "{drawn}");
    }
    let svg = remit(&["graph", policy, "--instances", listed, "--format", "svg"]);
    for class in ["instance", "revoked", "invalid"] {
        assert!(svg.contains(&format!("data-class=\"{class}\"")), "the legend names `{class}`");
    }
    // An instance of a template the policy does not have is refused, naming the file and the template.
    let unknown = write(
        &dir,
        "unknown.json",
        r#"[{"id": "g-1", "version": 1, "template": "nope", "principal": "user:a",
        "holder": "agent:a", "params": {}, "granted": "2026-12-04T15:30:00Z"}]"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_remit"))
        .args(["graph", policy, "--instances", &unknown])
        .current_dir(root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown.json") && err.contains("`nope`"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn graphviz_draws_every_mandate() {
    for example in examples() {
        let path = format!("examples/{example}");
        let dot = remit(&["graph", &path, "--format", "dot"]);
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("graphviz `dot` (scripts/test-deps.sh installs it)");
        child.stdin.take().unwrap().write_all(dot.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "dot refused the graph of {example}: {}", String::from_utf8_lossy(&out.stderr));
        let svg = String::from_utf8_lossy(&out.stdout);
        let listing = remit(&["graph", &path, "--format", "mermaid"]);
        for name in listing.lines().filter_map(|l| l.split("<b>").nth(1)).map(|l| l.split("</b>").next().unwrap()) {
            assert!(svg.contains(&format!(">{name}<")), "{example}: `{name}` missing from graphviz's drawing");
        }
    }
}

#[test]
fn explanations_of_the_example_requests() {
    for example in examples() {
        let dir = root().join("examples").join(&example).join("requests");
        let mut requests: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        requests.sort();
        for request in requests {
            let stem = request.file_stem().unwrap().to_string_lossy().into_owned();
            let text = remit(&["explain", &format!("examples/{example}"), "--request", request.to_str().unwrap()]);
            // Every decision the explanation shows is the interpreter's decision.
            let decision = remit(&["eval", &format!("examples/{example}"), "--request", request.to_str().unwrap()]);
            let decision: serde_json::Value = serde_json::from_str(&decision).unwrap();
            let headline = text.lines().next().unwrap();
            assert!(
                headline.contains(&decision["decision"].as_str().unwrap().to_uppercase()),
                "{example}/{stem}: `{headline}` does not match {decision}"
            );
            // The policy hash changes with every edit of the example; the snapshot keeps the rest.
            let text: String = text
                .lines()
                .map(|l| if l.starts_with("policy  ") { "policy   [hash]" } else { l })
                .collect::<Vec<_>>()
                .join("\n");
            snapshot(&format!("explain-{example}-{stem}.txt"), &text);
        }
    }
}

#[test]
fn the_readme_shows_the_wallets_tree() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme.split("```mermaid\n").nth(1).and_then(|b| b.split("```").next()).expect("a mermaid block");
    assert_eq!(block, remit(&["graph", "examples/wallet", "--format", "mermaid"]), "regenerate the README's block");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn fill(selector: &str, rgb: &str) -> serde_json::Value {
    json!({ "selector": selector, "property": "fill", "value": rgb })
}

fn background(selector: &str, rgb: &str) -> serde_json::Value {
    json!({ "selector": selector, "property": "backgroundColor", "value": rgb })
}

const RED: &str = "rgb(253, 224, 220)";
const GREEN: &str = "rgb(227, 244, 225)";
const WHITE: &str = "rgb(255, 255, 255)";
const BLUE: &str = "rgb(223, 238, 252)";
const ORANGE: &str = "rgb(255, 240, 214)";

#[test]
fn pictures_render_in_a_real_browser() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pictures");
    std::fs::create_dir_all(&dir).unwrap();
    let shot = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let web = "examples/web-publication";
    let (old, new) = ("tests/narrowing/diff/old", "tests/narrowing/diff/new");
    let escalation = "examples/wallet/requests/escalate-an-80-usd-payment-needs-alices-approval-of-the-order.json";
    let names = ["web_root", "web_code", "web_content", "web_localization", "web_release", "announcements"];

    let graph_svg = write(&dir, "graph.svg", &remit(&["graph", web, "--format", "svg", "--stop", "web_release"]));
    let graph_mmd = write(&dir, "graph.mmd", &remit(&["graph", web, "--format", "mermaid", "--stop", "web_release"]));
    let diff_html = write(&dir, "diff.html", &remit(&["diff", old, new, "--format", "html"]));
    let diff_svg = write(&dir, "diff.svg", &remit(&["diff", old, new, "--format", "svg"]));
    let explain_html = write(
        &dir,
        "explain.html",
        &remit(&["explain", "examples/wallet", "--request", escalation, "--format", "html"]),
    );
    let report: serde_json::Value = serde_json::from_str(&remit(&["diff", old, new, "--format", "json"])).unwrap();
    let wider = report["mandates"].as_array().unwrap().iter().find(|m| m["mandate"] == "wider").unwrap();
    let witness_amount = wider["widened"][0]["witness"]["action"]["arguments"]["amount"].as_str().unwrap().to_string();

    let mut graph_texts: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    graph_texts.push("STOPPED: side-effecting calls refused".into());
    graph_texts.push("require approval human_publication for public_publication".into());
    let diff_names = ["fresh", "gone", "mixed", "narrower", "heir", "same", "wider"];
    let specs = json!([
        {
            "file": graph_svg, "screenshot": shot("graph.png"), "texts": graph_texts,
            "styles": [fill("g.node.stopped > rect", RED), fill("g.node.mandate > rect", WHITE)],
        },
        {
            "file": graph_mmd, "mermaid": true, "screenshot": shot("graph-mermaid.png"), "texts": names,
            "styles": [fill("g.node.stopped > rect", RED), fill("g.node.mandate > rect", WHITE)],
        },
        {
            "file": diff_html, "screenshot": shot("diff.png"),
            "texts": diff_names.iter().map(|n| n.to_string()).chain([witness_amount.clone(), "widened".into()]).collect::<Vec<_>>(),
            "styles": [
                fill("g.node.widened > rect", RED), fill("g.node.narrowed > rect", GREEN),
                fill("g.node.added > rect", BLUE), fill("g.node.both > rect", ORANGE),
                background("tr[data-status=widened] td:nth-child(2)", RED),
                background("tr[data-status=narrowed] td:nth-child(2)", GREEN),
            ],
        },
        {
            "file": diff_svg, "screenshot": shot("diff-svg.png"),
            "texts": diff_names.iter().map(|n| n.to_string()).chain([witness_amount]).collect::<Vec<_>>(),
            "styles": [fill("g.node.widened > rect", RED), fill("g.node.narrowed > rect", GREEN)],
        },
        {
            "file": explain_html, "screenshot": shot("explain.png"),
            "texts": ["escalate to user:alice", "commercial_terms", "args.amount = \"80.00 USD\"", "approval.missing"],
            "styles": [
                background("#outcome", "rgb(255, 243, 205)"),
                json!({ "selector": ".step.escalated.decided", "property": "borderLeftColor", "value": "rgb(249, 168, 37)" }),
            ],
        },
    ]);
    let mut child = Command::new("python3")
        .arg(root().join("tests/browser/pictures.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(specs.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser checks failed (scripts/test-deps.sh installs chromium and playwright):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every page was checked (a script that silently did nothing must not pass).
    assert_eq!(stdout.lines().filter(|l| l.contains("\"ok\": true")).count(), 5, "{stdout}");
}

/// `remit explain` under an instance of a template: the instance is a step of the path with its template's rules,
/// acting for the principal it names, each rule showing the instance's values of the parameters it reads.
#[test]
fn an_explanation_under_an_instance_shows_the_templates_rules_with_its_values() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("explain-instance");
    std::fs::create_dir_all(&dir).unwrap();
    let policy = r#"
tool pay(merchant: string, amount: money) {
  side effects
}

mandate ceiling for "org:acme" {
  holder under "agent:"
  allow pay where args.amount <= 500 USD
}

template shopping(
  merchants: set<string> where merchants within ["acme", "globex"],
  cap: money where cap > 0 USD and cap <= 500 USD,
) under ceiling {
  for under "user:"
  holder under "agent:"
  otherwise escalate
  allow pay where args.merchant in merchants and args.amount <= cap
}
"#;
    std::fs::write(dir.join("policy.remit"), policy).unwrap();
    let grant = json!({"id": "g-1", "version": 3, "template": "shopping", "principal": "user:dana",
        "holder": "agent:shopper", "granted": "2026-11-30T12:00:00Z",
        "params": {"merchants": ["acme"], "cap": "100.00 USD"}});
    let body = json!({"subject": {"id": "agent:shopper"},
        "action": {"name": "pay", "arguments": {"merchant": "acme", "amount": "150.00 USD"}},
        "context": {"now": "2026-12-01T12:00:00Z", "grants": [grant]}});
    let request = dir.join("request.json");
    std::fs::write(&request, body.to_string()).unwrap();
    let text = remit(&["explain", dir.to_str().unwrap(), "--request", request.to_str().unwrap()]);
    assert!(text.starts_with("decision ESCALATE to user:dana"), "{text}");
    assert!(text.contains("by agent:shopper under shopping/g-1@3 at"), "the mandate it was resolved to: {text}");
    assert!(text.contains("ceiling (for org:acme)"), "{text}");
    let instance = text.split("shopping/g-1@3 (for user:dana)").nth(1).unwrap_or_else(|| panic!("{text}"));
    assert!(instance.contains("allow pay where args.merchant in merchants and args.amount <= cap"), "{text}");
    assert!(instance.contains("cap = \"100.00 USD\""), "{text}");
    assert!(instance.contains("merchants = [\"acme\"]"), "{text}");
}
