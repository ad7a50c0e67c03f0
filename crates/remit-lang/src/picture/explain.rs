//! `remit explain`: one decision drawn as the path it took. The decision itself comes from the interpreter
//! ([`crate::eval::decide`]) and each rule's value from [`crate::eval::trace`]; this module only arranges them —
//! the chain, every rule of the called tool with its condition, the request's values of the attributes the
//! condition reads, what the rule did, and which gates lacked an approval. It never decides anything itself.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::Value as Json;

use super::svg::xml;
use crate::eval::grants::GrantInstance;
use crate::eval::{decide, trace, Decision, Outcome, RuleTrace};
use crate::ir::{Attr, Cond, Program, RuleKind};
use crate::syntax::ast::Outcome as Otherwise;

#[derive(Debug, Clone)]
pub struct Explanation {
    pub decision: Decision,
    /// `tool(arguments) on resource by subject under mandate at now`, as far as the request says.
    pub call: String,
    /// Findings about the call itself, before any mandate's rules (the credential, the tool, the mandate).
    pub preliminary: Vec<String>,
    pub mandates: Vec<MandateStep>,
    /// What the caller adds about where the request came from (the gateway: the access request, the log entry,
    /// masked arguments); shown above the path.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct MandateStep {
    pub name: String,
    pub principal: String,
    pub steps: Vec<RuleStep>,
    /// Mandate terms (window, stop, level, `otherwise`) that took part in the decision.
    pub terms: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct RuleStep {
    /// The clause as written.
    pub text: String,
    pub at: String,
    pub verdict: Verdict,
    /// What the rule did, in words.
    pub effect: String,
    /// `attribute = value` for each attribute the condition (or the rule) reads.
    pub values: Vec<String>,
    /// Whether the decision lists this rule among those that decided.
    pub decided: bool,
}

/// How a rule came out, for its mark and colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It let the call through (a grant matched, a bound held, a gate was satisfied).
    Passed,
    /// It did not apply to this call.
    Idle,
    /// It refused the call.
    Refused,
    /// It sent the call to a human.
    Escalated,
}

impl Verdict {
    fn mark(self) -> &'static str {
        match self {
            Verdict::Passed => "✓",
            Verdict::Idle => "·",
            Verdict::Refused => "✗",
            Verdict::Escalated => "?",
        }
    }

    fn class(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Idle => "idle",
            Verdict::Refused => "refused",
            Verdict::Escalated => "escalated",
        }
    }
}

/// Explains the decision on `request`.
pub fn explain(program: &Program, request: &[u8]) -> Explanation {
    let decision = decide(program, request);
    let traces = trace(program, request);
    let json: Json = serde_json::from_slice(request).unwrap_or(Json::Null);
    let tool = json.pointer("/action/name").and_then(Json::as_str).and_then(|n| program.tool(n));
    let decided: BTreeSet<(&str, &str)> = decision.rules.iter().map(|r| (r.mandate.as_str(), r.at.as_str())).collect();
    let mut mandates = Vec::new();
    let mut traces = traces.into_iter();
    // The instance the request was decided under, if any: the chain's last name, `TEMPLATE/ID@VERSION`.
    let grant = decision.mandate_chain.last().and_then(|name| instance_grant(&json, name));
    for name in &decision.mandate_chain {
        // A mandate of the policy, or the instance (its template's rules, acting for the principal it names).
        let (rules, principal) = match (program.mandate(name), grant) {
            (Some(id), _) => (&program.mandates[id].rules, program.mandates[id].principal.clone()),
            (None, Some(grant)) => {
                let template = grant.get("template").and_then(Json::as_str).unwrap_or_default();
                let Some(t) = program.templates.iter().find(|t| t.name == template) else { continue };
                let principal = grant.get("principal").and_then(Json::as_str).unwrap_or_default();
                (&t.rules, principal.to_string())
            }
            (None, None) => continue,
        };
        let mut step = MandateStep { name: name.clone(), principal, steps: Vec::new(), terms: Vec::new() };
        let mut clause_locations = BTreeSet::new();
        if let Some(tool) = tool {
            // `trace` lists the rules of the chain that cover the tool in this same order.
            for rule in rules.iter().filter(|r| program.covers(&r.target, tool)) {
                let Some(t) = traces.next() else { break };
                let at = program.sources.location(rule.span);
                let is_decided = decided.contains(&(name.as_str(), at.as_str()));
                clause_locations.insert(at.clone());
                let (verdict, mut effect) = judge(program, &rule.kind, &t, &decision, name, &json);
                // The attribute a fail-closed rule could not read, as the decision names it.
                let listed = decision.rules.iter().find(|r| &r.mandate == name && r.at == at);
                if let Some(u) = listed.and_then(|r| r.unevaluable.as_ref()) {
                    effect.push_str(&format!(" (`{}` {})", u.attribute, u.problem));
                }
                step.steps.push(RuleStep {
                    text: program.sources.snippet(rule.span).split_whitespace().collect::<Vec<_>>().join(" "),
                    at,
                    verdict,
                    effect,
                    values: values(program, &rule.kind, &rule.condition, &json, grant, tool),
                    decided: is_decided,
                });
            }
        }
        for r in decision.rules.iter().filter(|r| &r.mandate == name && !clause_locations.contains(&r.at)) {
            step.terms.push(format!("{} ({}){}", r.rule, r.at, closest_text(r)));
        }
        mandates.push(step);
    }
    let preliminary = decision.reasons.iter().filter_map(|code| preliminary(program, code, tool)).collect();
    let resolved = decision.mandate_chain.last().map(String::as_str);
    Explanation { call: call_summary(&json, resolved), preliminary, decision, mandates, notes: Vec::new() }
}

/// The entry of `context.grants` whose name (`TEMPLATE/ID@VERSION`) is `name`.
fn instance_grant<'j>(json: &'j Json, name: &str) -> Option<&'j Json> {
    let grants = json.pointer("/context/grants")?.as_array()?;
    grants.iter().find(|g| GrantInstance::from_json(g).is_some_and(|g| g.name() == name))
}

/// For an `otherwise` the decision lists: the grant that came closest and what kept it from granting.
fn closest_text(rule: &crate::eval::DecidingRule) -> String {
    let Some(closest) = &rule.closest else { return String::new() };
    let why = match (&closest.failed, &closest.unevaluable) {
        (Some(f), _) => match &f.value {
            Some(value) => format!(": `{}` was `{value}`", f.condition),
            None => format!(": `{}` does not hold", f.condition),
        },
        (None, Some(u)) => format!(": `{}` {}", u.attribute, u.problem),
        (None, None) => String::new(),
    };
    format!("; the closest grant, `{}`{why}", closest.rule)
}

/// The sentence for a reason that is about the call as a whole rather than a rule.
fn preliminary(program: &Program, code: &str, tool: Option<usize>) -> Option<String> {
    let tool_name = tool.map_or("the tool".to_string(), |t| format!("`{}`", program.tools[t].name));
    Some(match code {
        "request.malformed" => "the request is not well-formed JSON of the documented shape".into(),
        "request.missing-field" => "the request lacks a required field".into(),
        "request.oversize" => "the request is larger than 256 KiB".into(),
        "tool.undeclared" => "the tool is not in the catalog: an undeclared tool is never allowed".into(),
        "mandate.unknown" => "`context.mandate` names no mandate of this policy".into(),
        "subject.not-holder" => "the subject does not hold the mandate".into(),
        "mandate.ambiguous" => {
            "the request names no mandate and its subject holds several (mandates or instances)".into()
        }
        "grant.invalid" => {
            "the instance the request names is not within its template (its rule names the bound)".into()
        }
        "mandate.self-modification" => format!("{tool_name} administers mandates: never grantable to an agent"),
        "credential.scope-missing" => {
            let scopes = tool.map(|t| program.tools[t].scopes.join("`, `")).unwrap_or_default();
            format!("the credential lacks every scope {tool_name} requires (one of `{scopes}`)")
        }
        _ => return None,
    })
}

fn judge(
    program: &Program,
    kind: &RuleKind,
    t: &RuleTrace,
    decision: &Decision,
    mandate: &str,
    json: &Json,
) -> (Verdict, String) {
    let refused_if = |code: &str| decision.reasons.iter().any(|r| r == code);
    match (kind, t.result) {
        (RuleKind::Allow, Some(true)) => (Verdict::Passed, "grants the call".into()),
        (RuleKind::Allow, Some(false)) => (Verdict::Idle, "does not match".into()),
        (RuleKind::Allow, None) => (Verdict::Idle, "cannot be evaluated, so it does not grant".into()),
        (RuleKind::Forbid, Some(true)) => (Verdict::Refused, "forbids the call".into()),
        (RuleKind::Forbid, Some(false)) => (Verdict::Idle, "does not apply".into()),
        (RuleKind::Forbid, None) => (Verdict::Refused, "cannot be evaluated, so it counts as matching".into()),
        (RuleKind::Limit | RuleKind::Scope, Some(true)) => (Verdict::Passed, "holds".into()),
        (RuleKind::Limit | RuleKind::Scope, Some(false)) => (Verdict::Refused, "is violated".into()),
        (RuleKind::Limit | RuleKind::Scope, None) => {
            (Verdict::Refused, "cannot be evaluated, so it counts as violated".into())
        }
        (RuleKind::Gate { .. }, Some(false)) => (Verdict::Idle, "does not apply".into()),
        (RuleKind::Gate { approval, on_missing }, result) => {
            let kind = &program.approvals[*approval].name;
            let why = if result.is_none() { "cannot be evaluated, so it applies; " } else { "applies; " };
            let presented: Vec<&str> = json
                .pointer("/context/approvals")
                .and_then(Json::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|x| x.get("kind").and_then(Json::as_str) == Some(kind))
                        .filter_map(|x| x.get("id").and_then(Json::as_str))
                        .collect()
                })
                .unwrap_or_default();
            let presented = if presented.is_empty() {
                format!("no `{kind}` approval was presented")
            } else {
                format!("presented `{kind}` approvals: {}", presented.join(", "))
            };
            // An `else deny` gate left unsatisfied is one of a deny's rules; an escalating one is a missing approval.
            let refused = *on_missing == Otherwise::Deny
                && decision.outcome == Outcome::Deny
                && decision.rules.iter().any(|r| r.mandate == mandate && r.rule == t.rule);
            if refused {
                (Verdict::Refused, format!("{why}no presented approval satisfies it, so it refuses ({presented})"))
            } else if let Some(missing) =
                decision.missing_approvals.iter().find(|m| &m.kind == kind && m.mandates.iter().any(|n| n == mandate))
            {
                let refused: Vec<String> =
                    missing.refused.iter().map(|r| format!("`{}` {}", r.id, r.refusal.why())).collect();
                let refused =
                    if refused.is_empty() { String::new() } else { format!("; refused: {}", refused.join(", ")) };
                (Verdict::Escalated, format!("{why}no presented approval satisfies it ({presented}{refused})"))
            } else if t.approval.is_some() {
                (Verdict::Passed, format!("{why}satisfied ({presented})"))
            } else {
                // A deny lists no missing approvals: the gate is unsatisfied all the same, and says so.
                (
                    Verdict::Escalated,
                    format!("{why}no presented approval satisfies it ({presented}); the call is denied anyway, so no approval is asked for"),
                )
            }
        }
        (RuleKind::RequireOperationId, _) if refused_if("operation.missing-id") => {
            (Verdict::Refused, "no operation id in the request".into())
        }
        (RuleKind::RequireOperationId, _) => (Verdict::Passed, "the call has an operation id".into()),
        (RuleKind::Fact { name, version, .. }, _) => {
            let current = json.pointer(&format!("/context/facts/{}", pointer_escape(name)));
            let shown = current.map_or("missing".to_string(), Json::to_string);
            if version.is_current(current) {
                (Verdict::Passed, format!("fact `{name}` is at version {version}"))
            } else if refused_if("fact.stale") && decision.outcome == Outcome::Deny {
                (Verdict::Refused, format!("fact `{name}` is {shown}, version {version} is current"))
            } else {
                (Verdict::Escalated, format!("fact `{name}` is {shown}, version {version} is current"))
            }
        }
        (RuleKind::Budget { name, max, .. }, _) => {
            let counter = json.pointer(&format!("/context/counters/{}", pointer_escape(name)));
            match counter.and_then(Json::as_u64) {
                Some(used) if used < *max => (Verdict::Passed, format!("budget `{name}`: {used} of {max} used")),
                Some(used) => (Verdict::Refused, format!("budget `{name}` is used up: {used} of {max}")),
                None => (Verdict::Refused, format!("counter `{name}` is missing, so the budget counts as used up")),
            }
        }
    }
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The request's value of each attribute a rule reads.
fn values(
    program: &Program,
    kind: &RuleKind,
    cond: &Cond,
    json: &Json,
    grant: Option<&Json>,
    tool: usize,
) -> Vec<String> {
    let mut attrs = BTreeSet::new();
    collect(cond, &mut attrs);
    let mut out: Vec<String> = attrs
        .into_iter()
        .map(|attr| {
            let value = match &attr {
                Attr::Level => Some(Json::String(program.levels[program.tools[tool].level].clone())),
                Attr::Relation(name, terms) => relation_answer(program, json, grant, name, terms),
                other => request_value(program, json, grant, other),
            };
            format!("{} = {}", attr.display(), value.map_or("(missing)".to_string(), |v| v.to_string()))
        })
        .collect();
    if matches!(kind, RuleKind::RequireOperationId) {
        let op = json.pointer("/context/operation_id").map_or("(missing)".to_string(), Json::to_string);
        out.push(format!("context.operation_id = {op}"));
    }
    out
}

fn collect(cond: &Cond, out: &mut BTreeSet<Attr>) {
    match cond {
        Cond::True | Cond::False => {}
        Cond::Atom(atom) => {
            // A comparison of two attributes shows both; a relation shows its terms and the tuple's answer.
            for attr in atom.attr.reads() {
                if !matches!(attr, Attr::Compare(..) | Attr::Member(..) | Attr::InCalendar(..) | Attr::Elapsed(..)) {
                    out.insert(attr.clone());
                }
            }
        }
        Cond::And(items) | Cond::Or(items) => items.iter().for_each(|c| collect(c, out)),
    }
}

/// What `context.relations` answers for a relation atom, with its terms read from the request.
fn relation_answer(
    program: &Program,
    json: &Json,
    grant: Option<&Json>,
    name: &str,
    terms: &[crate::ir::Term],
) -> Option<Json> {
    let mut values = Vec::new();
    for term in terms {
        match term {
            crate::ir::Term::Value(text) => values.push(Json::String(text.clone())),
            crate::ir::Term::Attr(attr) => values.push(request_value(program, json, grant, attr)?),
        }
    }
    let listed = json.pointer(&format!("/context/relations/{}", pointer_escape(name)))?.as_array()?;
    listed.iter().find(|item| item.get("args").and_then(Json::as_array) == Some(&values))?.get("holds").cloned()
}

/// The request's value of a plain attribute (not `level`, not derived).
/// The request's value of `attr`; a template's parameter from the instance decided under (`grant`).
fn request_value(program: &Program, json: &Json, grant: Option<&Json>, attr: &Attr) -> Option<Json> {
    match attr {
        Attr::Arg(name) => json.pointer(&format!("/action/arguments/{}", pointer_escape(name))).cloned(),
        Attr::ResourceId => json.pointer("/resource/id").cloned(),
        Attr::SubjectId => json.pointer("/subject/id").cloned(),
        Attr::SubjectScopes => json.pointer("/subject/credential/scopes").cloned(),
        Attr::Context(name) => json.pointer(&format!("/context/attributes/{}", pointer_escape(name))).cloned(),
        Attr::Now => json.pointer("/context/now").cloned(),
        Attr::Attempt => json.pointer("/context/attempt").cloned(),
        Attr::Subject(name) => json.pointer(&format!("/subject/properties/{}", pointer_escape(name))).cloned(),
        Attr::Resource(name) => json.pointer(&format!("/resource/properties/{}", pointer_escape(name))).cloned(),
        // Filed under the principal of the request's mandate (which the request names, not the principal).
        Attr::Principal(name) => {
            let mandate = json.pointer("/context/mandate").and_then(Json::as_str)?;
            let principal = &program.mandates[program.mandate(mandate)?].principal;
            json.pointer(&format!("/context/principals/{}/{}", pointer_escape(principal), pointer_escape(name)))
                .cloned()
        }
        Attr::Level
        | Attr::Compare(..)
        | Attr::Member(..)
        | Attr::Relation(..)
        | Attr::InCalendar(..)
        | Attr::Elapsed(..) => None,
        Attr::Param(name) => {
            let grant = grant?;
            match name.as_str() {
                "principal" | "holder" | "granted" => grant.get(name).cloned(),
                _ => grant.get("params")?.get(name).cloned(),
            }
        }
        // The parent instance's parameter: the entry of `context.grants` the instance's `parent` (`TEMPLATE/ID`)
        // names.
        Attr::ParentParam(name) => {
            let reference = grant?.get("parent")?.as_str()?;
            let (template, id) = reference.split_once('/')?;
            let grants = json.pointer("/context/grants")?.as_array()?;
            let parent = grants.iter().find(|g| {
                g.get("template").and_then(Json::as_str) == Some(template)
                    && g.get("id").and_then(Json::as_str) == Some(id)
            })?;
            parent.get("params")?.get(name).cloned()
        }
    }
}

/// `under` names the mandate the request names, else the one it was resolved to (the chain's leaf), else `?`.
fn call_summary(json: &Json, resolved: Option<&str>) -> String {
    let text = |p: &str| json.pointer(p).and_then(Json::as_str).unwrap_or("?").to_string();
    let arguments = json.pointer("/action/arguments").map_or("{}".to_string(), Json::to_string);
    let mut call = format!("{}{arguments}", text("/action/name"));
    if let Some(resource) = json.pointer("/resource/id").and_then(Json::as_str) {
        call.push_str(&format!(" on {resource}"));
    }
    call.push_str(&format!(
        " by {} under {} at {}",
        text("/subject/id"),
        json.pointer("/context/mandate").and_then(Json::as_str).or(resolved).unwrap_or("?"),
        text("/context/now")
    ));
    call
}

const RESET: &str = "\x1b[0m";

fn colour(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Passed => "\x1b[32m",
        Verdict::Idle => "\x1b[2m",
        Verdict::Refused => "\x1b[31m",
        Verdict::Escalated => "\x1b[33m",
    }
}

fn outcome_verdict(outcome: Outcome) -> Verdict {
    match outcome {
        Outcome::Allow => Verdict::Passed,
        Outcome::Deny => Verdict::Refused,
        Outcome::Escalate => Verdict::Escalated,
    }
}

/// The explanation for a terminal; `ansi` adds colours (the marks carry the same meaning without them).
pub fn text(e: &Explanation, ansi: bool) -> String {
    let paint = |v: Verdict, s: &str| if ansi { format!("{}{s}{RESET}", colour(v)) } else { s.to_string() };
    let bold = |s: &str| if ansi { format!("\x1b[1m{s}{RESET}") } else { s.to_string() };
    let d = &e.decision;
    let mut out = String::new();
    let mut headline = d.outcome.as_str().to_uppercase();
    if let Some(to) = &d.escalate_to {
        headline.push_str(&format!(" to {to}"));
    }
    let _ = writeln!(out, "{} {}", bold("decision"), paint(outcome_verdict(d.outcome), &headline));
    let _ = writeln!(out, "{} {}", bold("reasons "), d.reasons.join(", "));
    let _ = writeln!(out, "{} {}", bold("call    "), e.call);
    if !d.mandate_chain.is_empty() {
        let _ = writeln!(out, "{} {}", bold("chain   "), d.mandate_chain.join(" → "));
    }
    let _ = writeln!(out, "{} {}", bold("policy  "), d.policy);
    for note in &e.notes {
        let _ = writeln!(out, "{} {note}", bold("note    "));
    }
    for p in &e.preliminary {
        let v = outcome_verdict(d.outcome);
        let _ = writeln!(out, "\n  {} {p}", paint(v, v.mark()));
    }
    for m in &e.mandates {
        let _ = writeln!(out, "\n{} (for {})", bold(&m.name), m.principal);
        for term in &m.terms {
            let v = outcome_verdict(d.outcome);
            let _ = writeln!(out, "  {} {term}", paint(v, v.mark()));
        }
        if m.steps.is_empty() {
            let _ = writeln!(out, "  {} no rule of this mandate covers the tool", paint(Verdict::Idle, "·"));
        }
        for s in &m.steps {
            let star = if s.decided { " *" } else { "" };
            let _ = writeln!(out, "  {} {}{star}", paint(s.verdict, s.verdict.mark()), s.text);
            let _ = writeln!(out, "      {} — {}", paint(s.verdict, &s.effect), s.at);
            for v in &s.values {
                let _ = writeln!(out, "      {v}");
            }
        }
    }
    if !d.missing_approvals.is_empty() {
        let _ = writeln!(out, "\n{}", bold("missing approvals"));
        for m in &d.missing_approvals {
            let _ = writeln!(out, "  {} under {}: {}", m.kind, m.mandate, bindings(m));
        }
    }
    if !d.obligations.is_empty() {
        let _ = writeln!(out, "\n{}", bold("obligations"));
        for o in &d.obligations {
            let _ = writeln!(out, "  {}", o.to_json());
        }
    }
    out.push_str("\n* = listed among the rules that decided\n");
    out
}

fn bindings(m: &crate::eval::MissingApproval) -> String {
    let parts: Vec<String> =
        [("tool", &m.tool), ("target", &m.target), ("digest", &m.digest), ("manifest", &m.manifest)]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} = {v}")))
            .collect();
    if parts.is_empty() {
        "no binding".into()
    } else {
        parts.join(", ")
    }
}

/// The explanation as a self-contained HTML page (inline styles, no scripts).
pub fn html(e: &Explanation) -> String {
    let d = &e.decision;
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>remit explain</title>\n<style>\
         body{font-family:system-ui,sans-serif;margin:2em;color:#263238}code,pre,.rule{font-family:ui-monospace,monospace}\
         .outcome{font-size:1.4em;font-weight:bold;padding:.2em .6em;border-radius:4px}\
         .allow{background:#e3f4e1;color:#1b5e20}.deny{background:#fde0dc;color:#b71c1c}.escalate{background:#fff3cd;color:#8a6d00}\
         .mandate{border:1px solid #b0bec5;border-radius:6px;margin:1em 0;padding:.5em 1em}\
         .step{margin:.4em 0;padding:.3em .6em;border-left:4px solid #cfd8dc}\
         .passed{border-color:#2e7d32}.refused{border-color:#c62828;background:#fff5f4}.escalated{border-color:#f9a825;background:#fffbea}\
         .idle{color:#78909c}.values{color:#455a64;font-size:.9em}.decided{font-weight:bold}\
         </style></head><body>\n",
    );
    let mut headline = d.outcome.as_str().to_string();
    if let Some(to) = &d.escalate_to {
        headline.push_str(&format!(" to {to}"));
    }
    let _ = writeln!(out, "<h1>remit explain</h1>");
    let _ =
        writeln!(out, "<p><span class=\"outcome {}\" id=\"outcome\">{}</span></p>", d.outcome.as_str(), xml(&headline));
    let _ = writeln!(out, "<p>reasons: <code id=\"reasons\">{}</code></p>", xml(&d.reasons.join(", ")));
    let _ = writeln!(out, "<p>call: <code>{}</code></p>", xml(&e.call));
    let _ = writeln!(out, "<p>chain: {}</p>", xml(&d.mandate_chain.join(" → ")));
    let _ = writeln!(out, "<p>policy: <code>{}</code></p>", xml(&d.policy));
    if !e.notes.is_empty() {
        out.push_str("<ul class=\"notes\">\n");
        for note in &e.notes {
            let _ = writeln!(out, "<li>{}</li>", xml(note));
        }
        out.push_str("</ul>\n");
    }
    for p in &e.preliminary {
        let _ = writeln!(out, "<div class=\"step {}\">{}</div>", outcome_verdict(d.outcome).class(), xml(p));
    }
    for m in &e.mandates {
        let _ = writeln!(
            out,
            "<div class=\"mandate\" data-mandate=\"{}\"><h2>{} <small>for {}</small></h2>",
            xml(&m.name),
            xml(&m.name),
            xml(&m.principal)
        );
        for term in &m.terms {
            let _ = writeln!(out, "<div class=\"step {}\">{}</div>", outcome_verdict(d.outcome).class(), xml(term));
        }
        for s in &m.steps {
            let decided = if s.decided { " decided" } else { "" };
            let _ = writeln!(
                out,
                "<div class=\"step {}{decided}\"><span class=\"mark\">{}</span> <span class=\"rule\">{}</span><br>\
                 <span class=\"effect\">{}</span> <small>{}</small>",
                s.verdict.class(),
                s.verdict.mark(),
                xml(&s.text),
                xml(&s.effect),
                xml(&s.at)
            );
            for v in &s.values {
                let _ = writeln!(out, "<div class=\"values\"><code>{}</code></div>", xml(v));
            }
            out.push_str("</div>\n");
        }
        out.push_str("</div>\n");
    }
    if !d.missing_approvals.is_empty() {
        out.push_str("<h2>missing approvals</h2><ul>\n");
        for m in &d.missing_approvals {
            let _ = writeln!(
                out,
                "<li class=\"missing\">{} under {}: <code>{}</code></li>",
                xml(&m.kind),
                xml(&m.mandate),
                xml(&bindings(m))
            );
        }
        out.push_str("</ul>\n");
    }
    if !d.obligations.is_empty() {
        out.push_str("<h2>obligations</h2><ul>\n");
        for o in &d.obligations {
            let _ = writeln!(out, "<li><code>{}</code></li>", xml(&o.to_json()));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body></html>\n");
    out
}
