//! Deciding a request against a policy image, the twin of `crates/remit-lang/src/eval/mod.rs` (and of `decision.rs` for the JSON).
//! Every entry point reads a parsed request (or the parse's error), writes its JSON into an [`Out`], and uses only
//! the fixed lists of a [`Work`]: no allocation, so the same code runs natively and in the wasm32 artifact.
//!
//! As in the interpreter, resolution stops early only for the tool, the mandate and the holder; after that every
//! mandate of the chain is examined in full and the decision collects every reason: any deny reason denies, else
//! any escalate reason escalates, else the call is allowed. Lists are sorted by ranks the compiler computed (rules
//! by `DecidingRule::sort_key`, missing approvals by kind and mandate name, counters by their obligation's JSON), so
//! nothing depends on where a clause is written.
//!
//! The tool listing ([`crate::visible`]) makes some of the same checks (the holder, scopes, validity, stops, levels)
//! with this module's functions; nothing here uses the listing.

use core::cmp::Ordering;

pub use crate::cond::is_holder;
use crate::cond::{self, holds_identity as holds, Env, Truth};
use crate::digest::{argument_digest, write_canonical};
use crate::err;
use crate::grants::{self, Instance, Instances, Under};
use crate::image::{self, Image, Kind, Mandate, Rule, RuleList, Tool, MAX_DECIDING};
use crate::json::{heap_sort, merge_sort, Doc, Parsed, NUMBER, STRING};
use crate::out::{escaped, write_string, write_string_tok, Out};
use crate::request::{self, elements, Approval, Need, Request, Stop};
use crate::value::NANOS_PER_SECOND;
use crate::Sink;

/// The lists one decision collects, each of at most [`MAX_DECIDING`] items (the checker's bound on the rules a
/// decision examines, four clauses per mandate included). Reused from call to call.
#[derive(Clone, Debug)]
pub struct Work {
    /// Entry indices of the deny findings, of the escalate findings, and of the grants and satisfied gates.
    pub deny: [u32; MAX_DECIDING],
    pub escalate: [u32; MAX_DECIDING],
    pub granted: [u32; MAX_DECIDING],
    /// Missing approvals as `(kind index, position of the gate's mandate in the chain)` pairs.
    pub missing: [u32; 2 * MAX_DECIDING],
    /// The gates that apply, as `(rule offset, position in the chain, item)` triples (the item: the rule's entry, or
    /// [`CAUSED`] when its condition could not be evaluated).
    pub gates: [u32; 3 * MAX_DECIDING],
    /// The rules listed because their condition could not be evaluated: `(entry, atom offset, problem)` triples; a
    /// list names one as [`CAUSED`] plus its triple's index.
    pub causes: [u32; 3 * MAX_DECIDING],
    /// The `otherwise` entries listed for `rule.unmatched` with the grant that came closest: `(otherwise entry, grant
    /// entry, atom offset, what, value token + 1)` 5-tuples (`what`: a `cond::PROBLEM_*` the grant's condition could
    /// not be evaluated for, [`FAILED`] for a false atom, [`NO_ATOM`]); a list names one as [`CLOSEST`] plus its
    /// tuple's index.
    pub closest: [u32; 5 * MAX_DECIDING],
    /// The order of the missing approvals.
    pub order: [u32; MAX_DECIDING],
    /// Tokens of the approval ids a decision consumes.
    pub consumed: [u32; MAX_DECIDING],
    /// The approvals that satisfied gates, as `(id token, approved_by token or NONE, kind index)` triples.
    pub used: [u32; 3 * MAX_DECIDING],
    /// Counter ranks of the budgets that apply.
    pub counters: [u32; MAX_DECIDING],
    /// The stop objects that refuse the call, one per mandate of the chain at most: `(mandate index, id token,
    /// strength)` triples; a deny list names one as [`DYNAMIC`] plus its triple's index.
    pub stops: [u32; 3 * MAX_DECIDING],
    /// The first usable approvals, read once per decision when its first gate needs them (the rest are read at each
    /// gate). (All-zero initial values, so the artifact keeps the array out of its data.)
    pub approvals: [Approval; MAX_DECIDING],
}

impl Work {
    pub const EMPTY: Work = Work {
        deny: [0; MAX_DECIDING],
        escalate: [0; MAX_DECIDING],
        granted: [0; MAX_DECIDING],
        missing: [0; 2 * MAX_DECIDING],
        gates: [0; 3 * MAX_DECIDING],
        causes: [0; 3 * MAX_DECIDING],
        closest: [0; 5 * MAX_DECIDING],
        order: [0; MAX_DECIDING],
        consumed: [0; MAX_DECIDING],
        used: [0; 3 * MAX_DECIDING],
        counters: [0; MAX_DECIDING],
        stops: [0; 3 * MAX_DECIDING],
        approvals: [Approval::EMPTY; MAX_DECIDING],
    };
}

/// Marks an item of a deny list that is not an entry index but a stop found in the request ([`Work::stops`]).
pub const DYNAMIC: u32 = 1 << 31;

/// Marks an item of a list that is a rule's entry with the cause of its failed condition ([`Work::causes`]).
pub const CAUSED: u32 = 1 << 30;

/// Marks an item of a list that is an `otherwise` entry with the grant that came closest ([`Work::closest`]).
pub const CLOSEST: u32 = 1 << 29;
/// A closest grant's false atom ([`Work::closest`]).
const FAILED: u32 = 4;
/// A closest grant whose condition is a constant.
const NO_ATOM: u32 = 5;

/// A list being filled in one of [`Work`]'s arrays.
struct List<'w> {
    items: &'w mut [u32],
    len: usize,
}

impl<'w> List<'w> {
    fn new(items: &'w mut [u32]) -> List<'w> {
        List { items, len: 0 }
    }

    /// Appends `item` (past the capacity, which the checker's bound rules out, it is dropped).
    fn push(&mut self, item: u32) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = item;
            self.len += 1;
        }
    }

    fn slice(&mut self) -> &mut [u32] {
        let len = self.len;
        self.items.get_mut(..len).unwrap_or(&mut [])
    }
}

/// Writes the decision on the parsed request (docs/requests.md), exactly `remit_lang::eval::decide(…).to_json()`.
pub fn decide(image: &Image<'_>, parsed: Parsed<'_>, work: &mut Work, out: &mut Out<'_>) {
    let policy = image.str(image.header.policy_off, image.header.policy_len);
    let (doc, keys) = match parsed {
        Ok(p) => p,
        Err(e) => {
            let codes = err::of_request(request::RequestError::json(e));
            return write_deny(out, codes, &|out: &mut Out<'_>| out.write(b"[]"), None, policy);
        }
    };
    let req = match request::parse(&doc, Need::Call) {
        Ok(req) => req,
        Err(e) => return write_unreadable(out, e, policy),
    };
    // Every decision on a request that could be read names its credential, the early denies too.
    let credential = req.credential_id.map(|id| (&doc, id));
    let call = match req.call {
        Some(call) => call,
        None => {
            return write_deny(
                out,
                err::REQUEST_MISSING_FIELD,
                &|out: &mut Out<'_>| out.write(b"[]"),
                credential,
                policy,
            )
        }
    };
    let h = image.header;
    let tool = match find(image, h.tool_slots_off, h.tool_slots_len, &doc, call.name, |i| image.tool_name(i)) {
        Some(tool) => tool,
        None => {
            return write_deny(out, err::TOOL_UNDECLARED, &|out: &mut Out<'_>| out.write(b"[]"), credential, policy)
        }
    };
    let named = req
        .mandate
        .and_then(|tok| find(image, h.mandate_slots_off, h.mandate_slots_len, &doc, tok, |i| image.mandate_name(i)));
    let (leaf, grant) = match grants::resolve(image, &doc, &req, named) {
        Ok(Under::Mandate(leaf)) => (image.mandate(leaf), None),
        Ok(Under::Instance(t, grant)) => (image.mandate(image.template(t).mandate), Some((t, grant))),
        Err((code, field)) => {
            out.write(b"{\"decision\":\"deny\",\"reasons\":");
            err::write_codes(out, code);
            if field {
                out.write(b",\"fields\":[{\"field\":\"context.mandate\",\"problem\":\"missing\"}]");
            }
            return write_deny_tail(out, false, &|out: &mut Out<'_>| out.write(b"[]"), credential, policy);
        }
    };
    let call = Call { tool, record: image.tool(tool), name: call.name, arguments: call.arguments };
    let env = Env::new(image, &doc, &req, call.tool, false, &leaf);
    // An instance: its holder must be the subject (before its check, as for any mandate), and it must pass the
    // check every decision runs, the instances it hangs under included (`grant.invalid`, naming the clause it fails
    // and the instance that fails it).
    let mut instances = Instances::NONE;
    let mut refused = None;
    if let Some((t, grant)) = grant {
        let (found, broken) = grants::lineage(image, &doc, &req, t, grant);
        instances = found;
        if doc.text_eq(grant.holder, req.subject_id) {
            if let Err(refusal) = grants::check(image, &env, &mut instances, broken) {
                refused = Some(refusal);
            }
        }
    }
    let chain = |out: &mut Out<'_>| write_chain(image, &doc, &leaf, &instances, out);
    let holds = match instances.leaf() {
        Some(instance) => doc.text_eq(instance.grant.holder, req.subject_id),
        None => is_holder(image, &doc, &leaf, req.subject_id),
    };
    if !holds {
        write_deny(out, err::SUBJECT_NOT_HOLDER, &chain, credential, policy);
    } else if let Some((level, refusal)) = refused {
        out.write(b"{\"decision\":\"deny\",\"reasons\":");
        err::write_codes(out, err::GRANT_INVALID);
        out.write(b",\"rules\":[");
        if let Some(instance) = instances.as_slice().get(level) {
            grants::write_refusal(image, &doc, instance, &refusal, keys, out);
        }
        out.byte(b']');
        write_deny_tail(out, true, &chain, credential, policy);
    } else {
        let mut tally = Tally::new(work);
        tally.instances = instances;
        tally.examine(&call, &leaf, &env, keys);
        tally.write(image, &doc, &req, &call, &leaf, keys, out);
    }
    // A decision that does not fit the output area (sized by `eval::output_limit`) is a deny of its own, never
    // truncated JSON.
    if out.overflow() {
        out.clear();
        write_deny(out, err::DECISION_OVERSIZE, &chain, credential, policy);
    }
}

/// Writes `mandate_chain`: the leaf's chain; for an instance the ceiling's chain and the names of the instances
/// found (those it hangs under, then itself: a template's mandate whose instance was not found is left out).
pub(crate) fn write_chain(image: &Image<'_>, doc: &Doc<'_>, leaf: &Mandate, instances: &Instances, out: &mut Out<'_>) {
    if !grants::is_template(leaf) || instances.leaf().is_none() {
        return out.write(image.str(leaf.chain_json_off, leaf.chain_json_len));
    }
    out.byte(b'[');
    let mut first = true;
    for p in 0..leaf.chain_count {
        let m = image.word(leaf.chain_off.wrapping_add(4 * p));
        let record = image.mandate(m);
        let instance = instances.of_mandate(m);
        if grants::is_template(&record) && instance.is_none() {
            continue;
        }
        if !first {
            out.byte(b',');
        }
        first = false;
        write_mandate_name(image, doc, &record, instance, out);
    }
    out.byte(b']');
}

/// The record of the hash table at `slots_off` whose name is the string token `tok`.
pub(crate) fn find<'a>(
    image: &Image<'a>,
    slots_off: u32,
    slots_len: u32,
    doc: &Doc<'_>,
    tok: u32,
    name_of: impl Fn(u32) -> &'a [u8],
) -> Option<u32> {
    match doc.plain(tok) {
        Some(name) => image.find_bytes(slots_off, slots_len, name, name_of),
        None => image.find(slots_off, slots_len, || doc.text(tok), name_of),
    }
}

/// The called tool.
struct Call {
    tool: u32,
    record: Tool,
    /// The name's and the arguments' tokens.
    name: u32,
    arguments: Option<u32>,
}

/// A deny with the given reasons and nothing else, the shape of every decision made before the chain is examined.
fn write_deny(
    out: &mut Out<'_>,
    codes: u32,
    chain: &dyn Fn(&mut Out<'_>),
    credential: Option<(&Doc<'_>, u32)>,
    policy: &[u8],
) {
    out.write(b"{\"decision\":\"deny\",\"reasons\":");
    err::write_codes(out, codes);
    write_deny_tail(out, false, chain, credential, policy);
}

/// The deny on a request that could not be read: its codes and, after `reasons`, the fields that are wrong
/// (`fields`, written only when there are some: a request that is a JSON object).
fn write_unreadable(out: &mut Out<'_>, e: request::RequestError, policy: &[u8]) {
    out.write(b"{\"decision\":\"deny\",\"reasons\":");
    err::write_codes(out, err::of_request(e));
    if e.malformed_fields | e.missing_fields != 0 {
        out.write(b",\"fields\":[");
        let mut first = true;
        for (i, field) in request::FIELDS.iter().enumerate() {
            let bit = 1u32 << i;
            let problem: &[u8] = if e.malformed_fields & bit != 0 {
                b"malformed"
            } else if e.missing_fields & bit != 0 {
                b"missing"
            } else {
                continue;
            };
            out.write(if first { b"{\"field\":\"" } else { b",{\"field\":\"" });
            out.write(field.as_bytes());
            out.write(b"\",\"problem\":\"");
            out.write(problem);
            out.write(b"\"}");
            first = false;
        }
        out.byte(b']');
    }
    write_deny_tail(out, false, &|out: &mut Out<'_>| out.write(b"[]"), None, policy);
}

/// A deny's keys after `reasons` (and `fields`): no rules (unless `rules_written`: the caller wrote them), approvals
/// or obligations.
fn write_deny_tail(
    out: &mut Out<'_>,
    rules_written: bool,
    chain: &dyn Fn(&mut Out<'_>),
    credential: Option<(&Doc<'_>, u32)>,
    policy: &[u8],
) {
    if !rules_written {
        out.write(b",\"rules\":[]");
    }
    out.write(b",\"missing_approvals\":[],\"approvals\":[],\"obligations\":[],\"mandate_chain\":");
    chain(out);
    write_credential(out, credential);
    out.write(b",\"escalate_to\":null,\"policy\":");
    out.write(policy);
    out.byte(b'}');
}

/// `,"credential":` and the request's credential id (`null` without one).
fn write_credential(out: &mut Out<'_>, credential: Option<(&Doc<'_>, u32)>) {
    out.write(b",\"credential\":");
    match credential {
        Some((doc, id)) => write_string_tok(out, doc, id),
        None => out.write(b"null"),
    }
}

/// Everything found about a call, before it is written as a decision.
struct Tally<'w> {
    deny_codes: u32,
    escalate_codes: u32,
    deny: List<'w>,
    escalate: List<'w>,
    granted: List<'w>,
    missing: List<'w>,
    gates: List<'w>,
    causes: List<'w>,
    closest: List<'w>,
    order: &'w mut [u32],
    consumed: List<'w>,
    used: List<'w>,
    counters: List<'w>,
    stops: List<'w>,
    /// The first usable approvals, read when the first gate needs them (`Work::approvals`).
    approvals: &'w mut [Approval],
    /// The argument digest, once a gate needed it.
    digest: Option<[u8; 71]>,
    /// Whether a gate that applies refuses without its approval (`else deny`).
    refusing_gates: bool,
    /// How many usable approvals `resolve_gates` left at the front of the parse's key slots.
    usable_len: usize,
    /// The instances the call is decided under, if any (the chain's leaf decides as its template's mandate, the
    /// instances it hangs under as theirs).
    instances: Instances,
}

impl<'w> Tally<'w> {
    fn new(work: &'w mut Work) -> Tally<'w> {
        Tally {
            deny_codes: 0,
            escalate_codes: 0,
            deny: List::new(&mut work.deny),
            escalate: List::new(&mut work.escalate),
            granted: List::new(&mut work.granted),
            missing: List::new(&mut work.missing),
            gates: List::new(&mut work.gates),
            causes: List::new(&mut work.causes),
            closest: List::new(&mut work.closest),
            order: &mut work.order,
            consumed: List::new(&mut work.consumed),
            used: List::new(&mut work.used),
            counters: List::new(&mut work.counters),
            stops: List::new(&mut work.stops),
            approvals: &mut work.approvals,
            digest: None,
            refusing_gates: false,
            usable_len: 0,
            instances: Instances::NONE,
        }
    }

    fn deny(&mut self, code: u32, entry: Option<u32>) {
        self.deny_codes |= code;
        if let Some(entry) = entry {
            self.deny.push(entry);
        }
    }

    fn escalate(&mut self, code: u32, entry: u32) {
        self.escalate_codes |= code;
        self.escalate.push(entry);
    }

    /// The item that lists `rule`: its entry, with the cause when its condition could not be evaluated (`result`).
    fn item(&mut self, image: &Image<'_>, rule: &Rule, result: Truth, env: &Env<'_>) -> u32 {
        if result != Truth::Error {
            return rule.entry;
        }
        match cond::cause(image, rule.cond_off, rule.cond_count, env) {
            Some((atom, problem)) => {
                let item = CAUSED | (self.causes.len / 3) as u32;
                self.causes.push(rule.entry);
                self.causes.push(atom);
                self.causes.push(problem);
                item
            }
            None => rule.entry,
        }
    }

    /// The item that lists mandate `mandate`'s `otherwise` for `rule.unmatched`: with the grant of the called tool
    /// that came closest (the fewest top-level conjuncts not true, then the canonical rank), when it has one.
    fn unmatched_item(&mut self, image: &Image<'_>, mandate: &Mandate, list: &RuleList, env: &Env<'_>) -> u32 {
        let mut best: Option<(u32, u32, Rule)> = None;
        for k in 0..list.rules_count {
            let rule = Rule::decode(image.bytes, image.word(list.rules_off.wrapping_add(4 * k)));
            if rule.kind != image::RULE_ALLOW {
                continue;
            }
            let key = (cond::distance(image, rule.cond_off, rule.cond_count, env), image.entry(rule.entry).rank);
            if best.map_or(true, |(d, r, _)| key < (d, r)) {
                best = Some((key.0, key.1, rule));
            }
        }
        let rule = match best {
            Some((_, _, rule)) => rule,
            None => return mandate.otherwise_entry,
        };
        let (atom, what, value) = if cond::eval(image, rule.cond_off, rule.cond_count, env) == Truth::Error {
            match cond::cause(image, rule.cond_off, rule.cond_count, env) {
                Some((atom, problem)) => (atom, problem, 0),
                None => (0, NO_ATOM, 0),
            }
        } else {
            match cond::failed_atom(image, rule.cond_off, rule.cond_count, env) {
                Some(atom) => {
                    let attribute = cond::failed_attribute(image, atom);
                    (atom, FAILED, cond::value_token(image, attribute, env).map_or(0, |t| t.wrapping_add(1)))
                }
                None => (0, NO_ATOM, 0),
            }
        };
        let item = CLOSEST | (self.closest.len / 5) as u32;
        for word in [mandate.otherwise_entry, rule.entry, atom, what, value] {
            self.closest.push(word);
        }
        item
    }

    fn add(&mut self, escalates: bool, code: u32, entry: u32) {
        if escalates {
            self.escalate(code, entry);
        } else {
            self.deny(code, Some(entry));
        }
    }

    /// Examines every mandate of the chain (root first; the order does not matter, everything is sorted later).
    fn examine(&mut self, call: &Call, leaf: &Mandate, env: &Env<'_>, keys: &mut [u32]) {
        let (image, doc, req) = (env.image, env.doc, env.request);
        let tool = &call.record;
        if tool.flags & image::TOOL_ADMINISTERS_MANDATES != 0 {
            self.deny(err::SELF_MODIFICATION, None);
        }
        if lacks_scope(image, doc, tool, req) {
            self.deny(err::SCOPE_MISSING, None);
        }
        if has_undeclared_argument(image, doc, tool, call.arguments) {
            self.deny(err::UNDECLARED_ARGUMENT, None);
        }
        for position in 0..leaf.chain_count {
            let index = image.word(leaf.chain_off.wrapping_add(4 * position));
            let mandate = image.mandate(index);
            // Each mandate's conditions read its own instance's values (and its parent instance's).
            let instance = self.instances.of_mandate(index).copied();
            let env = Env { instance, parent: self.instances.parent_of(index).copied(), ..*env };
            if let Some((code, entry)) = window_of(&mandate, instance.as_ref(), req.now) {
                self.deny(code, Some(entry));
            }
            match stop_at(image, doc, &mandate, instance.as_ref(), tool, req) {
                None => {}
                Some(found) if found.strength == 0 => self.deny(err::STOP_ACTIVE, Some(mandate.stop_entry)),
                Some(found) => {
                    // Named by its id: written from the request ([`write_entries`]).
                    let item = DYNAMIC | (self.stops.len / 3) as u32;
                    self.stops.push(index);
                    self.stops.push(found.id);
                    self.stops.push(found.strength);
                    self.deny(err::STOP_ACTIVE, Some(item));
                }
            }
            if level_exceeded(&mandate, tool) {
                self.deny(err::LEVEL_EXCEEDED, Some(mandate.level_entry));
            }
            let mut granted = false;
            let list = rule_list(image, tool, index);
            for k in 0..list.rules_count {
                let rule_at = image.word(list.rules_off.wrapping_add(4 * k));
                let rule = Rule::decode(image.bytes, rule_at);
                let result = cond::eval(image, rule.cond_off, rule.cond_count, &env);
                // Rules without a written condition are `true`; one that errors still applies (fail closed).
                let applies = result != Truth::False;
                match rule.kind {
                    image::RULE_ALLOW if result == Truth::True => {
                        granted = true;
                        self.granted.push(rule.entry);
                    }
                    image::RULE_FORBID if applies => {
                        let item = self.item(image, &rule, result, &env);
                        self.deny(err::FORBIDDEN, Some(item));
                    }
                    image::RULE_LIMIT if result != Truth::True => {
                        let item = self.item(image, &rule, result, &env);
                        self.deny(err::LIMIT_EXCEEDED, Some(item));
                    }
                    image::RULE_SCOPE if result != Truth::True => {
                        let item = self.item(image, &rule, result, &env);
                        self.deny(err::SCOPE_OUTSIDE, Some(item));
                    }
                    // Resolved after the chain (`resolve_gates`): on a deny only a refusing gate adds to the decision.
                    image::RULE_GATE if applies => {
                        let item = self.item(image, &rule, result, &env);
                        self.gates.push(rule_at);
                        self.gates.push(position);
                        self.gates.push(item);
                        self.refusing_gates |= rule.escalates == 0;
                    }
                    image::RULE_OPERATION_ID if applies && req.operation_id.is_none() => {
                        self.deny(err::OPERATION_MISSING_ID, Some(rule.entry));
                    }
                    // Current only as the same JSON type with the same value: an integer, or a string.
                    image::RULE_FACT if applies => {
                        let name = image.str(rule.name_off, rule.name_len);
                        let current = if rule.text_len != 0 {
                            let value = req.facts.and_then(|facts| doc.get(facts, name));
                            let version = image.str(rule.text_off, rule.text_len);
                            value.map_or(false, |v| doc.token(v).kind() == STRING && doc.text_is(v, version))
                        } else {
                            let version = image::join64(rule.number_lo, rule.number_hi) as u64;
                            entry_u64(doc, req.facts, name) == Some(version)
                        };
                        if !current {
                            self.add(rule.escalates != 0, err::FACT_STALE, rule.entry);
                        }
                    }
                    image::RULE_BUDGET if applies => {
                        self.counters.push(rule.counter_rank);
                        let max = image::join64(rule.number_lo, rule.number_hi) as u64;
                        let name = image.str(rule.name_off, rule.name_len);
                        match entry_u64(doc, req.counters, name) {
                            Some(used) if used < max => {}
                            _ => self.deny(err::BUDGET_EXHAUSTED, Some(rule.entry)),
                        }
                    }
                    _ => {}
                }
            }
            if !granted {
                let item = self.unmatched_item(image, &mandate, &list, &env);
                self.add(mandate.flags & image::MANDATE_ESCALATES != 0, err::UNMATCHED, item);
            }
        }
        if self.deny_codes == 0 || self.refusing_gates {
            self.resolve_gates(image, doc, req, call, leaf, keys);
        }
    }

    /// The gates that apply, each satisfied by a presented approval (the smallest id) or missing one. Apart from a
    /// refusing gate's deny (`else deny`), only what an allow or an escalation writes depends on them (the rules
    /// that granted, the approvals consumed, the missing approvals), so a decision that denies skips the others,
    /// and the argument digest with them.
    fn resolve_gates(
        &mut self,
        image: &Image<'_>,
        doc: &Doc<'_>,
        req: &Request,
        call: &Call,
        leaf: &Mandate,
        keys: &mut [u32],
    ) {
        if self.gates.len == 0 {
            return;
        }
        // The usable approvals, read once, stay at the front of the parse's key slots; the rest sorts object keys
        // for the argument digest.
        let count = req.approvals(doc, keys, self.approvals).map_or(0, <[u32]>::len);
        self.usable_len = count;
        let (usable, spare) = keys.split_at_mut(count.min(keys.len()));
        let mut i = 0;
        while i + 2 < self.gates.len {
            let gate = (self.gates.items.get(i), self.gates.items.get(i + 1), self.gates.items.get(i + 2));
            let (rule_at, position, item) = match gate {
                (Some(&r), Some(&p), Some(&e)) => (r, p, e),
                _ => break,
            };
            i += 3;
            let rule = Rule::decode(image.bytes, rule_at);
            let escalates = rule.escalates != 0;
            if escalates && self.deny_codes != 0 {
                continue;
            }
            let kind = image.kind(rule.kind_index);
            // An approval counts for this mandate's gates only if issued under it or an ancestor: authority flows
            // down the chain, never up.
            // Each refusal's code joins `approval.missing`, with the gate's outcome.
            match self.chosen_approval(image, doc, req, call, &kind, leaf, position, usable, spare) {
                Ok(approval) => {
                    if kind.single_use != 0 {
                        self.consumed.push(approval.id);
                    }
                    self.used.push(approval.id);
                    self.used.push(approval.approved_by.unwrap_or(NONE));
                    self.used.push(rule.kind_index);
                    self.granted.push(item);
                }
                // `else deny`: refused, and nothing for the principal's queue.
                Err(refused) if !escalates => self.deny(err::APPROVAL_MISSING | refused, Some(item)),
                Err(refused) => {
                    self.missing.push(rule.kind_index);
                    self.missing.push(position);
                    self.escalate(err::APPROVAL_MISSING | refused, item);
                }
            }
        }
    }

    /// The smallest id (in byte order) of the presented approvals that satisfy a gate of `kind` of the chain's
    /// mandate at `position`; without one, the reason codes of the approvals of that kind it refused.
    #[allow(clippy::too_many_arguments)]
    fn chosen_approval(
        &mut self,
        image: &Image<'_>,
        doc: &Doc<'_>,
        req: &Request,
        call: &Call,
        kind: &Kind,
        leaf: &Mandate,
        position: u32,
        usable: &[u32],
        spare: &mut [u32],
    ) -> Result<Approval, u32> {
        if kind.binds & image::BINDS_ARGUMENTS != 0 && self.digest.is_none() {
            self.digest = Some(digest(image, doc, call, spare));
        }
        let name = image.str(kind.name_off, kind.name_len);
        let mut chosen: Option<Approval> = None;
        let mut refused = 0;
        for i in 0..usable.len() {
            let approval = match usable_approval(self.approvals, doc, usable, i) {
                Some(a) if doc.text_is(a.kind, name) => a,
                _ => continue,
            };
            let gate = Gate { kind, leaf, position, instances: &self.instances };
            if let Some(r) = refusal(image, doc, &approval, &gate, req, call, self.digest.as_ref()) {
                refused |= r.code;
                continue;
            }
            chosen = match chosen {
                Some(best) if doc.text_cmp(best.id, approval.id) != Ordering::Greater => Some(best),
                _ => Some(approval),
            };
        }
        chosen.ok_or(refused)
    }

    /// Writes the decision.
    #[allow(clippy::too_many_arguments)]
    fn write(
        mut self,
        image: &Image<'_>,
        doc: &Doc<'_>,
        req: &Request,
        call: &Call,
        leaf: &Mandate,
        keys: &mut [u32],
        out: &mut Out<'_>,
    ) {
        let policy = image.str(image.header.policy_off, image.header.policy_len);
        let escalates = self.deny_codes == 0 && self.escalate_codes != 0;
        let (outcome, codes, rules): (&[u8], u32, &mut List<'w>) = if self.deny_codes != 0 {
            (b"deny", self.deny_codes, &mut self.deny)
        } else if escalates {
            (b"escalate", self.escalate_codes, &mut self.escalate)
        } else {
            (b"allow", err::ALLOWED, &mut self.granted)
        };
        out.write(b"{\"decision\":\"");
        out.write(outcome);
        out.write(b"\",\"reasons\":");
        err::write_codes(out, codes);
        out.write(b",\"rules\":");
        let (stops, causes, closest) = (self.stops.len, self.causes.len, self.closest.len);
        let found = Found {
            stops: self.stops.items.get(..stops).unwrap_or(&[]),
            causes: self.causes.items.get(..causes).unwrap_or(&[]),
            closest: self.closest.items.get(..closest).unwrap_or(&[]),
            instances: &self.instances,
        };
        write_entries(image, doc, &found, rules.slice(), out);
        out.write(b",\"missing_approvals\":");
        if escalates {
            self.write_missing(image, doc, req, call, leaf, keys, out);
        } else {
            out.write(b"[]");
        }
        out.write(b",\"approvals\":");
        if self.deny_codes == 0 && !escalates {
            self.write_used(image, doc, out);
        } else {
            out.write(b"[]");
        }
        out.write(b",\"obligations\":");
        if self.deny_codes == 0 && !escalates {
            self.write_obligations(image, doc, req, call, out);
        } else {
            out.write(b"[]");
        }
        out.write(b",\"mandate_chain\":");
        write_chain(image, doc, leaf, &self.instances, out);
        write_credential(out, req.credential_id.map(|id| (doc, id)));
        out.write(b",\"escalate_to\":");
        if escalates {
            // The principal the chain acts for (`eval::acting_principal`): an instance's own, else the root's.
            match self.instances.leaf() {
                Some(instance) => write_string_tok(out, doc, instance.grant.principal),
                None => {
                    let root = image.mandate(image.word(leaf.chain_off));
                    out.write(image.str(root.principal_off, root.principal_len));
                }
            }
        } else {
            out.write(b"null");
        }
        out.write(b",\"policy\":");
        out.write(policy);
        out.byte(b'}');
    }

    /// `missing_approvals`: one per kind (the binding is the call's for every gate of a kind), by kind name, issued
    /// under the nearest the root of the mandates it serves, which are listed by name; with the fields the kind
    /// binds.
    #[allow(clippy::too_many_arguments)]
    fn write_missing(
        &mut self,
        image: &Image<'_>,
        doc: &Doc<'_>,
        req: &Request,
        call: &Call,
        leaf: &Mandate,
        keys: &mut [u32],
        out: &mut Out<'_>,
    ) {
        let (usable, spare) = keys.split_at_mut(self.usable_len.min(keys.len()));
        let pairs = self.missing.slice();
        let count = pairs.len() / 2;
        let pair = |i: u32| -> (u32, u32) {
            let at = 2 * i as usize;
            (pairs.get(at).copied().unwrap_or(0), pairs.get(at + 1).copied().unwrap_or(0))
        };
        let index_at = |position: u32| image.word(leaf.chain_off.wrapping_add(4 * position));
        let mandate_at = |position: u32| image.mandate(index_at(position));
        let instances = &self.instances;
        let instance_at = |position: u32| instances.of_mandate(index_at(position));
        let key = |i: u32| {
            let (kind, position) = pair(i);
            (image.kind(kind).name_rank, mandate_at(position).name_rank)
        };
        let order = self.order.get_mut(..count).unwrap_or(&mut []);
        for (i, slot) in order.iter_mut().enumerate() {
            *slot = i as u32;
        }
        heap_sort(order, |a, b| key(a) < key(b));
        out.byte(b'[');
        let mut start = 0;
        while let Some(&first) = order.get(start) {
            let kind_rank = key(first).0;
            let end = start + order.iter().skip(start).take_while(|&&i| key(i).0 == kind_rank).count();
            let group = order.get(start..end).unwrap_or(&[]);
            if start > 0 {
                out.byte(b',');
            }
            start = end;
            let (kind_index, _) = pair(first);
            let kind = image.kind(kind_index);
            let top_position = group.iter().map(|&i| pair(i).1).min().unwrap_or(0);
            let top = mandate_at(top_position);
            out.write(b"{\"kind\":");
            out.write(image.str(kind.name_json_off, kind.name_json_len));
            out.write(b",\"mandate\":");
            write_mandate_name(image, doc, &top, instance_at(top_position), out);
            out.write(b",\"mandates\":[");
            let mut last = None;
            for &i in group {
                let mandate = mandate_at(pair(i).1);
                if last == Some(mandate.name_rank) {
                    continue;
                }
                if last.is_some() {
                    out.byte(b',');
                }
                last = Some(mandate.name_rank);
                write_mandate_name(image, doc, &mandate, instance_at(pair(i).1), out);
            }
            out.byte(b']');
            if kind.binds & image::BINDS_TOOL != 0 {
                out.write(b",\"tool\":");
                write_string_tok(out, doc, call.name);
            }
            if let (true, Some(target)) = (kind.binds & image::BINDS_TARGET != 0, req.resource_id) {
                out.write(b",\"target\":");
                write_string_tok(out, doc, target);
            }
            if kind.binds & image::BINDS_ARGUMENTS != 0 {
                out.write(b",\"digest\":\"");
                out.write(self.digest.as_ref().map_or(&[][..], |d| &d[..]));
                out.byte(b'"');
            }
            if let (true, Some(manifest)) = (kind.binds & image::BINDS_MANIFEST != 0, manifest(doc, call)) {
                out.write(b",\"manifest\":");
                write_string_tok(out, doc, manifest);
            }
            out.write(b",\"refused\":");
            let gate = Gate { kind: &kind, leaf, position: top_position, instances: &self.instances };
            write_refused(image, doc, req, call, &gate, self.approvals, usable, spare, self.digest.as_ref(), out);
            out.byte(b'}');
        }
        out.byte(b']');
    }

    /// `approvals` of an allow: the approvals that satisfied its gates, by id without repeats (an id is one
    /// approval: identical duplicates only), each with its kind and who approved it.
    fn write_used(&mut self, image: &Image<'_>, doc: &Doc<'_>, out: &mut Out<'_>) {
        let triples = self.used.slice();
        let count = triples.len() / 3;
        let field = |i: u32, k: usize| triples.get(3 * i as usize + k).copied().unwrap_or(NONE);
        let order = self.order.get_mut(..count).unwrap_or(&mut []);
        for (i, slot) in order.iter_mut().enumerate() {
            *slot = i as u32;
        }
        heap_sort(order, |a, b| doc.text_cmp(field(a, 0), field(b, 0)) == Ordering::Less);
        out.byte(b'[');
        let mut last: Option<u32> = None;
        for &i in order.iter() {
            let id = field(i, 0);
            if let Some(prev) = last {
                if doc.text_eq(prev, id) {
                    continue;
                }
                out.byte(b',');
            }
            last = Some(id);
            let kind = image.kind(field(i, 2));
            out.write(b"{\"id\":");
            write_string_tok(out, doc, id);
            out.write(b",\"kind\":");
            out.write(image.str(kind.name_json_off, kind.name_json_len));
            let by = field(i, 1);
            if by != NONE {
                out.write(b",\"approved_by\":");
                write_string_tok(out, doc, by);
            }
            out.byte(b'}');
        }
        out.byte(b']');
    }

    /// `obligations` of an allow, in the byte order of their JSON, without repeats: approvals consumed
    /// (`consume-approval`), budgets counted (`increment-counter`), the operation recorded (`record-operation`).
    fn write_obligations(&mut self, image: &Image<'_>, doc: &Doc<'_>, req: &Request, call: &Call, out: &mut Out<'_>) {
        let mut first = true;
        let mut separate = |out: &mut Out<'_>| {
            if !first {
                out.byte(b',');
            }
            first = false;
        };
        out.byte(b'[');
        let consumed = self.consumed.slice();
        // By the escaped id followed by the closing `"}`, as the whole JSON sorts.
        let json_order = |a: u32, b: u32| escaped(doc, a).chain(*b"\"}").cmp(escaped(doc, b).chain(*b"\"}"));
        heap_sort(consumed, |a, b| json_order(a, b) == Ordering::Less);
        let mut last: Option<u32> = None;
        for &id in consumed.iter() {
            if let Some(prev) = last {
                if json_order(prev, id) == Ordering::Equal {
                    continue;
                }
            }
            last = Some(id);
            separate(out);
            out.write(b"{\"kind\":\"consume-approval\",\"id\":");
            write_string_tok(out, doc, id);
            out.byte(b'}');
        }
        let counters = self.counters.slice();
        heap_sort(counters, |a, b| a < b);
        let mut last = None;
        for &rank in counters.iter() {
            if last == Some(rank) {
                continue;
            }
            last = Some(rank);
            if let Some(name) = counter_name(image, call, rank) {
                separate(out);
                out.write(b"{\"kind\":\"increment-counter\",\"counter\":");
                write_string(out, name);
                out.byte(b'}');
            }
        }
        if let (Some(id), true) = (req.operation_id, call.record.flags & image::TOOL_SIDE_EFFECTS != 0) {
            separate(out);
            out.write(b"{\"kind\":\"record-operation\",\"id\":");
            write_string_tok(out, doc, id);
            out.byte(b'}');
        }
        out.byte(b']');
    }
}

/// `refused` of a missing approval: the presented approvals of its kind, by id without repeats, each with why it
/// does not satisfy the gate at `position` (every gate of the kind the call misses refuses it for the same reason).
#[allow(clippy::too_many_arguments)]
fn write_refused(
    image: &Image<'_>,
    doc: &Doc<'_>,
    req: &Request,
    call: &Call,
    gate: &Gate<'_>,
    cache: &[Approval],
    usable: &[u32],
    spare: &mut [u32],
    digest: Option<&[u8; 71]>,
    out: &mut Out<'_>,
) {
    let name = image.str(gate.kind.name_off, gate.kind.name_len);
    let judged = |i: usize| {
        let approval = usable_approval(cache, doc, usable, i).filter(|a| doc.text_is(a.kind, name))?;
        let refusal = refusal(image, doc, &approval, gate, req, call, digest)?;
        Some((approval.id, refusal))
    };
    // The refused ones' ids and usable indices, then their order by id (a permutation and the sort's buffer).
    let mut parts = spare.chunks_mut((spare.len() / 4).max(1));
    let (ids, indices) = (parts.next().unwrap_or(&mut []), parts.next().unwrap_or(&mut []));
    let (order, buf) = (parts.next().unwrap_or(&mut []), parts.next().unwrap_or(&mut []));
    let mut n = 0;
    for i in 0..usable.len() {
        if let Some((id, _)) = judged(i) {
            if let (Some(id_slot), Some(index_slot), Some(order_slot)) =
                (ids.get_mut(n), indices.get_mut(n), order.get_mut(n))
            {
                *id_slot = id;
                *index_slot = i as u32;
                *order_slot = n as u32;
                n += 1;
            }
        }
    }
    let ids = ids.get(..n).unwrap_or(&[]);
    let order = order.get_mut(..n).unwrap_or(&mut []);
    let id_of = |k: u32| ids.get(k as usize).copied().unwrap_or(0);
    merge_sort(order, buf, |a, b| doc.text_cmp(id_of(a), id_of(b)).is_lt());
    out.byte(b'[');
    let mut last: Option<u32> = None;
    for &k in order.iter() {
        let id = id_of(k);
        if let Some(prev) = last {
            if doc.text_eq(prev, id) {
                continue;
            }
            out.byte(b',');
        }
        last = Some(id);
        let refusal = indices.get(k as usize).and_then(|&i| judged(i as usize)).map(|(_, r)| r);
        let refusal = refusal.unwrap_or(Refusal { code: 0, binding: 0 });
        out.write(b"{\"id\":");
        write_string_tok(out, doc, id);
        out.write(b",\"why\":\"");
        let code = err::name(refusal.code).as_bytes();
        out.write(code.strip_prefix(b"approval.").unwrap_or(code));
        out.byte(b'"');
        if refusal.binding != 0 {
            out.write(b",\"binding\":\"");
            out.write(binding_name(refusal.binding));
            out.byte(b'"');
        }
        out.byte(b'}');
    }
    out.byte(b']');
}

/// Whether the kind's `approved by` admits the identity `by` (a string token) in the chain ending at `leaf`: the
/// principal the chain acts for (an instance's own, else the root's), one of its ids, or an identity under one of
/// its prefixes (with `under`'s path rules).
fn admits(image: &Image<'_>, doc: &Doc<'_>, kind: &Kind, leaf: &Mandate, instances: &Instances, by: u32) -> bool {
    if kind.approver_principal != 0 {
        let acting = match instances.leaf() {
            Some(instance) => doc.text_eq(by, instance.grant.principal),
            None => {
                let root = image.mandate(image.word(leaf.chain_off));
                doc.text_is(by, image.str(root.principal_text_off, root.principal_text_len))
            }
        };
        if acting {
            return true;
        }
    }
    let ids = (kind.approver_ids_off, kind.approver_ids_count);
    holds(image, doc, ids, (kind.approver_prefixes_off, kind.approver_prefixes_count), by)
}

/// No token: an approval without `approved_by` in [`Work::used`].
const NONE: u32 = u32::MAX;

/// A gate: its approval kind, and its mandate as a position in the chain ending at `leaf`.
struct Gate<'a> {
    kind: &'a Kind,
    leaf: &'a Mandate,
    position: u32,
    /// The instances of the chain, if any.
    instances: &'a Instances,
}

/// The `i`th usable approval: read once per decision for the first ones (`cache`), at each use for the rest.
fn usable_approval(cache: &[Approval], doc: &Doc<'_>, usable: &[u32], i: usize) -> Option<Approval> {
    match cache.get(i) {
        Some(read) => Some(*read),
        None => request::approval(doc, *usable.get(i)?),
    }
}

/// The name of a `BINDS_*` bit, as `eval::Binding::name` writes it.
fn binding_name(binding: u32) -> &'static [u8] {
    match binding {
        image::BINDS_TOOL => b"tool",
        image::BINDS_TARGET => b"target",
        image::BINDS_ARGUMENTS => b"arguments",
        _ => b"manifest",
    }
}

/// The name of the budget counter of rank `rank` among the rules of the call's chain.
fn counter_name<'a>(image: &Image<'a>, call: &Call, rank: u32) -> Option<&'a [u8]> {
    let tool = &call.record;
    for l in 0..tool.lists_count {
        let list = RuleList::decode(image.bytes, Image::at(tool.lists_off, RuleList::SIZE, l));
        for k in 0..list.rules_count {
            let rule = Rule::decode(image.bytes, image.word(list.rules_off.wrapping_add(4 * k)));
            if rule.kind == image::RULE_BUDGET && rule.counter_rank == rank {
                return Some(image.str(rule.name_off, rule.name_len));
            }
        }
    }
    None
}

/// What the entries of a list refer to besides the image ([`DYNAMIC`], [`CAUSED`] and [`CLOSEST`] items), and the
/// instance that entries of a template's mandate name.
pub(crate) struct Found<'f> {
    pub stops: &'f [u32],
    pub causes: &'f [u32],
    pub closest: &'f [u32],
    pub instances: &'f Instances,
}

/// Writes a mandate's name as JSON: an instance's mandate as the instance.
fn write_mandate_name(
    image: &Image<'_>,
    doc: &Doc<'_>,
    mandate: &Mandate,
    instance: Option<&Instance>,
    out: &mut Out<'_>,
) {
    match instance {
        Some(instance) if grants::is_template(mandate) => instance.write_name(image, doc, out),
        _ => out.write(image.str(mandate.name_json_off, mandate.name_json_len)),
    }
}

/// Writes `entry`'s JSON, without its closing brace when `open`. An entry of a template's mandate names the
/// chain's instance of that template (its head replaced), and the instance's window is written from its instants.
pub(crate) fn write_entry(
    image: &Image<'_>,
    doc: &Doc<'_>,
    instances: &Instances,
    entry: u32,
    open: bool,
    out: &mut impl Sink,
) {
    let entry = image.entry(entry);
    let json = image.str(entry.json_off, entry.json_len);
    let json = if open { json.get(..json.len().saturating_sub(1)).unwrap_or(&[]) } else { json };
    let instance = match instances.of_template(entry.template.wrapping_sub(1)) {
        Some(instance) if entry.instance != 0 && entry.template != 0 => instance,
        _ => return out.write(json),
    };
    out.write(b"{\"mandate\":");
    instance.write_name(image, doc, out);
    let rest = json.get(entry.instance as usize..).unwrap_or(&[]);
    if entry.window != 0 {
        // `,"rule":"valid"` and the rest.
        const RULE: &[u8] = b",\"rule\":\"valid\"";
        out.write(b",\"rule\":\"");
        instance.write_window(out);
        out.byte(b'"');
        out.write(rest.get(RULE.len()..).unwrap_or(&[]));
    } else {
        out.write(rest);
    }
}

/// Writes `entry`'s JSON without its closing brace.
fn write_open(image: &Image<'_>, doc: &Doc<'_>, instances: &Instances, entry: u32, out: &mut Out<'_>) {
    write_entry(image, doc, instances, entry, true, out);
}

/// `,"unevaluable":{"attribute":…,"problem":…}` of atom `atom`.
fn write_unevaluable(image: &Image<'_>, atom: u32, problem: u32, out: &mut Out<'_>) {
    out.write(b",\"unevaluable\":{\"attribute\":");
    cond::write_attribute(out, image, atom);
    out.write(b",\"problem\":\"");
    out.write(cond::problem_name(problem));
    out.write(b"\"}");
}

/// Writes the entries, sorted by rank and without repeats, as a JSON array.
pub(crate) fn write_entries(
    image: &Image<'_>,
    doc: &Doc<'_>,
    found: &Found<'_>,
    entries: &mut [u32],
    out: &mut Out<'_>,
) {
    let (stops, causes, closest) = (found.stops, found.causes, found.closest);
    let instance = found.instances;
    let cause = |item: u32| -> (u32, u32, u32) {
        let at = 3 * (item & !CAUSED) as usize;
        let word = |k: usize| causes.get(at + k).copied().unwrap_or(0);
        (word(0), word(1), word(2))
    };
    let near = |item: u32| -> [u32; 5] {
        let at = 5 * (item & !CLOSEST) as usize;
        let word = |k: usize| closest.get(at + k).copied().unwrap_or(0);
        [word(0), word(1), word(2), word(3), word(4)]
    };
    let stop = |item: u32| -> (Mandate, u32, u32) {
        let at = 3 * (item & !DYNAMIC) as usize;
        let word = |k: usize| stops.get(at + k).copied().unwrap_or(0);
        (image.mandate(word(0)), word(1), word(2))
    };
    // A stop named by its id sorts where its mandate's `stop` entry does: no other clause's text begins with
    // `stop`, and a mandate has one stop entry in a decision.
    let rank = |e: u32| {
        if e & DYNAMIC != 0 {
            image.entry(stop(e).0.stop_entry).rank
        } else if e & CAUSED != 0 {
            image.entry(cause(e).0).rank
        } else if e & CLOSEST != 0 {
            image.entry(near(e)[0]).rank
        } else {
            image.entry(e).rank
        }
    };
    heap_sort(entries, |a, b| rank(a) < rank(b));
    out.byte(b'[');
    let mut last = None;
    for &e in entries.iter() {
        if last == Some(e) {
            continue;
        }
        if last.is_some() {
            out.byte(b',');
        }
        last = Some(e);
        if e & DYNAMIC == 0 && e & CAUSED != 0 {
            // The entry's object with `"unevaluable":{…}` before its closing brace.
            let (entry, atom, problem) = cause(e);
            write_open(image, doc, instance, entry, out);
            write_unevaluable(image, atom, problem, out);
            out.byte(b'}');
            continue;
        }
        if e & DYNAMIC == 0 && e & CLOSEST != 0 {
            // The `otherwise` entry with `"closest":{…}`: the grant's entry with what failed.
            let [otherwise, grant, atom, what, value] = near(e);
            write_open(image, doc, instance, otherwise, out);
            out.write(b",\"closest\":");
            write_open(image, doc, instance, grant, out);
            if what == FAILED {
                let record = image::Atom::decode(image.bytes, atom);
                out.write(b",\"failed\":{\"condition\":");
                out.write(image.str(record.text_off, record.text_len));
                out.write(b",\"attribute\":");
                cond::write_attribute(out, image, cond::failed_attribute(image, atom));
                if value != 0 {
                    out.write(b",\"value\":");
                    write_canonical(out, doc, value.wrapping_sub(1), &mut [], 0);
                }
                out.byte(b'}');
            } else if what != NO_ATOM {
                write_unevaluable(image, atom, what, out);
            }
            out.write(b"}}");
            continue;
        }
        if e & DYNAMIC == 0 {
            write_entry(image, doc, instance, e, false, out);
            continue;
        }
        // The listing's `{"mandate":M,"rule":"stop (LEVEL)","at":…}` with ` ID` written after `stop`.
        let (mandate, id, strength) = stop(e);
        let level = match strength {
            1 => mandate.pause_entry,
            2 => mandate.cancel_entry,
            3 => mandate.revoke_entry,
            _ => mandate.quarantine_entry,
        };
        let entry = image.entry(level);
        let json = image.str(entry.json_off, entry.json_len);
        // `{"mandate":` + the name's JSON + `,"rule":"stop`.
        let split = (11 + mandate.name_json_len as usize + 13).min(json.len());
        let (head, tail) = json.split_at(split);
        match instance.of_template(entry.template.wrapping_sub(1)) {
            Some(instance) if entry.instance != 0 && entry.template != 0 => {
                out.write(b"{\"mandate\":");
                instance.write_name(image, doc, out);
                out.write(head.get(entry.instance as usize..).unwrap_or(&[]));
            }
            _ => out.write(head),
        }
        out.byte(b' ');
        for b in escaped(doc, id) {
            out.byte(b);
        }
        out.write(tail);
    }
    out.byte(b']');
}

/// The rules of mandate `mandate` that cover `tool` (lists are sorted by mandate: a binary search).
pub(crate) fn rule_list(image: &Image<'_>, tool: &Tool, mandate: u32) -> RuleList {
    let (mut lo, mut hi) = (0, tool.lists_count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let list = RuleList::decode(image.bytes, Image::at(tool.lists_off, RuleList::SIZE, mid));
        match list.mandate.cmp(&mandate) {
            Ordering::Equal => return list,
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
        }
    }
    RuleList::default()
}

/// Whether the tool requires scopes and the credential carries none of them (no credential: no scopes).
pub(crate) fn lacks_scope(image: &Image<'_>, doc: &Doc<'_>, tool: &Tool, req: &Request) -> bool {
    if tool.scopes_count == 0 {
        return false;
    }
    let held = match req.scopes {
        Some(scopes) => scopes,
        None => return true,
    };
    !(0..tool.scopes_count).any(|i| {
        let scope = image.str_at(tool.scopes_off, i);
        elements(doc, held).any(|s| doc.text_is(s, scope))
    })
}

/// Whether the call passes an argument its tool does not declare (tools are closed unless `open arguments`).
fn has_undeclared_argument(image: &Image<'_>, doc: &Doc<'_>, tool: &Tool, arguments: Option<u32>) -> bool {
    let arguments = match arguments {
        Some(a) if tool.flags & image::TOOL_OPEN_ARGUMENTS == 0 => a,
        _ => return false,
    };
    request::elements_of_object(doc, arguments).any(|key| image.param(tool, |name| doc.text_is(key, name)).is_none())
}

/// Whether `now` (nanoseconds) is outside the mandate's validity window (whole seconds): the reason and the window's
/// entry.
pub(crate) fn validity(mandate: &Mandate, now: i128) -> Option<(u32, u32)> {
    let from = i128::from(image::join64(mandate.valid_from_lo, mandate.valid_from_hi)) * NANOS_PER_SECOND;
    let until = i128::from(image::join64(mandate.valid_until_lo, mandate.valid_until_hi)) * NANOS_PER_SECOND;
    if mandate.flags & image::MANDATE_VALID_FROM != 0 && now < from {
        Some((err::NOT_YET_VALID, mandate.validity_entry))
    } else if mandate.flags & image::MANDATE_VALID_UNTIL != 0 && now >= until {
        Some((err::EXPIRED, mandate.validity_entry))
    } else {
        None
    }
}

/// [`validity`], and for an instance's mandate its own window (`eval::window_of`): instants of its values or of
/// the template's.
pub(crate) fn window_of(mandate: &Mandate, instance: Option<&Instance>, now: i128) -> Option<(u32, u32)> {
    let instance = match instance {
        Some(instance) if grants::is_template(mandate) => instance,
        _ => return validity(mandate, now),
    };
    if instance.valid_from.map_or(false, |from| now < from) {
        Some((err::NOT_YET_VALID, mandate.validity_entry))
    } else if instance.valid_until.map_or(false, |until| now >= until) {
        Some((err::EXPIRED, mandate.validity_entry))
    } else {
        None
    }
}

/// The stop that refuses this call at `mandate` (`eval::stopped`): one naming the mandate, or at a root its
/// principal, whose level refuses the tool (quarantine every tool; the other levels and a bare name tools with side
/// effects). Of several: the strongest, then the smallest id; a bare name is the weakest.
pub(crate) fn stop_at(
    image: &Image<'_>,
    doc: &Doc<'_>,
    mandate: &Mandate,
    instance: Option<&Instance>,
    tool: &Tool,
    req: &Request,
) -> Option<Stop> {
    stop_for(image, doc, mandate, instance, tool.flags & image::TOOL_SIDE_EFFECTS != 0, req)
}

/// [`stop_at`] for a tool with or without side effects.
pub(crate) fn stop_for(
    image: &Image<'_>,
    doc: &Doc<'_>,
    mandate: &Mandate,
    instance: Option<&Instance>,
    side_effects: bool,
    req: &Request,
) -> Option<Stop> {
    // An instance's mandate is named as the instance.
    let instance = instance.filter(|_| grants::is_template(mandate));
    let stops = req.stops?;
    let name = image.str(mandate.name_off, mandate.name_len);
    let principal = image.str(mandate.principal_text_off, mandate.principal_text_len);
    let root = mandate.chain_count == 1;
    let mut best: Option<Stop> = None;
    for item in elements(doc, stops) {
        let stop = match request::stop(doc, item) {
            Some(stop) => stop,
            None => continue,
        };
        let reaches = if stop.principal {
            match instance {
                // The mandates a principal gave (`eval::stopped`): her roots, and an instance she was granted under
                // a ceiling of someone else's (every mandate of a static chain carries its root's principal).
                // Under an instance of hers (sub-delegation: the same principal, checked) it is reached through its
                // parent instance, not as a mandate she gave.
                Some(instance) => {
                    let root = image.mandate(image.word(mandate.chain_off));
                    let ceiling = image.str(root.principal_text_off, root.principal_text_len);
                    image.template(instance.template).parent_template == 0
                        && doc.text_eq(stop.on, instance.grant.principal)
                        && !doc.text_is(stop.on, ceiling)
                }
                None => root && doc.text_is(stop.on, principal),
            }
        } else {
            match instance {
                Some(instance) => instance.is_named(image, doc, stop.on),
                None => doc.text_is(stop.on, name),
            }
        };
        if !reaches || !(side_effects || stop.strength == request::STOP_LEVELS.len() as u32) {
            continue;
        }
        best = match best {
            Some(b) if b.strength > stop.strength => Some(b),
            Some(b)
                if b.strength == stop.strength
                    && (b.strength == 0 || doc.text_cmp(b.id, stop.id) != Ordering::Greater) =>
            {
                Some(b)
            }
            _ => Some(stop),
        };
    }
    best
}

/// The tool's level is above the mandate's maximum.
pub(crate) fn level_exceeded(mandate: &Mandate, tool: &Tool) -> bool {
    mandate.flags & image::MANDATE_MAX_LEVEL != 0 && tool.level > mandate.max_level
}

/// The entry of `name` in the object `obj` as a JSON integer in `u64` (serde_json's `as_u64`: digits only).
fn entry_u64(doc: &Doc<'_>, obj: Option<u32>, name: &[u8]) -> Option<u64> {
    let value = doc.get(obj?, name)?;
    if doc.token(value).kind() != NUMBER {
        return None;
    }
    let mut n: u64 = 0;
    let raw = doc.raw(value);
    if raw.is_empty() {
        return None;
    }
    for &c in raw {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

/// The argument digest of the call (`sha256:…`).
fn digest(image: &Image<'_>, doc: &Doc<'_>, call: &Call, keys: &mut [u32]) -> [u8; 71] {
    argument_digest(doc, call.arguments, image.tool_name(call.tool), keys).0
}

/// `args.manifest` when it is a string that is not blank (a blank manifest binds nothing).
fn manifest(doc: &Doc<'_>, call: &Call) -> Option<u32> {
    let value = doc.get(call.arguments?, b"manifest")?;
    let is_string = doc.token(value).kind() == STRING;
    (is_string && !request::is_blank(doc, value)).then_some(value)
}

/// Why a presented approval does not satisfy a gate: a reason code (`err::APPROVAL_*`) and, for a binding that
/// differs, its `BINDS_*` bit. The twin of `eval::Refusal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Refusal {
    code: u32,
    binding: u32,
}

/// Why a presented approval of the gate's `kind` does not satisfy the gate for this call (`None`: it does); the
/// gate's mandate is the chain's mandate at `position`, and the issuers are it and its ancestors. The checks run in
/// `eval::Refusal`'s order: consumed, not yet valid, expired, TTL passed, a binding, the issuing mandate.
#[allow(clippy::too_many_arguments)]
fn refusal(
    image: &Image<'_>,
    doc: &Doc<'_>,
    approval: &Approval,
    gate: &Gate<'_>,
    req: &Request,
    call: &Call,
    digest: Option<&[u8; 71]>,
) -> Option<Refusal> {
    let (kind, leaf, position) = (gate.kind, gate.leaf, gate.position);
    let (now, issued) = (req.now, approval.issued_at);
    let ttl = i128::from(image::join64(kind.ttl_lo, kind.ttl_hi) as u64) * NANOS_PER_SECOND;
    let refused = |code: u32| Some(Refusal { code, binding: 0 });
    if approval.consumed {
        return refused(err::APPROVAL_CONSUMED);
    }
    if now < issued {
        return refused(err::APPROVAL_NOT_YET_VALID);
    }
    if now >= approval.expires_at {
        return refused(err::APPROVAL_EXPIRED);
    }
    if now >= issued + ttl {
        return refused(err::APPROVAL_TTL_PASSED);
    }
    let text_eq = |a: Option<u32>, b: Option<u32>| match (a, b) {
        (Some(a), Some(b)) => doc.text_eq(a, b),
        _ => false,
    };
    let digest_eq = match (approval.digest, digest) {
        (Some(given), Some(d)) => doc.text_is(given, d),
        _ => false,
    };
    let bindings = [
        (image::BINDS_TOOL, text_eq(approval.tool, Some(call.name))),
        (image::BINDS_TARGET, text_eq(approval.target, req.resource_id)),
        (image::BINDS_ARGUMENTS, digest_eq),
        (image::BINDS_MANIFEST, text_eq(approval.manifest, manifest(doc, call))),
    ];
    for (binding, bound) in bindings {
        if kind.binds & binding != 0 && !bound {
            return Some(Refusal { code: err::APPROVAL_BINDING_MISMATCH, binding });
        }
    }
    if kind.approvers != 0
        && !approval.approved_by.map_or(false, |by| admits(image, doc, kind, leaf, gate.instances, by))
    {
        return refused(err::APPROVAL_WRONG_APPROVER);
    }
    let in_chain = (0..=position).any(|p| {
        let m = image.word(leaf.chain_off.wrapping_add(4 * p));
        // An instance's mandate (past the policy's) is named as the instance.
        match gate.instances.of_mandate(m) {
            Some(instance) if m >= image.header.mandates_count => instance.is_named(image, doc, approval.mandate),
            _ => doc.text_is(approval.mandate, image.mandate_name(m)),
        }
    });
    if !in_chain {
        return refused(err::APPROVAL_WRONG_MANDATE);
    }
    None
}

/// Writes the JSON of `remit_policy_info` (docs/abi.md), which the compiler stored whole.
pub fn policy_info(image: &Image<'_>, out: &mut Out<'_>) {
    out.write(image.str(image.header.info_off, image.header.info_len));
}
