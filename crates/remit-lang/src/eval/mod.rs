//! The reference interpreter: decides a request (docs/requests.md) against a checked [`Program`]. It is the
//! executable definition of the semantics the wasm backend must reproduce byte for byte, so it is written for
//! clarity and determinism: no IO, no clock, no panics on request data, and every list in a decision sorted so the
//! order of rules and files never shows.
//!
//! Resolution stops early only for the tool, the mandate and the holder; after that every mandate of the chain is
//! examined in full and the decision collects every reason: any deny reason denies, else any escalate reason
//! escalates, else the call is allowed.

pub(crate) mod cond;
mod decision;
mod digest;
mod err;
pub mod grants;
mod instance;
mod request;
mod visible;

use serde_json::{Map, Value as Json};

pub use decision::{
    DecidingRule, Decision, Failed, MissingApproval, Obligation, Outcome, Refusal, RefusedApproval, RequestField,
    Unevaluable, UsedApproval,
};
pub use digest::argument_digest;
pub use visible::{visible_tools, HiddenTool, Visibility};
// The wasm backend writes the same JSON, so it shares the writers.
pub(crate) use cond::atom_text;
pub(crate) use cond::unsafe_path;
pub(crate) use decision::write_rule as write_deciding_rule;
pub(crate) use decision::write_strings as write_json_strings;
pub(crate) use digest::write_string as write_json_string;

use crate::ir::{
    ApprovalKind, Binding, Mandate, MandateId, Parent, Program, RuleKind, Template, TemplateId, Tool, ToolId,
};
use crate::source::Span;
use crate::syntax::ast::Outcome as Otherwise;
use crate::value::{format_instant, format_timestamp, NANOS_PER_SECOND};
use cond::Env;
use grants::GrantInstance;
use request::{Call, Need, Request, Stop, StopLevel, StopOn};

/// Decides one request. Never panics on any `request` bytes.
pub fn decide(program: &Program, request: &[u8]) -> Decision {
    let policy = program.hash.as_str();
    let req = match request::parse(request, Need::Call) {
        Ok(req) => req,
        Err(error) => {
            let mut decision = Decision::deny(error.codes(), policy);
            decision.fields =
                error.fields().into_iter().map(|(field, problem)| RequestField { field, problem }).collect();
            return decision;
        }
    };
    let mut decision = decide_request(program, &req);
    // Every decision on a request that could be read names its credential, the early denies too.
    decision.credential = req.credential_id.clone();
    // A decision that would not fit the module's output area is a deny of its own (never truncated JSON). With
    // the area sized by `output_limit` this happens only for policies past `MAX_OUTPUT`.
    let size = decision.to_json().len();
    if size > MIN_OUTPUT && size > output_limit(program) {
        let mut oversize = Decision::deny(vec![err::DECISION_OVERSIZE.into()], policy);
        oversize.mandate_chain = std::mem::take(&mut decision.mandate_chain);
        oversize.credential = decision.credential;
        decision = oversize;
    }
    decision
}

fn decide_request(program: &Program, req: &Request) -> Decision {
    let policy = program.hash.as_str();
    let Some(call) = req.call.as_ref() else {
        return Decision::deny(vec![err::REQUEST_MISSING_FIELD.into()], policy);
    };
    let Some(tool) = program.tool(&call.name) else {
        return Decision::deny(vec![err::TOOL_UNDECLARED.into()], policy);
    };
    let under = match resolve(program, req) {
        Ok(under) => under,
        Err(decision) => return *decision,
    };
    let chain = match Chain::of(program, req, &under) {
        Ok(chain) => chain,
        Err(decision) => return *decision,
    };
    let mandates = chain.mandates();
    let mut decision = match &chain.invalid {
        Some(denied) => (**denied).clone(),
        None if chain.holds(&req.subject_id) => {
            let mut tally = Tally::default();
            tally.examine(program, req, call, tool, &mandates, &chain.instances);
            tally.into_decision(program, req, tool, &mandates)
        }
        None => Decision::deny(vec![err::SUBJECT_NOT_HOLDER.into()], policy),
    };
    decision.mandate_chain = mandates.iter().map(|m| m.name.clone()).collect();
    decision
}

/// What a request is decided under: a mandate of the policy, or an instance of a template from `context.grants`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Under<'r> {
    Mandate(MandateId),
    Instance(TemplateId, &'r GrantInstance),
}

/// Which mandate or instance the request is decided under (docs/requests.md "Mandates granted at run time").
/// `context.mandate` names a mandate, or an instance as `TEMPLATE/ID` (or `TEMPLATE/ID@VERSION`) among
/// `context.grants`: another name is `mandate.unknown`, two instances with the name `mandate.ambiguous`. A request
/// that names none (allowed only with `context.grants`) is decided under the one mandate its subject holds or the
/// one instance of `context.grants` that names it as holder (of a template of the policy; valid or not, so an
/// instance that fails its check is decided `grant.invalid`, never passed over): none is the missing field
/// `context.mandate`, several `mandate.ambiguous`. The mandates an instance hangs under (its template's parent and
/// that one's ancestors) are its ceiling and do not count as held beside it: a parent held by a pattern
/// (`holder under "agent:"`) would otherwise make every instance's holder ambiguous.
pub(crate) fn resolve<'r>(program: &Program, req: &'r Request) -> Result<Under<'r>, Box<Decision>> {
    let policy = program.hash.as_str();
    let grants = req.grants.as_deref().unwrap_or(&[]);
    let known = |g: &&GrantInstance| program.template_index.contains_key(&g.template);
    let deny = |code: &str| Box::new(Decision::deny(vec![code.into()], policy));
    // `Err(true)`: several.
    let one = |mut found: Vec<Under<'r>>| match found.len() {
        0 => Err(false),
        1 => Ok(found.remove(0)),
        _ => Err(true),
    };
    match req.mandate.as_deref() {
        Some(name) => {
            if let Some(id) = program.mandate(name) {
                return Ok(Under::Mandate(id));
            }
            let named = grants.iter().filter(known).filter(|g| g.reference() == name || g.name() == name);
            one(named.map(|g| Under::Instance(program.template_index[&g.template], g)).collect())
                .map_err(|several| deny(if several { err::MANDATE_AMBIGUOUS } else { err::MANDATE_UNKNOWN }))
        }
        None => {
            let subject = req.subject_id.as_str();
            let instances: Vec<&GrantInstance> = grants.iter().filter(known).filter(|g| g.holder == subject).collect();
            // The mandates an instance hangs under are its ceiling, not a second mandate of its holder's.
            let shadowed: Vec<MandateId> = instances
                .iter()
                .filter_map(|g| ceiling(program, program.template_index[&g.template]).map(|m| program.chain(m)))
                .flatten()
                .collect();
            let statics = (0..program.mandates.len())
                .filter(|m| !shadowed.contains(m))
                .filter(|&m| is_holder(&program.mandates[m], subject));
            let found = statics
                .map(Under::Mandate)
                .chain(instances.into_iter().map(|g| Under::Instance(program.template_index[&g.template], g)))
                .collect();
            one(found).map_err(|several| {
                if several {
                    return deny(err::MANDATE_AMBIGUOUS);
                }
                let mut decision = deny(err::REQUEST_MISSING_FIELD);
                decision.fields = vec![RequestField { field: "context.mandate", problem: "missing" }];
                decision
            })
        }
    }
}

/// The mandate a template's instances hang under at the top: its parent, or for a template under a template
/// (sub-delegation) the parent of the topmost template above it. `None` only for a malformed program.
pub(crate) fn ceiling(program: &Program, template: TemplateId) -> Option<MandateId> {
    let mut current = template;
    for _ in 0..=program.templates.len() {
        match program.templates.get(current)?.parent {
            Parent::Mandate(m) => return Some(m),
            Parent::Template(t) => current = t,
        }
    }
    None
}

/// The mandates a request is decided under, root first: the policy's, and for an instance the mandates made of its
/// template and values (named `TEMPLATE/ID@VERSION`) last: the instances it hangs under (sub-delegation) first, under
/// the chain of the topmost template's parent.
pub(crate) struct Chain<'p> {
    statics: Vec<&'p Mandate>,
    /// The mandates of the instances, root first: those found of the request's instance's lineage (all of them
    /// unless a link is broken, `grants::Lineage`), the request's instance last.
    instance_mandates: Vec<Mandate>,
    /// The checked instances, parallel to `instance_mandates` (empty unless the request's instance passed its check).
    pub instances: Vec<instance::Instance>,
    /// The decision when the instance fails its check (`grant.invalid`).
    pub invalid: Option<Box<Decision>>,
}

/// The instance of the chain's mandate at `position`, and the instance above it (its parent instance), when the
/// chain ends with the checked `instances`.
pub(crate) fn instance_at(
    chain_len: usize,
    instances: &[instance::Instance],
    position: usize,
) -> (Option<&instance::Instance>, Option<&instance::Instance>) {
    let first = chain_len.saturating_sub(instances.len());
    match position.checked_sub(first) {
        Some(i) => (instances.get(i), i.checked_sub(1).and_then(|p| instances.get(p))),
        None => (None, None),
    }
}

impl<'p> Chain<'p> {
    /// The chain for `under`. An instance whose holder is not the subject is `subject.not-holder` (before its check,
    /// as for any mandate); one that fails its check ([`grants::check_lineage`], the instances it hangs under
    /// included) carries its `grant.invalid` decision, whose rule names the instance that fails.
    pub(crate) fn of(program: &'p Program, req: &Request, under: &Under) -> Result<Chain<'p>, Box<Decision>> {
        let policy = program.hash.as_str();
        let (template_id, grant) = match *under {
            Under::Mandate(leaf) => {
                let statics = program.chain(leaf).into_iter().map(|m| &program.mandates[m]).collect();
                return Ok(Chain { statics, instance_mandates: Vec::new(), instances: Vec::new(), invalid: None });
            }
            Under::Instance(template, grant) => (template, grant),
        };
        let statics: Vec<&Mandate> = match ceiling(program, template_id) {
            Some(top) => program.chain(top).into_iter().map(|m| &program.mandates[m]).collect(),
            None => Vec::new(),
        };
        let lineage = grants::lineage(program, template_id, grant, req.grants.as_deref().unwrap_or(&[]));
        let instance_mandates =
            lineage.links.iter().map(|&(t, g)| Chain::instance_mandate(&program.templates[t], g)).collect();
        let mut chain = Chain { statics, instance_mandates, instances: Vec::new(), invalid: None };
        if grant.holder != req.subject_id {
            let mut decision = Decision::deny(vec![err::SUBJECT_NOT_HOLDER.into()], policy);
            decision.mandate_chain = chain.mandates().iter().map(|m| m.name.clone()).collect();
            return Err(Box::new(decision));
        }
        match grants::check_lineage(program, &lineage) {
            Ok(instances) => chain.instances = instances,
            Err((level, refusal)) => {
                let template = &program.templates[lineage.links[level].0];
                // A parameter's refusal is at its declaration, the window's at the window's clause, any other at
                // the template's name (the runtime's twin: `remit_rt::grants`' refusals' `at`).
                let span = match refusal.field.as_str() {
                    "valid" => template.valid_span,
                    field => field
                        .strip_prefix("params.")
                        .and_then(|name| template.param(name))
                        .map_or(template.span, |p| p.span),
                };
                let rule = DecidingRule {
                    failed: Some(Failed {
                        condition: refusal.condition.clone(),
                        attribute: refusal.field.clone(),
                        value: refusal.value.clone(),
                    }),
                    ..deciding_rule(program, &chain.instance_mandates[level], &refusal.condition, span)
                };
                let mut decision = Decision::deny(vec![err::GRANT_INVALID.into()], policy);
                decision.rules = vec![rule];
                chain.invalid = Some(Box::new(decision));
            }
        }
        Ok(chain)
    }

    /// The mandate an instance decides as: the template's rules and clauses, named `TEMPLATE/ID@VERSION`, held by
    /// the instance's holder, acting for the principal it names (not its root's: the chain acts for its leaf's
    /// principal, [`acting_principal`]).
    fn instance_mandate(template: &Template, grant: &GrantInstance) -> Mandate {
        Mandate {
            name: grant.name(),
            principal: grant.principal.clone(),
            parent: match template.parent {
                Parent::Mandate(parent) => Some(parent),
                Parent::Template(_) => None,
            },
            holders: vec![grant.holder.clone()],
            holder_prefixes: Vec::new(),
            purpose: template.purpose.clone(),
            valid_from: None,
            valid_until: None,
            max_level: template.max_level,
            otherwise: template.otherwise,
            delegation_depth: template.delegation_depth,
            rules: template.rules.clone(),
            span: template.span,
            valid_span: template.valid_span,
            max_level_span: template.max_level_span,
            otherwise_span: template.otherwise_span,
            depth_span: template.depth_span,
        }
    }

    /// The mandate every instance of `template` decides as, named as the template and held by no one: what the
    /// policy image stores (`remit_rt::image::MANDATE_TEMPLATE`), where a decision names the instance instead and
    /// the instance's holder holds it.
    pub(crate) fn template_mandate(program: &Program, template: &Template) -> Mandate {
        let id = program.template_index.get(&template.name).copied();
        let root = id.and_then(|t| ceiling(program, t)).map(|m| &program.mandates[program.chain(m)[0]]);
        let shape = GrantInstance {
            id: String::new(),
            version: 0,
            template: template.name.clone(),
            principal: String::new(),
            holder: String::new(),
            params: Map::new(),
            granted: String::new(),
            parent: None,
        };
        // The record carries its ceiling's principal; a decision reads the instance's own from the request.
        let principal = root.map_or(String::new(), |root| root.principal.clone());
        Mandate {
            name: template.name.clone(),
            principal,
            holders: Vec::new(),
            ..Chain::instance_mandate(template, &shape)
        }
    }

    pub(crate) fn mandates(&self) -> Vec<&Mandate> {
        let mut all = self.statics.clone();
        all.extend(self.instance_mandates.iter());
        all
    }

    /// Whether `subject` holds the chain's leaf.
    pub(crate) fn holds(&self, subject: &str) -> bool {
        self.mandates().last().is_some_and(|leaf| is_holder(leaf, subject))
    }
}

/// Whether `subject` holds `mandate`: one of its ids, or under one of its `holder under` prefixes with `under`'s
/// meaning (docs/language.md): a subject id that could leave the prefix once normalised (a `.` or `..` segment, `//`,
/// a backslash, an escaped separator, …) is under nothing, so it holds no mandate by pattern.
pub fn is_holder(mandate: &crate::ir::Mandate, subject: &str) -> bool {
    holds(&mandate.holders, &mandate.holder_prefixes, subject)
}

/// [`is_holder`] on the two lists (the gateway's metadata keeps them apart from the program).
pub fn holds(ids: &[String], prefixes: &[String], subject: &str) -> bool {
    ids.iter().any(|id| id == subject)
        || (!prefixes.is_empty()
            && !cond::unsafe_path(subject)
            && prefixes.iter().any(|p| subject.starts_with(p.as_str())))
}

/// The principal a chain acts for: its leaf's. A static sub-mandate's is its root's (the checker copies it into
/// every mandate of a chain); an instance of a template acts for the principal it names, not for its ceiling's —
/// its escalations go to her, she is the `principal` of an `approved by principal` gate, and a stop on her reaches
/// it.
pub(crate) fn acting_principal<'m>(chain: &[&'m Mandate]) -> &'m str {
    chain.last().map_or("", |leaf| leaf.principal.as_str())
}

/// The principal whose attributes `principal.NAME` reads: the chain's root's, under an instance too (the gateway
/// fills the attributes of the principals of the policy's mandates; a template cannot read `principal.NAME`,
/// `remit::template-principal-attribute`).
fn root_principal<'m>(chain: &[&'m Mandate]) -> &'m str {
    chain.first().map_or("", |root| root.principal.as_str())
}

/// Whether `identity` may grant an approval kind with these approvers in a chain whose principal is
/// `chain_principal` (the kind's `approvers`, or the principal when the kind says `principal`). Here, not in the
/// IR: `holds` is the interpreter's meaning of `under`.
pub fn admits(principal: bool, ids: &[String], prefixes: &[String], identity: &str, chain_principal: &str) -> bool {
    (principal && identity == chain_principal) || holds(ids, prefixes, identity)
}

/// The smallest and the largest output area of a decision module (bytes; whole 64 KiB pages).
pub const MIN_OUTPUT: usize = 1 << 20;
pub const MAX_OUTPUT: usize = 16 << 20;

/// The most bytes any decision or tool listing of `program` can take, rounded up to whole 64 KiB pages and kept
/// within [`MIN_OUTPUT`, `MAX_OUTPUT`]: the size of the module's output area, and the size past which the
/// interpreter answers `decision.oversize` as the module does.
///
/// Why it is a bound: everything a decision writes is static text of the policy (reasons, deciding rules,
/// missing-approval kinds, mandates, counters, the policy hash), counted here in full for every mandate, except strings
/// of the request. Those are the resource id and `args.manifest`, written once per missing approval that binds them,
/// the approval ids and operation id of an allow, the stop ids of a deny (one stop per mandate of the chain, each stop
/// object reaching one mandate of it: its `mandate`, or the root for a `principal`), and the credential id. Each is
/// written escaped no longer than its text in the request (an escape is never longer than the escape or character it
/// stands for), and distinct values are distinct parts of a request of at most `MAX_INPUT` bytes. So one `MAX_INPUT`
/// per missing approval that may carry a request string, plus one for the ids (an allow's or a deny's, never both, and
/// the credential's), bounds them; a stop's entry around its id (`stop  (quarantine)`) is counted with each mandate's
/// clauses. The `refused` lists of missing approvals add one more: an entry names a distinct presented approval
/// (missing approvals are one per kind, an approval has one kind, and repeats of an id are written once) and is shorter
/// than that approval's JSON (an entry is its id and at most 57 bytes; a usable approval is its id and more than 100:
/// its keys, kind, mandate and two 20-character timestamps). An allow's `approvals` add one more: the id and
/// `approved_by` of each approval that satisfied a gate, written once per id (the ids are written a second time there,
/// hence a `MAX_INPUT` of its own). The closest grant an unmatched mandate's `otherwise` names carries the request's
/// value of the attribute its false atom reads, as canonical JSON: no longer than its text in the request (a value that
/// decoded as its type has no exponent, whitespace goes, escapes only shrink); one per mandate of the chain, so one
/// `MAX_INPUT` per mandate of the longest chain bounds them. A listing writes only static text (a stop by its level:
/// `stop (LEVEL)`).
pub fn output_limit(program: &Program) -> usize {
    let input = crate::json::MAX_INPUT;
    let json_len = |s: &str| {
        let mut out = String::new();
        write_json_string(&mut out, s);
        out.len()
    };
    let entry_len = |mandate: &Mandate, text: &str, span: Span| {
        let mut out = String::new();
        write_deciding_rule(&deciding_rule(program, mandate, text, span), &mut out);
        out.len() + 1
    };
    // Keys, every reason code, the policy hash, `null`s and separators.
    let mut fixed = 2048 + json_len(&program.hash);
    let longest_tool = program.tools.iter().map(|t| json_len(&t.name)).max().unwrap_or(0);
    let mut longest_entry = 0;
    // An instance of a template decides as the mandate made of the template, named with the longest name an
    // instance may have, under its parent's chain; its window's instants may carry a fraction (20 more bytes).
    // A template under a template (sub-delegation) decides under its parent instance's chain: the ceiling's, then
    // each instance above it, then its own.
    let longest: Vec<Mandate> = program
        .templates
        .iter()
        .map(|template| {
            let longest = GrantInstance {
                id: "x".repeat(grants::MAX_INSTANCE_ID),
                version: u64::MAX,
                template: template.name.clone(),
                principal: String::new(),
                holder: String::new(),
                params: Map::new(),
                granted: String::new(),
                parent: None,
            };
            let mut shape = Chain::instance_mandate(template, &longest);
            shape.valid_from = Some(253_402_300_799); // 9999-12-31T23:59:59Z, the longest instant
            shape.valid_until = shape.valid_from;
            shape
        })
        .collect();
    let shapes: Vec<(Mandate, Vec<&Mandate>)> = (0..program.templates.len())
        .filter_map(|t| {
            let top = ceiling(program, t)?;
            let mut statics: Vec<&Mandate> = program.chain(top).into_iter().map(|m| &program.mandates[m]).collect();
            let mut above = Vec::new();
            let mut current = t;
            while let Parent::Template(parent) = program.templates[current].parent {
                if above.len() > program.templates.len() {
                    break;
                }
                above.push(&longest[parent]);
                current = parent;
            }
            statics.extend(above.into_iter().rev());
            Some((longest[t].clone(), statics))
        })
        .collect();
    fixed += 40 * shapes.len();
    for mandate in program.mandates.iter().chain(shapes.iter().map(|(m, _)| m)) {
        fixed += json_len(&mandate.name) + json_len(&mandate.principal) + 2;
        let level = mandate.max_level.map(|l| format!("max level {}", program.levels.get(l).map_or("", |s| s)));
        let clauses = [
            (validity_text(mandate), mandate.valid_span),
            ("stop".to_string(), mandate.span),
            // The longest stop entry without its id (a decision's), and a listing's.
            ("stop  (quarantine)".to_string(), mandate.span),
            ("stop (quarantine)".to_string(), mandate.span),
            (level.unwrap_or_default(), mandate.max_level_span),
            (otherwise_text(mandate.otherwise).to_string(), mandate.otherwise_span),
        ];
        let rules = mandate.rules.iter().map(|r| (r.label.clone(), r.span));
        for (text, span) in clauses.into_iter().chain(rules) {
            let len = entry_len(mandate, &text, span);
            longest_entry = longest_entry.max(len);
            fixed += len;
        }
        // The `otherwise` of an unmatched mandate names its closest grant: `,"closest":` and the grant's entry with
        // `,"failed":{"attribute":…,"value":…}` (the value, a request string, is budgeted below) or `unevaluable`.
        let grants = mandate.rules.iter().filter(|r| matches!(r.kind, RuleKind::Allow));
        fixed += grants
            .map(|r| {
                let atom = |a: &crate::ir::Atom| json_len(&a.attr.display()) + json_len(&cond::atom_text(a, program));
                entry_len(mandate, &r.label, r.span) + longest_atom(&r.condition, &atom).unwrap_or(0) + 112
            })
            .max()
            .unwrap_or(0);
        for rule in &mandate.rules {
            // `,"unevaluable":{"attribute":…,"problem":"unsafe-path"}` on a rule listed because its condition failed.
            fixed += longest_atom(&rule.condition, &|a| json_len(&a.attr.display())).map_or(0, |len| len + 64);
            fixed += match &rule.kind {
                // `{"kind":…,"mandate":…,"mandates":[…],"tool":…,"digest":"sha256:…"}` and the keys of target and
                // manifest: a gate's mandate is in its kind's `mandates` once, and `mandate` at most once.
                // And an allow's `{"id":…,"kind":…,"approved_by":…}` of the approval that satisfied it.
                RuleKind::Gate { approval, .. } => {
                    2 * json_len(&program.approvals[*approval].name) + 2 * json_len(&mandate.name) + longest_tool + 220
                }
                RuleKind::Budget { name, .. } => json_len(name) + 48,
                _ => 0,
            };
        }
    }
    // Missing approvals that may carry the resource id or the manifest: distinct (kind, mandate) gates of a chain.
    let carries = |kind: &ApprovalKind| kind.binds.iter().any(|b| matches!(b, Binding::Target | Binding::Manifest));
    let chains: Vec<Vec<&Mandate>> = (0..program.mandates.len())
        .map(|leaf| program.chain(leaf).into_iter().map(|m| &program.mandates[m]).collect())
        .chain(shapes.iter().map(|(shape, statics)| statics.iter().copied().chain([shape]).collect()))
        .collect();
    let repeats = chains
        .iter()
        .map(|chain| {
            let mut gates: Vec<(usize, usize)> = Vec::new();
            for (m, mandate) in chain.iter().enumerate() {
                for rule in &mandate.rules {
                    if let RuleKind::Gate { approval, .. } = rule.kind {
                        if carries(&program.approvals[approval]) && !gates.contains(&(approval, m)) {
                            gates.push((approval, m));
                        }
                    }
                }
            }
            gates.len()
        })
        .max()
        .unwrap_or(0);
    // A closest grant's value, once per unmatched mandate of the chain.
    let chain = chains.iter().map(Vec::len).max().unwrap_or(0);
    // An instance's escalations go to the principal it names, a string of the request's `context.grants`.
    let escalation = usize::from(!shapes.is_empty());
    let requests = repeats.saturating_add(3).saturating_add(chain).saturating_add(escalation);
    let decision = fixed.saturating_add(requests.saturating_mul(input));
    let listing = program.tools.iter().map(|t| json_len(&t.name) + 64 + longest_entry).sum::<usize>() + 64;
    decision.max(listing).clamp(MIN_OUTPUT, MAX_OUTPUT).next_multiple_of(64 * 1024)
}

/// The largest `size` of an atom of `cond`, when it has atoms.
fn longest_atom(cond: &crate::ir::Cond, size: &dyn Fn(&crate::ir::Atom) -> usize) -> Option<usize> {
    match cond {
        crate::ir::Cond::True | crate::ir::Cond::False => None,
        crate::ir::Cond::Atom(atom) => Some(size(atom)),
        crate::ir::Cond::And(items) | crate::ir::Cond::Or(items) => {
            items.iter().filter_map(|c| longest_atom(c, size)).max()
        }
    }
}

/// How one rule of the chain evaluated for a call: what `remit eval --trace` shows, and what the fail-closed
/// property tests inspect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTrace {
    pub mandate: String,
    pub rule: String,
    /// `allow`, `forbid`, `limit`, `scope`, `gate`, `operation-id`, `fact` or `budget`.
    pub kind: &'static str,
    /// The condition's value; `None` when it could not be evaluated.
    pub result: Option<bool>,
    /// For a gate: the id of the presented approval that satisfies it, if one does (whether or not the gate
    /// applies). A deny lists no missing approvals, so this is how an explanation tells a satisfied gate from one
    /// that was not.
    pub approval: Option<String>,
}

/// Every rule of the request's mandate chain that covers the called tool, with its condition's value. Empty when
/// the request does not get as far as a tool and a mandate.
pub fn trace(program: &Program, request: &[u8]) -> Vec<RuleTrace> {
    let Ok(req) = request::parse(request, Need::Call) else { return Vec::new() };
    let Some(call) = req.call.as_ref() else { return Vec::new() };
    let Some(tool) = program.tool(&call.name) else { return Vec::new() };
    let Ok(under) = resolve(program, &req) else { return Vec::new() };
    let Ok(chain) = Chain::of(program, &req, &under) else { return Vec::new() };
    if chain.invalid.is_some() {
        return Vec::new();
    }
    let chain_mandates = chain.mandates();
    let principal = acting_principal(&chain_mandates);
    let empty = Json::Object(Map::new());
    let digest = argument_digest(&call.name, call.arguments.as_ref().unwrap_or(&empty));
    let mut out = Vec::new();
    for (position, &mandate) in chain_mandates.iter().enumerate() {
        let (instance, parent) = instance_at(chain_mandates.len(), &chain.instances, position);
        let root = root_principal(&chain_mandates);
        let env = Env { program, request: &req, tool, listing: false, principal: root, instance, parent };
        for rule in mandate.rules.iter().filter(|r| program.covers(&r.target, tool)) {
            let kind = match rule.kind {
                RuleKind::Allow => "allow",
                RuleKind::Forbid => "forbid",
                RuleKind::Limit => "limit",
                RuleKind::Scope => "scope",
                RuleKind::Gate { .. } => "gate",
                RuleKind::RequireOperationId => "operation-id",
                RuleKind::Fact { .. } => "fact",
                RuleKind::Budget { .. } => "budget",
            };
            let result = cond::eval(&rule.condition, &env).ok();
            let approval = match rule.kind {
                RuleKind::Gate { approval, .. } => {
                    let kind = &program.approvals[approval];
                    let (chosen, _) = judge_gate(kind, &chain_mandates[..=position], principal, &req, call, &digest);
                    chosen.map(|a| a.id.clone())
                }
                _ => None,
            };
            out.push(RuleTrace { mandate: mandate.name.clone(), rule: rule.label.clone(), kind, result, approval });
        }
    }
    out
}

/// One reason found while examining the chain.
#[derive(Debug)]
struct Finding {
    outcome: Otherwise,
    code: &'static str,
    rule: Option<DecidingRule>,
}

/// Everything found about a call, before it is turned into a decision.
#[derive(Debug, Default)]
struct Tally {
    findings: Vec<Finding>,
    /// Grants that matched and gates that were satisfied: the `rules` of an allow.
    granted: Vec<DecidingRule>,
    /// Missing approvals, one per gate, with the position of the gate's mandate in the chain.
    missing: Vec<(usize, MissingApproval)>,
    /// Single-use approvals that satisfied a gate.
    consumed: Vec<String>,
    /// Every approval that satisfied a gate.
    used: Vec<UsedApproval>,
    /// Budgets that apply to the call.
    counters: Vec<String>,
}

impl Tally {
    fn deny(&mut self, code: &'static str, rule: Option<DecidingRule>) {
        self.findings.push(Finding { outcome: Otherwise::Deny, code, rule });
    }

    fn add(&mut self, outcome: Otherwise, code: &'static str, rule: Option<DecidingRule>) {
        self.findings.push(Finding { outcome, code, rule });
    }

    /// Examines every mandate of the chain (root first; the order does not matter, everything is sorted later).
    fn examine(
        &mut self,
        program: &Program,
        req: &Request,
        call: &Call,
        tool_id: ToolId,
        chain: &[&Mandate],
        instances: &[instance::Instance],
    ) {
        let tool = &program.tools[tool_id];
        if tool.administers_mandates {
            self.deny(err::SELF_MODIFICATION, None);
        }
        if lacks_scope(tool, req) {
            self.deny(err::SCOPE_MISSING, None);
        }
        if has_undeclared_argument(tool, call) {
            self.deny(err::UNDECLARED_ARGUMENT, None);
        }
        let principal = acting_principal(chain);
        let empty = Json::Object(Map::new());
        let digest = argument_digest(&call.name, call.arguments.as_ref().unwrap_or(&empty));
        for (position, &mandate) in chain.iter().enumerate() {
            // Each mandate's conditions read its own instance's parameters (and its parent instance's).
            let (instance, parent) = instance_at(chain.len(), instances, position);
            let root = root_principal(chain);
            let env = Env { program, request: req, tool: tool_id, listing: false, principal: root, instance, parent };
            // An approval counts for this mandate's gates only if issued under it or an ancestor: authority
            // flows down the chain, never up.
            let issuers = &chain[..=position];
            if let Some((code, rule)) = window_of(program, chain, position, instances, req.now) {
                self.deny(code, Some(rule));
            }
            let above = position.checked_sub(1).map(|p| chain[p]);
            if let Some(rule) = stopped(program, mandate, above, req, tool, false) {
                self.deny(err::STOP_ACTIVE, Some(rule));
            }
            if let Some(rule) = level_exceeded(program, mandate, tool) {
                self.deny(err::LEVEL_EXCEEDED, Some(rule));
            }
            let mut granted = false;
            for rule in &mandate.rules {
                if !program.covers(&rule.target, tool_id) {
                    continue;
                }
                let result = cond::eval(&rule.condition, &env);
                // A rule listed because its condition could not be evaluated says which attribute failed.
                let entry = || DecidingRule {
                    unevaluable: if result.is_err() { unevaluable(&rule.condition, &env) } else { None },
                    ..deciding_rule(program, mandate, &rule.label, rule.span)
                };
                // Rules without a written condition have `True`; one that errors still applies (fail closed).
                let applies = result != Ok(false);
                match &rule.kind {
                    RuleKind::Allow if result == Ok(true) => {
                        granted = true;
                        self.granted.push(entry());
                    }
                    RuleKind::Forbid if applies => self.deny(err::FORBIDDEN, Some(entry())),
                    RuleKind::Limit if result != Ok(true) => self.deny(err::LIMIT_EXCEEDED, Some(entry())),
                    RuleKind::Scope if result != Ok(true) => self.deny(err::SCOPE_OUTSIDE, Some(entry())),
                    RuleKind::Gate { approval, on_missing } if applies => {
                        let kind = &program.approvals[*approval];
                        let (chosen, refused) = judge_gate(kind, issuers, principal, req, call, &digest);
                        if let Some(approval) = chosen {
                            let id = &approval.id;
                            if kind.single_use {
                                self.consumed.push(id.clone());
                            }
                            let approved_by = approval.approved_by.clone();
                            self.used.push(UsedApproval { id: id.clone(), kind: kind.name.clone(), approved_by });
                            self.granted.push(entry());
                            continue;
                        }
                        // Each refusal's code joins `approval.missing`, with the gate's outcome.
                        for r in &refused {
                            self.add(*on_missing, r.refusal.code(), None);
                        }
                        if *on_missing == Otherwise::Deny {
                            // `else deny`: refused, and nothing for the principal's queue.
                            self.deny(err::APPROVAL_MISSING, Some(entry()));
                        } else {
                            let missing = missing_approval(kind, mandate, req, call, &digest, refused);
                            self.missing.push((position, missing));
                            self.add(Otherwise::Escalate, err::APPROVAL_MISSING, Some(entry()));
                        }
                    }
                    RuleKind::RequireOperationId if applies && req.operation_id.as_deref().unwrap_or("").is_empty() => {
                        self.deny(err::OPERATION_MISSING_ID, Some(entry()));
                    }
                    // Current only as the same JSON type with the same value (`FactVersion::is_current`).
                    RuleKind::Fact { name, version, on_stale }
                        if applies && !version.is_current(req.facts.get(name)) =>
                    {
                        self.add(*on_stale, err::FACT_STALE, Some(entry()));
                    }
                    RuleKind::Budget { name, max, .. } if applies => {
                        self.counters.push(name.clone());
                        let used = req.counters.get(name).and_then(Json::as_u64);
                        if used.is_none_or(|used| used >= *max) {
                            self.deny(err::BUDGET_EXHAUSTED, Some(entry()));
                        }
                    }
                    _ => {}
                }
            }
            if !granted {
                let mut rule =
                    deciding_rule(program, mandate, otherwise_text(mandate.otherwise), mandate.otherwise_span);
                rule.closest = closest(program, mandate, tool_id, &env).map(Box::new);
                self.add(mandate.otherwise, err::UNMATCHED, Some(rule));
            }
        }
    }

    fn into_decision(self, program: &Program, req: &Request, tool: ToolId, chain: &[&Mandate]) -> Decision {
        let mut decision = Decision::deny(Vec::new(), program.hash.as_str());
        let outcome = if self.findings.iter().any(|f| f.outcome == Otherwise::Deny) {
            Some(Otherwise::Deny)
        } else if self.findings.is_empty() {
            None
        } else {
            Some(Otherwise::Escalate)
        };
        match outcome {
            Some(outcome) => {
                let deciding = self.findings.into_iter().filter(|f| f.outcome == outcome);
                let (codes, rules): (Vec<_>, Vec<_>) = deciding.map(|f| (f.code.to_string(), f.rule)).unzip();
                decision.reasons = sorted(codes);
                decision.rules = sorted_rules(rules.into_iter().flatten().collect());
                if outcome == Otherwise::Escalate {
                    decision.outcome = Outcome::Escalate;
                    decision.missing_approvals = merged(self.missing);
                    decision.escalate_to = chain.last().map(|leaf| leaf.principal.clone());
                }
            }
            None => {
                decision.outcome = Outcome::Allow;
                decision.reasons = vec![err::ALLOWED.to_string()];
                decision.rules = sorted_rules(self.granted);
                decision.approvals = sorted(self.used);
                let mut obligations: Vec<Obligation> =
                    self.consumed.into_iter().map(Obligation::ConsumeApproval).collect();
                if let Some(id) = req.operation_id.as_ref().filter(|id| !id.is_empty()) {
                    if program.tools[tool].side_effects {
                        obligations.push(Obligation::RecordOperation(id.clone()));
                    }
                }
                obligations.extend(self.counters.into_iter().map(Obligation::IncrementCounter));
                let mut keyed: Vec<(String, Obligation)> = obligations.into_iter().map(|o| (o.to_json(), o)).collect();
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
                keyed.dedup_by(|a, b| a.0 == b.0);
                decision.obligations = keyed.into_iter().map(|(_, o)| o).collect();
            }
        }
        decision
    }
}

/// The attribute a condition that gives an error could not be evaluated for, and why (its first failing atom:
/// [`cond::cause`]).
fn unevaluable(condition: &crate::ir::Cond, env: &Env) -> Option<Unevaluable> {
    let (atom, error) = cond::cause(condition, env)?;
    Some(Unevaluable { attribute: cond::culprit(&atom.attr, &atom.ty, env).display(), problem: error.code() })
}

/// The grant of the called tool in `mandate` (none of which granted) that came closest: the fewest top-level
/// conjuncts not true (`cond::distance`), then the decision's order (rule text, then position); with the atom that
/// made it false and the request's value of it, or the attribute that could not be evaluated.
fn closest(program: &Program, mandate: &Mandate, tool: ToolId, env: &Env) -> Option<DecidingRule> {
    let grants = mandate.rules.iter().filter(|r| matches!(r.kind, RuleKind::Allow) && program.covers(&r.target, tool));
    let scored =
        grants.map(|r| (cond::distance(&r.condition, env), deciding_rule(program, mandate, &r.label, r.span), r));
    let (_, mut entry, rule) = scored.min_by(|a, b| (a.0, a.1.sort_key()).cmp(&(b.0, b.1.sort_key())))?;
    if cond::eval(&rule.condition, env).is_err() {
        entry.unevaluable = unevaluable(&rule.condition, env);
    } else if let Some(atom) = cond::failed_atom(&rule.condition, env) {
        let req = env.request;
        let attribute = cond::failed_attribute(&atom.attr);
        let json = match attribute {
            crate::ir::Attr::Arg(name) => req.call.as_ref().and_then(|c| c.argument(name)).cloned(),
            crate::ir::Attr::Context(name) => req.attributes.get(name).cloned(),
            crate::ir::Attr::ResourceId => req.resource_id.clone().map(Json::String),
            crate::ir::Attr::SubjectId => Some(Json::String(req.subject_id.clone())),
            crate::ir::Attr::Subject(name) => req.subject_properties.get(name).cloned(),
            crate::ir::Attr::Resource(name) => req.resource_properties.get(name).cloned(),
            crate::ir::Attr::Principal(name) => req.principal_attribute(env.principal, name).cloned(),
            _ => None,
        };
        let value = json.map(|j| {
            let mut out = String::new();
            digest::write_canonical(&mut out, &j);
            out
        });
        entry.failed =
            Some(Failed { condition: cond::atom_text(atom, program), attribute: attribute.display(), value });
    }
    Some(entry)
}

/// One missing approval per kind and binding, sorted: an approval issued under the mandate nearest the root counts
/// for the gates of every mandate below it, so one approval serves all of them.
fn merged(mut missing: Vec<(usize, MissingApproval)>) -> Vec<MissingApproval> {
    let binding =
        |m: &MissingApproval| (m.kind.clone(), m.tool.clone(), m.target.clone(), m.digest.clone(), m.manifest.clone());
    missing.sort_by_key(|(position, m)| (binding(m), *position));
    let mut out: Vec<MissingApproval> = Vec::new();
    for (_, m) in missing {
        match out.last_mut() {
            Some(last) if binding(last) == binding(&m) => last.mandates.push(m.mandate),
            // The first of its binding is the nearest the root: the mandate to issue it under.
            _ => out.push(m),
        }
    }
    for m in &mut out {
        m.mandates.sort();
        m.mandates.dedup();
    }
    out
}

fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items.dedup();
    items
}

pub(crate) fn sorted_rules(mut rules: Vec<DecidingRule>) -> Vec<DecidingRule> {
    rules.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    rules.dedup();
    rules
}

/// Whether the tool requires scopes and the credential carries none of them (no credential: no scopes).
pub(crate) fn lacks_scope(tool: &Tool, req: &Request) -> bool {
    let held = req.scopes.as_deref().unwrap_or(&[]);
    !tool.scopes.is_empty() && !tool.scopes.iter().any(|s| held.contains(s))
}

/// Whether the call passes an argument its tool does not declare (tools are closed unless `open arguments`): the
/// backend could act on a value no rule has seen.
fn has_undeclared_argument(tool: &Tool, call: &Call) -> bool {
    let Some(Json::Object(arguments)) = &call.arguments else { return false };
    !tool.open_arguments && arguments.keys().any(|key| tool.param(key).is_none())
}

/// Whether `now` (nanoseconds) is outside the mandate's validity window (whole seconds), with the reason code.
pub(crate) fn validity(program: &Program, mandate: &Mandate, now: i128) -> Option<(&'static str, DecidingRule)> {
    let second = |at: i64| i128::from(at) * NANOS_PER_SECOND;
    let code = if mandate.valid_from.is_some_and(|from| now < second(from)) {
        err::NOT_YET_VALID
    } else if mandate.valid_until.is_some_and(|until| now >= second(until)) {
        err::EXPIRED
    } else {
        return None;
    };
    let text = validity_text(mandate);
    Some((code, deciding_rule(program, mandate, &text, mandate.valid_span)))
}

/// Whether `now` is outside the window of the mandate at `position` of `chain`: an instance's own window (the
/// chain's last mandates are its `instances`: instants of their values or the templates', named with them), else
/// the mandate's ([`validity`]).
pub(crate) fn window_of(
    program: &Program,
    chain: &[&Mandate],
    position: usize,
    instances: &[instance::Instance],
    now: i128,
) -> Option<(&'static str, DecidingRule)> {
    let mandate = chain[position];
    let Some(instance) = instance_at(chain.len(), instances, position).0 else {
        return validity(program, mandate, now);
    };
    let code = if instance.valid_from.is_some_and(|from| now < from) {
        err::NOT_YET_VALID
    } else if instance.valid_until.is_some_and(|until| now >= until) {
        err::EXPIRED
    } else {
        return None;
    };
    let mut text = String::from("valid");
    if let Some(from) = instance.valid_from {
        text.push_str(" from ");
        text.push_str(&format_instant(from));
    }
    if let Some(until) = instance.valid_until {
        text.push_str(" until ");
        text.push_str(&format_instant(until));
    }
    Some((code, deciding_rule(program, mandate, &text, mandate.valid_span)))
}

/// How a mandate's validity window is named in decisions: `valid from … until …`.
pub(crate) fn validity_text(mandate: &Mandate) -> String {
    let mut text = String::from("valid");
    if let Some(from) = mandate.valid_from {
        text.push_str(" from ");
        text.push_str(&format_timestamp(from));
    }
    if let Some(until) = mandate.valid_until {
        text.push_str(" until ");
        text.push_str(&format_timestamp(until));
    }
    text
}

/// The stop levels' names, weakest first (the image writes a listing's `stop (LEVEL)` entry for each).
pub const STOP_LEVEL_NAMES: [&str; 4] = ["pause", "cancel", "revoke", "quarantine"];

/// The stop that refuses this call at `mandate`, as its deciding rule: a stop naming the mandate, or (at a mandate
/// the principal gave: a root, or an instance granted under someone else's ceiling) its principal, whose level refuses the tool (quarantine every tool, the others and a bare name tools with side
/// effects). Of several, the decision names one per mandate: the strongest level, then the smallest id; a bare name
/// is weaker than any object. A decision writes `stop ID (LEVEL)` (`stop` for a bare name); a listing, which repeats
/// the rule for every hidden tool and so writes no request strings, `stop (LEVEL)`.
pub(crate) fn stopped(
    program: &Program,
    mandate: &Mandate,
    above: Option<&Mandate>,
    req: &Request,
    tool: &Tool,
    listing: bool,
) -> Option<DecidingRule> {
    // (level + 1, id); 0 for a bare name.
    let mut best: Option<(usize, &str)> = None;
    for stop in &req.stops {
        let (strength, id) = match stop {
            Stop::Named(name) if tool.side_effects && *name == mandate.name => (0, ""),
            Stop::Object { id, level, on } => {
                let reaches = match on {
                    StopOn::Mandate(name) => *name == mandate.name,
                    // The mandates the principal gave: hers, under no mandate of hers (a root, or an instance
                    // she was granted under a ceiling of someone else's, not one under an instance of hers);
                    // every mandate below them is stopped too. `above`: the mandate above it in the chain.
                    StopOn::Principal(principal) => {
                        *principal == mandate.principal && above.is_none_or(|above| above.principal != *principal)
                    }
                };
                if !reaches || !(tool.side_effects || *level == StopLevel::Quarantine) {
                    continue;
                }
                (*level as usize + 1, id.as_str())
            }
            Stop::Named(_) => continue,
        };
        best = match best {
            Some((s, i)) if s > strength || (s == strength && i <= id) => Some((s, i)),
            _ => Some((strength, id)),
        };
    }
    let (strength, id) = best?;
    let text = match strength.checked_sub(1).and_then(|l| StopLevel::ALL.get(l)).map(|l| l.name()) {
        None => "stop".to_string(),
        Some(level) if listing => format!("stop ({level})"),
        Some(level) => format!("stop {id} ({level})"),
    };
    Some(deciding_rule(program, mandate, &text, mandate.span))
}

/// The tool's level is above the mandate's maximum.
pub(crate) fn level_exceeded(program: &Program, mandate: &Mandate, tool: &Tool) -> Option<DecidingRule> {
    let max = mandate.max_level.filter(|&max| tool.level > max)?;
    let name = program.levels.get(max).cloned().unwrap_or_else(|| max.to_string());
    Some(deciding_rule(program, mandate, &format!("max level {name}"), mandate.max_level_span))
}

pub(crate) fn otherwise_text(outcome: Otherwise) -> &'static str {
    match outcome {
        Otherwise::Deny => "otherwise deny",
        Otherwise::Escalate => "otherwise escalate",
    }
}

pub(crate) fn deciding_rule(program: &Program, mandate: &Mandate, rule: &str, span: Span) -> DecidingRule {
    DecidingRule {
        mandate: mandate.name.clone(),
        rule: rule.to_string(),
        at: location(program, span),
        unevaluable: None,
        failed: None,
        closest: None,
    }
}

/// `file:line:column` of a span; a span that does not fit its file (never made by the checker) degrades to the
/// file name instead of panicking.
fn location(program: &Program, span: Span) -> String {
    let Some((_, file)) = program.sources.files().nth(span.file as usize) else {
        return "?".to_string();
    };
    if file.text.get(..span.start as usize).is_none() {
        return file.name.clone();
    }
    program.sources.location(span)
}

/// Why a presented approval of the gate's `kind` does not satisfy the gate for this call (`None`: it does);
/// `issuers` are the gate's mandate and its ancestors. The checks run in [`Refusal`]'s order.
/// The presented approval of `kind` that satisfies a gate of that kind (the smallest id; identical duplicates are
/// one approval, so any of them says who approved), and every presented one of the kind that does not, with why,
/// sorted. `issuers`: the chain from the root down to the gate's mandate.
fn judge_gate<'r>(
    kind: &ApprovalKind,
    issuers: &[&Mandate],
    principal: &str,
    req: &'r Request,
    call: &Call,
    digest: &str,
) -> (Option<&'r request::Approval>, Vec<RefusedApproval>) {
    let of_kind = req.approvals.iter().filter(|a| a.kind == kind.name);
    let judged: Vec<(&request::Approval, Option<Refusal>)> =
        of_kind.map(|a| (a, refusal(a, kind, issuers, principal, req, call, digest))).collect();
    let chosen = judged.iter().filter(|(_, refusal)| refusal.is_none()).map(|(a, _)| *a).min_by_key(|a| &a.id);
    let mut refused: Vec<RefusedApproval> = judged
        .into_iter()
        .filter_map(|(a, refusal)| Some(RefusedApproval { id: a.id.clone(), refusal: refusal? }))
        .collect();
    refused.sort();
    refused.dedup();
    (chosen, refused)
}

fn refusal(
    approval: &request::Approval,
    kind: &ApprovalKind,
    issuers: &[&Mandate],
    principal: &str,
    req: &Request,
    call: &Call,
    digest: &str,
) -> Option<Refusal> {
    let (now, issued) = (req.now, approval.issued_at);
    let bound = |binding: &Binding| match binding {
        Binding::Tool => approval.tool.as_deref() == Some(call.name.as_str()),
        Binding::Target => approval.target.is_some() && approval.target == req.resource_id,
        Binding::Arguments => approval.digest.as_deref() == Some(digest),
        Binding::Manifest => approval.manifest.is_some() && approval.manifest.as_deref() == manifest(call),
    };
    let mut unbound = Binding::ALL.into_iter().filter(|b| kind.binds.contains(b) && !bound(b));
    Some(if approval.consumed {
        Refusal::Consumed
    } else if now < issued {
        Refusal::NotYetValid
    } else if now >= approval.expires_at {
        Refusal::Expired
    } else if now >= issued + i128::from(kind.ttl) * NANOS_PER_SECOND {
        Refusal::TtlPassed
    } else if let Some(binding) = unbound.next() {
        Refusal::BindingMismatch(binding)
    } else if kind.approvers.as_ref().is_some_and(|approvers| {
        !approval
            .approved_by
            .as_deref()
            .is_some_and(|by| admits(approvers.principal, &approvers.ids, &approvers.prefixes, by, principal))
    }) {
        Refusal::WrongApprover
    } else if !issuers.iter().any(|m| m.name == approval.mandate) {
        Refusal::WrongMandate
    } else {
        return None;
    })
}

/// `args.manifest` when it is a string that is not blank (a blank manifest binds nothing).
fn manifest(call: &Call) -> Option<&str> {
    call.argument("manifest").and_then(Json::as_str).filter(|m| !crate::value::is_blank(m))
}

fn missing_approval(
    kind: &ApprovalKind,
    mandate: &Mandate,
    req: &Request,
    call: &Call,
    digest: &str,
    refused: Vec<RefusedApproval>,
) -> MissingApproval {
    let binds = |b: Binding| kind.binds.contains(&b);
    MissingApproval {
        kind: kind.name.clone(),
        mandate: mandate.name.clone(),
        mandates: vec![mandate.name.clone()],
        tool: binds(Binding::Tool).then(|| call.name.clone()),
        target: req.resource_id.clone().filter(|_| binds(Binding::Target)),
        digest: binds(Binding::Arguments).then(|| digest.to_string()),
        manifest: manifest(call).filter(|_| binds(Binding::Manifest)).map(str::to_string),
        refused,
    }
}

#[cfg(test)]
pub(crate) mod tests;
