//! Tool listing: which tools a gateway should show an agent before any call is made (e.g. to filter an MCP
//! `tools/list`). The request carries the subject and context; `action` is not read. A tool is hidden only when
//! every call to it would be denied whatever its arguments, with the first such reason; anything that depends on
//! the call (gates, facts, budgets, operation ids, limits) is left to [`decide`](super::decide), which stays the
//! authority: a visible tool may still be denied.

use super::cond::{self, Env};
use super::decision::{write_list, write_rule, write_strings, DecidingRule};
use super::digest::write_string;
use super::err;
use super::request::{self, Need, Request};
use super::{deciding_rule, lacks_scope, level_exceeded, otherwise_text, sorted_rules, stopped, window_of};
use crate::ir::{Mandate, Program, RuleKind, ToolId};

/// The tools of a program split into visible and hidden, each sorted by tool name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visibility {
    pub visible: Vec<String>,
    pub hidden: Vec<HiddenTool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenTool {
    pub tool: String,
    /// A reason code (docs/requests.md).
    pub reason: String,
    /// The clause behind the reason, when there is one.
    pub rule: Option<DecidingRule>,
}

impl Visibility {
    /// Compact JSON on one line: `{"visible":[…],"hidden":[{"tool":…,"reason":…,"rule":{…}}]}`; `rule` is left
    /// out when there is none.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"visible\":");
        write_strings(&mut out, &self.visible);
        out.push_str(",\"hidden\":");
        write_list(&mut out, &self.hidden, |hidden, out| {
            out.push_str("{\"tool\":");
            write_string(out, &hidden.tool);
            out.push_str(",\"reason\":");
            write_string(out, &hidden.reason);
            if let Some(rule) = &hidden.rule {
                out.push_str(",\"rule\":");
                write_rule(rule, out);
            }
            out.push('}');
        });
        out.push('}');
        out
    }
}

/// Lists the program's tools for the request's subject and context. Never panics on any `request` bytes.
pub fn visible_tools(program: &Program, request: &[u8]) -> Visibility {
    let hide_all = |reason: &str| Visibility {
        visible: Vec::new(),
        hidden: program
            .tool_index
            .keys()
            .map(|tool| HiddenTool { tool: tool.clone(), reason: reason.to_string(), rule: None })
            .collect(),
    };
    let req = match request::parse(request, Need::Listing) {
        Ok(req) => req,
        Err(error) => {
            // `request.malformed` sorts first, so it wins when both apply.
            let reason = error.codes().into_iter().next().unwrap_or_else(|| err::REQUEST_MALFORMED.to_string());
            return hide_all(&reason);
        }
    };
    let under = match super::resolve(program, &req) {
        Ok(under) => under,
        Err(decision) => return hide_all(decision.reasons.first().map_or(err::MANDATE_UNKNOWN, String::as_str)),
    };
    let chain = match super::Chain::of(program, &req, &under) {
        Ok(chain) => chain,
        Err(decision) => return hide_all(decision.reasons.first().map_or(err::SUBJECT_NOT_HOLDER, String::as_str)),
    };
    if chain.invalid.is_some() {
        return hide_all(err::GRANT_INVALID);
    }
    if !chain.holds(&req.subject_id) {
        return hide_all(err::SUBJECT_NOT_HOLDER);
    }
    let instances = chain.instances.as_slice();
    let chain = chain.mandates();
    let mut visibility = Visibility { visible: Vec::new(), hidden: Vec::new() };
    // `tool_index` is a BTreeMap: iteration is in name order.
    for (name, &tool) in &program.tool_index {
        match hidden_because(program, &req, &chain, instances, tool) {
            None => visibility.visible.push(name.clone()),
            Some((reason, rule)) => {
                visibility.hidden.push(HiddenTool { tool: name.clone(), reason: reason.to_string(), rule })
            }
        }
    }
    visibility
}

/// The first reason, in the documented order, that denies every call to `tool`.
fn hidden_because(
    program: &Program,
    req: &Request,
    chain: &[&Mandate],
    instances: &[super::instance::Instance],
    tool_id: ToolId,
) -> Option<(&'static str, Option<DecidingRule>)> {
    let tool = &program.tools[tool_id];
    if tool.administers_mandates {
        return Some((err::SELF_MODIFICATION, None));
    }
    if lacks_scope(tool, req) {
        return Some((err::SCOPE_MISSING, None));
    }
    let mandates = || chain.iter().copied();
    // Among several clauses giving the same reason, report the one a decision would list first.
    let first = |rules: Vec<DecidingRule>| sorted_rules(rules).into_iter().next();
    let windows: Vec<_> = (0..chain.len()).filter_map(|i| window_of(program, chain, i, instances, req.now)).collect();
    for code in [err::NOT_YET_VALID, err::EXPIRED] {
        let rules = windows.iter().filter(|(c, _)| *c == code).map(|(_, r)| r.clone()).collect();
        if let Some(rule) = first(rules) {
            return Some((code, Some(rule)));
        }
    }
    let above = |i: usize| i.checked_sub(1).map(|p| chain[p]);
    let stops = mandates().enumerate().filter_map(|(i, m)| stopped(program, m, above(i), req, tool, true));
    if let Some(rule) = first(stops.collect()) {
        return Some((err::STOP_ACTIVE, Some(rule)));
    }
    if let Some(rule) = first(mandates().filter_map(|m| level_exceeded(program, m, tool)).collect()) {
        return Some((err::LEVEL_EXCEEDED, Some(rule)));
    }

    let principal = chain.first().map_or("", |root| root.principal.as_str());
    let mut forbidding = Vec::new();
    let mut unmatched = Vec::new();
    for (position, mandate) in mandates().enumerate() {
        let (instance, parent) = super::instance_at(chain.len(), instances, position);
        let env = Env { program, request: req, tool: tool_id, listing: true, principal, instance, parent };
        let mut may_grant = false;
        for rule in mandate.rules.iter().filter(|r| program.covers(&r.target, tool_id)) {
            match rule.kind {
                // Matches (or fails, which also forbids) whatever the arguments.
                RuleKind::Forbid if !cond::possible(&rule.condition, &env).can_be_false() => {
                    forbidding.push(deciding_rule(program, mandate, &rule.label, rule.span));
                }
                RuleKind::Allow if cond::possible(&rule.condition, &env).can_be_true() => may_grant = true,
                _ => {}
            }
        }
        if !may_grant {
            let text = otherwise_text(mandate.otherwise);
            unmatched.push(deciding_rule(program, mandate, text, mandate.otherwise_span));
        }
    }
    if let Some(rule) = first(forbidding) {
        return Some((err::FORBIDDEN, Some(rule)));
    }
    first(unmatched).map(|rule| (err::UNMATCHED, Some(rule)))
}
