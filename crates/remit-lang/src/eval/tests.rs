//! Tests of the interpreter on a small program built by hand (independent of the checker), so the decision rules
//! are pinned down here; data-driven tests against checked policies live with the test runner.

use serde_json::{json, Value as Json};

use super::*;
use crate::ir::{
    ApprovalKind, Atom, Attr, Binding, Cond, Effect, Mandate, Program, Rule, RuleKind, Target, Test, Tool, Type, Value,
};
use crate::source::{SourceMap, Span};
use crate::syntax::ast::{CompareOp, FactVersion, Outcome as Otherwise, Window};
use crate::value::{parse_timestamp, Money};

/// The text the spans point into; it only needs to contain each clause once.
const POLICY: &str = r#"levels research < draft < local_change < publish
effect financial_operation(amount: money)
tool pay(merchant: string, amount: money) { effects financial_operation level local_change side effects requires scope "payments.write" }
tool read_page(path: string) { level research }
tool edit_mandate(name: string) { administers mandates }
tool publish(manifest: string) { level publish side effects }
approval commercial_terms { binds tool, target, arguments ttl 1h single use }
approval human_publication { binds manifest ttl 24h }
mandate wallet for "user:alice" {
  holder "agent:boss"
  valid from 2026-11-01T00:00:00Z until 2027-01-01T00:00:00Z
  max level local_change
  otherwise escalate
  allow any tool
  forbid pay where args.merchant in ["evil"]
  limit financial_operation: args.amount <= 100 USD
  require approval commercial_terms for pay where args.amount > 50 USD
  require operation id for financial_operation
  budget pay_per_op: at most 1 call to pay per operation
  fact price_sheet at version 7 for pay
}
mandate groceries under wallet {
  holder "agent:shopper"
  allow pay where args.merchant in ["acme", "globex"]
  allow read_page
}
mandate site for "user:bob" {
  holder "agent:web"
  allow publish
  allow read_page where args.path under "public/"
  forbid read_page where context.region == "us"
  require approval human_publication for publish
}
"#;

const PAY: usize = 0;
const READ_PAGE: usize = 1;
const PUBLISH: usize = 3;

fn span(needle: &str) -> Span {
    let start = POLICY.find(needle).unwrap_or_else(|| panic!("`{needle}` is in the test policy"));
    Span::new(0, start, start + needle.len())
}

fn atom(attr: Attr, ty: Type, test: Test) -> Cond {
    Cond::Atom(Atom { attr, ty, test })
}

fn strings(items: &[&str]) -> Vec<Value> {
    items.iter().map(|s| Value::String(s.to_string())).collect()
}

fn usd(text: &str) -> Value {
    Value::Money(Money::parse(text).expect("test money"))
}

fn rule(kind: RuleKind, target: Target, condition: Cond, text: &str) -> Rule {
    // Like the checker's labels: the clause up to its condition.
    let label = text.split(" where ").next().and_then(|t| t.split(':').next()).unwrap_or(text);
    Rule { kind, target, tools: Vec::new(), condition, label: label.to_string(), span: span(text) }
}

#[allow(clippy::too_many_arguments)]
fn mandate(
    name: &str,
    principal: &str,
    parent: Option<usize>,
    holders: &[&str],
    otherwise: Otherwise,
    valid: Option<(i64, i64)>,
    max_level: Option<usize>,
    rules: Vec<Rule>,
) -> Mandate {
    let header = POLICY.find(&format!("mandate {name} ")).expect("mandate in the test policy");
    let name_span = Span::new(0, header + 8, header + 8 + name.len());
    Mandate {
        name: name.to_string(),
        principal: principal.to_string(),
        parent,
        holders: holders.iter().map(|h| h.to_string()).collect(),
        holder_prefixes: Vec::new(),
        purpose: None,
        valid_from: valid.map(|v| v.0),
        valid_until: valid.map(|v| v.1),
        max_level,
        otherwise,
        delegation_depth: None,
        rules,
        span: name_span,
        valid_span: if valid.is_some() { span("valid from") } else { name_span },
        max_level_span: if max_level.is_some() { span("max level") } else { name_span },
        otherwise_span: if otherwise == Otherwise::Escalate { span("otherwise escalate") } else { name_span },
        depth_span: name_span,
    }
}

fn ts(text: &str) -> i64 {
    parse_timestamp(text).expect("test timestamp")
}

/// The program of [`POLICY`].
pub(crate) fn program() -> Program {
    let tool = |name: &str, params: &[(&str, Type)], level: usize| Tool {
        name: name.to_string(),
        params: params.iter().map(|(n, t)| (n.to_string(), t.clone())).collect(),
        effects: Vec::new(),
        level,
        side_effects: false,
        scopes: Vec::new(),
        administers_mandates: false,
        open_arguments: false,
        signed: Vec::new(),
        resource_type: None,
        span: span(&format!("tool {name}")),
    };
    let pay = Tool {
        effects: vec![0],
        side_effects: true,
        scopes: vec!["payments.write".into()],
        ..tool("pay", &[("merchant", Type::String), ("amount", Type::Money)], 2)
    };
    let edit = Tool { administers_mandates: true, ..tool("edit_mandate", &[("name", Type::String)], 0) };
    let publish = Tool { side_effects: true, ..tool("publish", &[("manifest", Type::String)], 3) };
    let tools = vec![pay, tool("read_page", &[("path", Type::String)], 0), edit, publish];

    let merchant = |items: &[&str]| atom(Attr::Arg("merchant".into()), Type::String, Test::In(strings(items)));
    let amount = |op, limit| atom(Attr::Arg("amount".into()), Type::Money, Test::Compare(op, usd(limit)));
    let wallet = mandate(
        "wallet",
        "user:alice",
        None,
        &["agent:boss"],
        Otherwise::Escalate,
        Some((ts("2026-11-01T00:00:00Z"), ts("2027-01-01T00:00:00Z"))),
        Some(2),
        vec![
            rule(RuleKind::Allow, Target::AnyTool, Cond::True, "allow any tool"),
            rule(
                RuleKind::Forbid,
                Target::Tool(PAY),
                merchant(&["evil"]),
                "forbid pay where args.merchant in [\"evil\"]",
            ),
            rule(
                RuleKind::Limit,
                Target::Effect(0),
                amount(CompareOp::Le, "100 USD"),
                "limit financial_operation: args.amount <= 100 USD",
            ),
            rule(
                RuleKind::Gate { approval: 0, on_missing: Otherwise::Escalate },
                Target::Tool(PAY),
                amount(CompareOp::Gt, "50 USD"),
                "require approval commercial_terms for pay where args.amount > 50 USD",
            ),
            rule(
                RuleKind::RequireOperationId,
                Target::Effect(0),
                Cond::True,
                "require operation id for financial_operation",
            ),
            rule(
                RuleKind::Budget { name: "pay_per_op".into(), max: 1, window: Window::PerOperation },
                Target::Tool(PAY),
                Cond::True,
                "budget pay_per_op: at most 1 call to pay per operation",
            ),
            rule(
                RuleKind::Fact {
                    name: "price_sheet".into(),
                    version: FactVersion::Number(7),
                    on_stale: Otherwise::Deny,
                },
                Target::Tool(PAY),
                Cond::True,
                "fact price_sheet at version 7 for pay",
            ),
        ],
    );
    let groceries = mandate(
        "groceries",
        "user:alice",
        Some(0),
        &["agent:shopper"],
        Otherwise::Deny,
        None,
        None,
        vec![
            rule(
                RuleKind::Allow,
                Target::Tool(PAY),
                merchant(&["acme", "globex"]),
                "allow pay where args.merchant in [\"acme\", \"globex\"]",
            ),
            rule(RuleKind::Allow, Target::Tool(READ_PAGE), Cond::True, "allow read_page"),
        ],
    );
    let region =
        atom(Attr::Context("region".into()), Type::String, Test::Compare(CompareOp::Eq, strings(&["us"])[0].clone()));
    let site = mandate(
        "site",
        "user:bob",
        None,
        &["agent:web"],
        Otherwise::Deny,
        None,
        None,
        vec![
            rule(RuleKind::Allow, Target::Tool(PUBLISH), Cond::True, "allow publish"),
            rule(
                RuleKind::Allow,
                Target::Tool(READ_PAGE),
                atom(Attr::Arg("path".into()), Type::String, Test::Under("public/".into())),
                "allow read_page where args.path under \"public/\"",
            ),
            rule(RuleKind::Forbid, Target::Tool(READ_PAGE), region, "forbid read_page where context.region == \"us\""),
            rule(
                RuleKind::Gate { approval: 1, on_missing: Otherwise::Escalate },
                Target::Tool(PUBLISH),
                Cond::True,
                "require approval human_publication for publish",
            ),
        ],
    );

    let mut sources = SourceMap::new();
    sources.add("policy.remit", POLICY);
    let approvals = vec![
        ApprovalKind {
            approvers: None,
            name: "commercial_terms".into(),
            binds: vec![Binding::Tool, Binding::Target, Binding::Arguments],
            ttl: 3600,
            single_use: true,
            span: span("approval commercial_terms"),
            binds_span: span("approval commercial_terms"),
            ttl_span: span("approval commercial_terms"),
        },
        ApprovalKind {
            approvers: None,
            name: "human_publication".into(),
            binds: vec![Binding::Manifest],
            ttl: 86_400,
            single_use: false,
            span: span("approval human_publication"),
            binds_span: span("approval human_publication"),
            ttl_span: span("approval human_publication"),
        },
    ];
    let mut program = Program {
        sources,
        hash: "sha256:test".into(),
        levels: ["research", "draft", "local_change", "publish"].iter().map(|s| s.to_string()).collect(),
        effects: vec![Effect {
            name: "financial_operation".into(),
            params: vec![("amount".into(), Type::Money)],
            signed: Vec::new(),
            description: None,
            span: span("effect financial_operation"),
        }],
        tool_index: tools.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect(),
        tools,
        approvals,
        contexts: [("region".to_string(), Type::String)].into_iter().collect(),
        signed_contexts: Default::default(),
        mandate_index: [("wallet".to_string(), 0), ("groceries".to_string(), 1), ("site".to_string(), 2)]
            .into_iter()
            .collect(),
        mandates: vec![wallet, groceries, site],
        templates: Vec::new(),
        template_index: Default::default(),
        entities: Vec::new(),
        subject_attributes: Default::default(),
        resource_attributes: Default::default(),
        principal_attributes: Default::default(),
        relations: Default::default(),
        calendars: Default::default(),
    };
    let covered: Vec<Vec<Vec<usize>>> = program
        .mandates
        .iter()
        .map(|m| {
            m.rules
                .iter()
                .map(|r| (0..program.tools.len()).filter(|&t| program.covers(&r.target, t)).collect())
                .collect()
        })
        .collect();
    for (mandate, tools) in program.mandates.iter_mut().zip(covered) {
        for (rule, tools) in mandate.rules.iter_mut().zip(tools) {
            rule.tools = tools;
        }
    }
    program
}

/// A request of the shopper paying acme 25 USD that every rule allows; tests change parts of it.
fn pay_request() -> Json {
    json!({
        "subject": {"id": "agent:shopper", "credential": {"id": "cred-7", "scopes": ["payments.write"]}},
        "action": {"name": "pay", "arguments": {"merchant": "acme", "amount": "25.00 USD"}},
        "resource": {"id": "order:991"},
        "context": {
            "mandate": "groceries",
            "now": "2026-11-30T12:00:00Z",
            "operation_id": "op-1",
            "attempt": 1,
            "facts": {"price_sheet": 7},
            "counters": {"pay_per_op": 0}
        }
    })
}

fn decide_json(request: &Json) -> Decision {
    decide(&program(), request.to_string().as_bytes())
}

fn reasons(decision: &Decision) -> Vec<&str> {
    decision.reasons.iter().map(String::as_str).collect()
}

fn with(mut request: Json, pointer: &str, value: Json) -> Json {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    let parent = request.pointer_mut(parent).expect("parent exists").as_object_mut().expect("parent is an object");
    parent.insert(key.to_string(), value);
    request
}

fn without(mut request: Json, pointer: &str) -> Json {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    request.pointer_mut(parent).and_then(Json::as_object_mut).expect("parent is an object").remove(key);
    request
}

fn approval(id: &str) -> Json {
    let digest = argument_digest("pay", &json!({"merchant": "acme", "amount": "75 USD"}));
    json!({"id": id, "kind": "commercial_terms", "mandate": "wallet", "issued_at": "2026-11-30T11:30:00Z",
           "expires_at": "2026-11-30T13:00:00Z", "tool": "pay", "target": "order:991", "digest": digest})
}

fn big_payment(approvals: Json) -> Json {
    let request = with(pay_request(), "/action/arguments/amount", json!("75 USD"));
    with(request, "/context/approvals", approvals)
}

#[test]
fn a_call_every_mandate_grants_is_allowed_with_its_obligations() {
    let decision = decide_json(&pay_request());
    assert_eq!(
        decision.to_json(),
        concat!(
            r#"{"decision":"allow","reasons":["rule.allowed"],"rules":["#,
            // By mandate name, then rule text: never by position.
            r#"{"mandate":"groceries","rule":"allow pay","at":"policy.remit:24:3"},"#,
            r#"{"mandate":"wallet","rule":"allow any tool","at":"policy.remit:14:3"}],"#,
            r#""missing_approvals":[],"approvals":[],"obligations":["#,
            r#"{"kind":"increment-counter","counter":"pay_per_op"},{"kind":"record-operation","id":"op-1"}],"#,
            r#""mandate_chain":["wallet","groceries"],"credential":"cred-7","escalate_to":null,"policy":"sha256:test"}"#
        )
    );
}

#[test]
fn every_decision_on_a_readable_request_names_its_credential() {
    let credential = |request: &Json| decide_json(request).credential;
    assert_eq!(credential(&pay_request()).as_deref(), Some("cred-7"));
    // The early denies too: an undeclared tool, an unknown mandate, a subject that is not a holder.
    let early = [
        with(pay_request(), "/action/name", json!("teleport")),
        with(pay_request(), "/context/mandate", json!("nobody")),
        with(pay_request(), "/subject/id", json!("agent:other")),
    ];
    for request in &early {
        let decision = decide_json(request);
        assert_eq!(decision.outcome, Outcome::Deny);
        assert_eq!(decision.credential.as_deref(), Some("cred-7"), "{}", decision.to_json());
    }
    // Blank is absent, as for every identifier; no credential, no id.
    assert_eq!(credential(&with(pay_request(), "/subject/credential/id", json!(" \t"))), None);
    assert_eq!(credential(&with(pay_request(), "/subject/credential", json!({"scopes": ["payments.write"]}))), None);
    // A request that cannot be read names nothing; a mistyped id makes it unreadable.
    let mistyped = decide_json(&with(pay_request(), "/subject/credential/id", json!(7)));
    assert_eq!((mistyped.reasons.as_slice(), mistyped.credential), (&["request.malformed".to_string()][..], None));
}

#[test]
fn a_gate_without_approval_escalates_to_the_root_principal() {
    let decision = decide_json(&big_payment(json!([])));
    assert_eq!(decision.outcome, Outcome::Escalate);
    assert_eq!(reasons(&decision), ["approval.missing"]);
    assert_eq!(decision.escalate_to.as_deref(), Some("user:alice"));
    let digest = argument_digest("pay", &json!({"merchant": "acme", "amount": "75 USD"}));
    assert_eq!(
        decision.missing_approvals,
        [MissingApproval {
            kind: "commercial_terms".into(),
            mandate: "wallet".into(),
            mandates: vec!["wallet".into()],
            tool: Some("pay".into()),
            target: Some("order:991".into()),
            digest: Some(digest),
            manifest: None,
            refused: vec![],
        }]
    );
    assert_eq!(decision.rules.len(), 1);
    assert_eq!(decision.rules[0].rule, "require approval commercial_terms for pay");
    assert!(decision.obligations.is_empty());
}

#[test]
fn a_bound_approval_satisfies_the_gate_and_is_consumed() {
    let decision = decide_json(&big_payment(json!([approval("apr-2"), approval("apr-1")])));
    assert_eq!(decision.outcome, Outcome::Allow, "{}", decision.to_json());
    assert_eq!(decision.obligations[0], Obligation::ConsumeApproval("apr-1".into()));
    assert!(decision.rules.iter().any(|r| r.rule == "require approval commercial_terms for pay"));
}

#[test]
fn approvals_that_do_not_fit_never_satisfy() {
    let changed = |pointer: &str, value: Json| with(approval("apr-1"), pointer, value);
    let unfit = [
        changed("/kind", json!("human_publication")),
        changed("/mandate", json!("site")),
        changed("/target", json!("order:992")),
        changed("/tool", json!("refund")),
        changed("/digest", json!("sha256:00")),
        changed("/consumed", json!(true)),
        changed("/consumed", json!("false")),
        changed("/issued_at", json!("2026-11-30T12:00:01Z")),
        changed("/expires_at", json!("2026-11-30T12:00:00Z")),
        // Within `expires_at` but past the kind's one-hour ttl.
        changed("/issued_at", json!("2026-11-30T10:59:59Z")),
        changed("/issued_at", json!("yesterday")),
        without(approval("apr-1"), "/target"),
        without(approval("apr-1"), "/expires_at"),
        json!("apr-1"),
    ];
    for unfit in unfit {
        let decision = decide_json(&big_payment(json!([unfit.clone()])));
        assert_eq!(decision.outcome, Outcome::Escalate, "{unfit}");
    }
}

#[test]
fn prohibitions_deny_and_fail_closed() {
    let evil = decide_json(&with(pay_request(), "/action/arguments/merchant", json!("evil")));
    assert_eq!(reasons(&evil), ["rule.forbidden", "rule.unmatched"]);
    assert_eq!(evil.escalate_to, None);
    // Without the argument the prohibition cannot be evaluated, so it matches; the grant does not.
    let missing = decide_json(&without(pay_request(), "/action/arguments/merchant"));
    assert_eq!(reasons(&missing), ["rule.forbidden", "rule.unmatched"]);
    let mistyped = decide_json(&with(pay_request(), "/action/arguments/merchant", json!(7)));
    assert_eq!(reasons(&mistyped), ["rule.forbidden", "rule.unmatched"]);
    // An approval never overrides a denial.
    let both = with(big_payment(json!([approval("apr-1")])), "/action/arguments/amount", json!("150 USD"));
    assert_eq!(reasons(&decide_json(&both)), ["limit.exceeded"]);
    let no_amount = without(pay_request(), "/action/arguments/amount");
    let decision = decide_json(&no_amount);
    assert_eq!(decision.outcome, Outcome::Deny);
    assert_eq!(reasons(&decision), ["limit.exceeded"]);
    assert_eq!(decision.rules[0].rule, "limit financial_operation");
    assert_eq!(decision.rules[0].at, "policy.remit:16:3");
}

#[test]
fn chain_state_denies() {
    let stopped = decide_json(&with(pay_request(), "/context/stops", json!(["wallet"])));
    assert_eq!(reasons(&stopped), ["stop.active"]);
    assert_eq!(
        stopped.rules[0],
        DecidingRule {
            mandate: "wallet".into(),
            rule: "stop".into(),
            at: "policy.remit:9:9".into(),
            unevaluable: None,
            failed: None,
            closest: None,
        }
    );
    let early = decide_json(&with(pay_request(), "/context/now", json!("2026-10-01T00:00:00Z")));
    assert_eq!(reasons(&early), ["mandate.not-yet-valid"]);
    assert_eq!(early.rules[0].rule, "valid from 2026-11-01T00:00:00Z until 2027-01-01T00:00:00Z");
    let late = decide_json(&with(pay_request(), "/context/now", json!("2027-01-01T00:00:00Z")));
    assert_eq!(reasons(&late), ["mandate.expired"]);
    let no_op = decide_json(&without(pay_request(), "/context/operation_id"));
    assert_eq!(reasons(&no_op), ["operation.missing-id"]);
    let empty_op = decide_json(&with(pay_request(), "/context/operation_id", json!("")));
    assert_eq!(reasons(&empty_op), ["operation.missing-id"]);
    let stale = decide_json(&with(pay_request(), "/context/facts", json!({"price_sheet": 6})));
    assert_eq!(reasons(&stale), ["fact.stale"]);
    let used = decide_json(&with(pay_request(), "/context/counters", json!({"pay_per_op": 1})));
    assert_eq!(reasons(&used), ["budget.exhausted"]);
    let uncounted = decide_json(&with(pay_request(), "/context/counters", json!({})));
    assert_eq!(reasons(&uncounted), ["budget.exhausted"]);
    let unscoped = decide_json(&without(pay_request(), "/subject/credential"));
    assert_eq!(reasons(&unscoped), ["credential.scope-missing"]);
    assert!(unscoped.rules.is_empty());
}

#[test]
fn tool_and_mandate_level_denials() {
    let read = |tool: &str| with(with(pay_request(), "/action/name", json!(tool)), "/action/arguments", json!({}));
    let edit = decide_json(&read("edit_mandate"));
    assert_eq!(reasons(&edit), ["mandate.self-modification", "rule.unmatched"]);
    // The pay call's arguments are undeclared for `edit_mandate`: listed with every other deny reason.
    let extra = decide_json(&with(pay_request(), "/action/name", json!("edit_mandate")));
    assert_eq!(reasons(&extra), ["mandate.self-modification", "request.undeclared-argument", "rule.unmatched"]);
    let publish = decide_json(&read("publish"));
    assert_eq!(reasons(&publish), ["level.exceeded", "rule.unmatched"]);
    let named: Vec<(&str, &str)> = publish.rules.iter().map(|r| (r.mandate.as_str(), r.rule.as_str())).collect();
    assert!(named.contains(&("wallet", "max level local_change")), "{named:?}");
    assert!(named.windows(2).all(|w| w[0] <= w[1]), "rules by mandate, then text: {named:?}");
    let undeclared = decide_json(&read("delete_everything"));
    assert_eq!(reasons(&undeclared), ["tool.undeclared"]);
    assert!(undeclared.mandate_chain.is_empty());
    let unknown = decide_json(&with(pay_request(), "/context/mandate", json!("nope")));
    assert_eq!(reasons(&unknown), ["mandate.unknown"]);
    assert!(unknown.mandate_chain.is_empty());
    let stranger = decide_json(&with(pay_request(), "/subject/id", json!("agent:boss")));
    assert_eq!(reasons(&stranger), ["subject.not-holder"]);
    assert_eq!(stranger.mandate_chain, ["wallet", "groceries"]);
}

#[test]
fn a_manifest_bound_approval_checks_the_manifest_argument() {
    let request = json!({
        "subject": {"id": "agent:web"},
        "action": {"name": "publish", "arguments": {"manifest": "sha256:abc"}},
        "context": {"mandate": "site", "now": "2026-11-30T12:00:00Z", "operation_id": "op-9", "approvals": [
            {"id": "apr-9", "kind": "human_publication", "mandate": "site", "issued_at": "2026-11-30T11:00:00Z",
             "expires_at": "2026-12-01T00:00:00Z", "manifest": "sha256:abc"}]}
    });
    let allowed = decide_json(&request);
    assert_eq!(allowed.outcome, Outcome::Allow, "{}", allowed.to_json());
    // Reusable: no consume obligation; side effects: the operation is recorded.
    assert_eq!(allowed.obligations, [Obligation::RecordOperation("op-9".into())]);
    let other = decide_json(&with(request, "/action/arguments/manifest", json!("sha256:def")));
    assert_eq!(other.outcome, Outcome::Escalate);
    assert_eq!(other.escalate_to.as_deref(), Some("user:bob"));
    assert_eq!(other.missing_approvals[0].manifest.as_deref(), Some("sha256:def"));
    assert_eq!(other.missing_approvals[0].tool, None);
}

#[test]
fn malformed_requests_are_denied() {
    let code = |bytes: &[u8]| decide(&program(), bytes).reasons;
    assert_eq!(code(b""), ["request.malformed"]);
    assert_eq!(code(b"[1]"), ["request.malformed"]);
    assert_eq!(code(b"null"), ["request.malformed"]);
    assert_eq!(code(b"{\"subject\": \xff}"), ["request.malformed"]);
    let bad = |pointer: &str, value: Json| code(with(pay_request(), pointer, value).to_string().as_bytes());
    assert_eq!(bad("/subject/id", json!(1)), ["request.malformed"]);
    assert_eq!(bad("/subject", json!("agent")), ["request.malformed"]);
    assert_eq!(bad("/context", json!([])), ["request.malformed"]);
    assert_eq!(bad("/subject/credential", json!(null)), ["request.malformed"]);
    assert_eq!(bad("/context/now", json!("2026-11-30 12:00:00")), ["request.malformed"]);
    assert_eq!(bad("/context/now", json!(null)), ["request.malformed"]);
    assert_eq!(bad("/context/stops", json!("wallet")), ["request.malformed"]);
    assert_eq!(bad("/context/stops", json!(null)), ["request.malformed"]);
    assert_eq!(bad("/context/stops", json!(["wallet", 1])), ["request.malformed"]);
    assert_eq!(bad("/context/stops", json!([{"id": "S", "level": "pause"}])), ["request.malformed"]);
    assert_eq!(
        bad("/context/stops", json!([{"id": "S", "level": "halt", "mandate": "wallet"}])),
        ["request.malformed"]
    );
    assert_eq!(bad("/context/approvals", json!({})), ["request.malformed"]);
    assert_eq!(bad("/context/facts", json!([])), ["request.malformed"]);
    assert_eq!(bad("/context/counters", json!(1)), ["request.malformed"]);
    assert_eq!(bad("/context/attributes", json!("x")), ["request.malformed"]);
    assert_eq!(bad("/context/attempt", json!(1.5)), ["request.malformed"]);
    assert_eq!(bad("/context/operation_id", json!(7)), ["request.malformed"]);
    assert_eq!(bad("/subject/credential/scopes", json!("payments.write")), ["request.malformed"]);
    assert_eq!(bad("/action/arguments", json!([])), ["request.malformed"]);
    assert_eq!(bad("/resource/id", json!(991)), ["request.malformed"]);
    let missing = |pointer: &str| code(without(pay_request(), pointer).to_string().as_bytes());
    assert_eq!(missing("/subject/id"), ["request.missing-field"]);
    assert_eq!(missing("/subject"), ["request.missing-field"]);
    assert_eq!(missing("/action/name"), ["request.missing-field"]);
    assert_eq!(missing("/context/mandate"), ["request.missing-field"]);
    assert_eq!(missing("/context/now"), ["request.missing-field"]);
    assert_eq!(missing("/context"), ["request.missing-field"]);
    let both = with(without(pay_request(), "/subject/id"), "/context/now", json!(5));
    assert_eq!(code(both.to_string().as_bytes()), ["request.malformed", "request.missing-field"]);
    // Unknown fields are ignored.
    assert_eq!(decide_json(&with(pay_request(), "/context/extra", json!({"x": [1]}))).outcome, Outcome::Allow);
}

#[test]
fn a_refused_request_names_its_fields() {
    let fields = |request: &Json| {
        decide_json(request).fields.iter().map(|f| format!("{} {}", f.field, f.problem)).collect::<Vec<_>>()
    };
    let bad = |pointer: &str, value: Json| fields(&with(pay_request(), pointer, value));
    assert_eq!(bad("/context/now", json!("2026-11-30 12:00:00Z")), ["context.now malformed"]);
    assert_eq!(bad("/context/now", json!("2026-11-30T12:00:60Z")), ["context.now malformed"]);
    assert_eq!(bad("/context/now", json!(5)), ["context.now malformed"]);
    assert_eq!(bad("/subject", json!("agent")), ["subject malformed"]);
    assert_eq!(bad("/subject/credential/scopes", json!([1])), ["subject.credential.scopes malformed"]);
    assert_eq!(bad("/context/stops", json!(["wallet", 1])), ["context.stops malformed"]);
    assert_eq!(bad("/context/attempt", json!(1.5)), ["context.attempt malformed"]);
    assert_eq!(bad("/action/arguments", json!([])), ["action.arguments malformed"]);
    assert_eq!(bad("/resource/id", json!(991)), ["resource.id malformed"]);
    let missing = |pointer: &str| fields(&without(pay_request(), pointer));
    assert_eq!(missing("/subject"), ["subject.id missing"]);
    assert_eq!(missing("/context"), ["context.mandate missing", "context.now missing"]);
    assert_eq!(missing("/action/name"), ["action.name missing"]);
    // Every problem, in byte order of the paths.
    let both = with(with(without(pay_request(), "/subject/id"), "/context/now", json!(5)), "/context/facts", json!(1));
    assert_eq!(fields(&both), ["context.facts malformed", "context.now malformed", "subject.id missing"]);
    let decision = decide_json(&with(pay_request(), "/context/now", json!("2026-11-30T12:00:00+0100")));
    assert!(decision.to_json().starts_with(
        r#"{"decision":"deny","reasons":["request.malformed"],"fields":[{"field":"context.now","problem":"malformed"}],"rules":[],"#
    ));
    // A request that is not a JSON object names no field (and the decision has no `fields` key).
    let program = program();
    for bytes in [&b"[1]"[..], b"{", b"{\"a\":1,\"a\":2}"] {
        let decision = decide(&program, bytes);
        assert!(decision.fields.is_empty() && !decision.to_json().contains("\"fields\""));
    }
    // An accepted request has no `fields` either.
    assert!(!decide_json(&pay_request()).to_json().contains("\"fields\""));
}

#[test]
fn fractional_and_offset_timestamps_are_read_exactly() {
    // The wallet is valid from 2026-11-01T00:00:00Z until 2027-01-01T00:00:00Z.
    let at = |now: &str| reasons(&decide_json(&with(pay_request(), "/context/now", json!(now)))).join(" ");
    assert!(!at("2026-12-31T23:59:59.999Z").contains("mandate."));
    assert!(!at("2027-01-01T00:59:59.999999999+01:00").contains("mandate."));
    assert!(!at("2026-11-01T00:00:00.000Z").contains("mandate."));
    assert_eq!(at("2027-01-01T00:00:00.000Z"), "mandate.expired");
    assert_eq!(at("2027-01-01T00:00:00.5Z"), "mandate.expired");
    assert_eq!(at("2026-12-31T19:00:00-05:00"), "mandate.expired");
    assert_eq!(at("2026-10-31T23:59:59.999999999Z"), "mandate.not-yet-valid");
    assert_eq!(at("2026-11-01T00:59:59+01:00"), "mandate.not-yet-valid");
}

#[test]
fn no_input_makes_the_interpreter_panic() {
    let program = program();
    let valid = big_payment(json!([approval("apr-1")])).to_string().into_bytes();
    // Every prefix, and every single-byte corruption from a fixed pseudo-random sequence.
    for end in 0..valid.len() {
        let decision = decide(&program, &valid[..end]);
        assert_eq!(decision.outcome, Outcome::Deny);
        visible_tools(&program, &valid[..end]);
    }
    let mut state: u32 = 0x2545_f491;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let mut bytes = valid.clone();
        let at = state as usize % bytes.len();
        bytes[at] = (state >> 24) as u8;
        decide(&program, &bytes);
        visible_tools(&program, &bytes);
    }
    let deep = "[".repeat(100_000);
    assert_eq!(decide(&program, deep.as_bytes()).reasons, ["request.malformed"]);
    let deep_args =
        format!(r#"{{"action":{{"name":"pay","arguments":{{"m":{}}}}}}}"#, "[".repeat(5000) + &"]".repeat(5000));
    assert_eq!(decide(&program, deep_args.as_bytes()).reasons, ["request.malformed"]);
    let odd_values = with(pay_request(), "/action/arguments", json!({"merchant": "acme", "amount": "1é USD"}));
    assert_eq!(decide_json(&odd_values).outcome, Outcome::Deny);
}

#[test]
fn reordering_rules_never_changes_a_decision() {
    let requests = [
        pay_request(),
        big_payment(json!([])),
        big_payment(json!([approval("apr-1"), approval("apr-0")])),
        with(pay_request(), "/action/arguments/merchant", json!("evil")),
        with(with(pay_request(), "/context/stops", json!(["wallet"])), "/context/facts", json!({})),
        without(pay_request(), "/action/arguments/amount"),
    ];
    let original = program();
    let mut reversed = program();
    for mandate in &mut reversed.mandates {
        mandate.rules.reverse();
    }
    for request in requests {
        let bytes = request.to_string().into_bytes();
        assert_eq!(decide(&original, &bytes).to_json(), decide(&reversed, &bytes).to_json());
    }
}

#[test]
fn stops_with_ids_are_named_by_the_strongest_level_then_the_smallest_id() {
    let stops = json!([
        "groceries",
        {"id": "S-2", "level": "pause", "mandate": "groceries"},
        {"id": "S-1", "level": "pause", "mandate": "groceries"},
        {"id": "Q-9", "level": "quarantine", "principal": "user:alice"},
        {"id": "Z", "level": "quarantine", "principal": "user:bob"},
        {"id": "A", "level": "quarantine", "principal": "groceries"},
    ]);
    let named = |decision: &Decision| -> Vec<(String, String)> {
        decision.rules.iter().map(|r| (r.mandate.clone(), r.rule.clone())).collect()
    };
    let pay = decide_json(&with(pay_request(), "/context/stops", stops.clone()));
    assert_eq!(reasons(&pay), ["stop.active"]);
    // The principal's stop at the root it gave, the mandate's own at the leaf (both pauses beat the bare name).
    assert_eq!(
        named(&pay),
        [("groceries".into(), "stop S-1 (pause)".into()), ("wallet".into(), "stop Q-9 (quarantine)".into())]
    );
    // A read: only the quarantine refuses it.
    let read = with(pay_request(), "/action", json!({"name": "read_page", "arguments": {"path": "a"}}));
    let read = decide_json(&with(read, "/context/stops", stops));
    assert_eq!(named(&read), [("wallet".to_string(), "stop Q-9 (quarantine)".to_string())]);
    // A listing names the level only.
    let quarantined = json!({"stops": [{"id": "Q-9", "level": "quarantine", "mandate": "groceries"}]});
    let listed = listing("agent:shopper", "groceries", quarantined);
    assert!(listed.visible.is_empty());
    let rules: Vec<&str> = listed.hidden.iter().filter_map(|h| h.rule.as_ref()).map(|r| r.rule.as_str()).collect();
    assert!(rules.contains(&"stop (quarantine)"), "{rules:?}");
}

fn listing(subject: &str, mandate: &str, extra: Json) -> Visibility {
    let mut request = json!({"subject": {"id": subject, "credential": {"scopes": ["payments.write"]}},
                             "context": {"mandate": mandate, "now": "2026-11-30T12:00:00Z"}});
    for (key, value) in extra.as_object().expect("extra context is an object") {
        request = with(request, &format!("/context/{key}"), value.clone());
    }
    visible_tools(&program(), request.to_string().as_bytes())
}

fn hidden(visibility: &Visibility) -> Vec<(&str, &str)> {
    visibility.hidden.iter().map(|h| (h.tool.as_str(), h.reason.as_str())).collect()
}

#[test]
fn listing_hides_tools_every_call_to_which_is_denied() {
    let shopper = listing("agent:shopper", "groceries", json!({}));
    assert_eq!(shopper.visible, ["pay", "read_page"]);
    assert_eq!(hidden(&shopper), [("edit_mandate", "mandate.self-modification"), ("publish", "level.exceeded")]);
    let stopped = listing("agent:shopper", "groceries", json!({"stops": ["groceries"]}));
    assert_eq!(stopped.visible, ["read_page"]);
    assert_eq!(hidden(&stopped)[1], ("pay", "stop.active"));

    let web = listing("agent:web", "site", json!({"attributes": {"region": "eu"}}));
    assert_eq!(web.visible, ["publish", "read_page"]);
    assert_eq!(hidden(&web), [("edit_mandate", "mandate.self-modification"), ("pay", "rule.unmatched")]);
    let us = listing("agent:web", "site", json!({"attributes": {"region": "us"}}));
    assert_eq!(us.visible, ["publish"]);
    assert_eq!(hidden(&us)[2], ("read_page", "rule.forbidden"));
    // A prohibition that cannot be evaluated forbids every call, as in `decide`.
    let unknown_region = listing("agent:web", "site", json!({}));
    assert_eq!(hidden(&unknown_region)[2], ("read_page", "rule.forbidden"));
    assert_eq!(
        us.to_json(),
        concat!(
            r#"{"visible":["publish"],"hidden":[{"tool":"edit_mandate","reason":"mandate.self-modification"},"#,
            r#"{"tool":"pay","reason":"rule.unmatched","rule":{"mandate":"site","rule":"otherwise deny","at":"policy.remit:27:9"}},"#,
            r#"{"tool":"read_page","reason":"rule.forbidden","rule":{"mandate":"site","rule":"forbid read_page","at":"policy.remit:31:3"}}]}"#
        )
    );

    let all = |v: &Visibility| v.visible.is_empty() && v.hidden.len() == 4;
    let nobody = listing("agent:nobody", "site", json!({}));
    assert!(all(&nobody) && nobody.hidden.iter().all(|h| h.reason == "subject.not-holder"));
    let unknown = listing("agent:web", "nope", json!({}));
    assert!(all(&unknown) && unknown.hidden.iter().all(|h| h.reason == "mandate.unknown"));
    let malformed = visible_tools(&program(), b"{");
    assert!(all(&malformed) && malformed.hidden.iter().all(|h| h.reason == "request.malformed"));
    // `action` is not read when listing, even when it is malformed.
    let with_action =
        br#"{"subject":{"id":"agent:web"},"action":7,"context":{"mandate":"site","now":"2026-11-30T12:00:00Z"}}"#;
    assert_eq!(visible_tools(&program(), with_action).visible, ["publish"]);
}
