//! The policy image writer: a checked [`Program`] as the data the runtime (`crates/remit-rt`) decides with. Every
//! record's layout is `remit_rt::image`'s; this file only fills them in. What the runtime would otherwise compute
//! per call and is fixed by the policy is computed here once: the chain of every mandate (and its JSON), the JSON
//! and canonical rank of every deciding rule, the ranks that order missing approvals and counters, the rules of
//! each (tool, mandate) pair, the name hash tables.

use std::collections::HashMap;

use remit_rt::image::{self as rec, Header, Str};

use crate::eval::{self, DecidingRule, Obligation};
use crate::ir::{Atom, Attr, Binding, Cond, Program, RuleKind, Term, Test, Type, Value};
use crate::syntax::ast::{CompareOp, FactVersion, Outcome};

pub use remit_module::err::ImageError;

/// Writes the image of `program`.
pub fn write(program: &Program) -> Result<Vec<u8>, ImageError> {
    Writer::new(program).write()
}

struct Writer<'p> {
    program: &'p Program,
    bytes: Vec<u8>,
    strings: HashMap<Vec<u8>, (u32, u32)>,
    types: HashMap<Type, u32>,
    /// Each distinct atom is written once (a scope restated in every mandate of a chain shares one record).
    atoms: HashMap<Atom, u32>,
    entries: Vec<DecidingRule>,
    entry_index: HashMap<DecidingRule, u32>,
    /// A condition nests `and`/`or` deeper than the runtime evaluates, or an operand is itself derived.
    too_deep: bool,
    /// The calendars conditions read, by name, in the order of their records (each written once, at the end).
    calendars: Vec<String>,
    calendar_index: HashMap<String, u32>,
}

impl<'p> Writer<'p> {
    fn new(program: &'p Program) -> Writer<'p> {
        Writer {
            program,
            bytes: vec![0; Header::SIZE],
            strings: HashMap::new(),
            types: HashMap::new(),
            atoms: HashMap::new(),
            entries: Vec::new(),
            entry_index: HashMap::new(),
            too_deep: false,
            calendars: Vec::new(),
            calendar_index: HashMap::new(),
        }
    }

    fn offset(&self) -> u32 {
        self.bytes.len() as u32
    }

    /// Appends zeroed room for `count` records of `size` bytes (4-aligned); their offset.
    fn reserve(&mut self, size: usize, count: usize) -> u32 {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
        let at = self.offset();
        self.bytes.resize(self.bytes.len() + size * count, 0);
        at
    }

    fn put(&mut self, at: u32, encode: impl FnOnce(&mut [u8])) {
        encode(&mut self.bytes[at as usize..]);
    }

    /// A string of the pool (shared when repeated).
    fn string(&mut self, text: &[u8]) -> (u32, u32) {
        if let Some(&s) = self.strings.get(text) {
            return s;
        }
        let s = (self.offset(), text.len() as u32);
        self.bytes.extend_from_slice(text);
        self.strings.insert(text.to_vec(), s);
        s
    }

    /// A string of the pool as JSON (quotes included, escaped as decisions escape).
    fn json(&mut self, text: &str) -> (u32, u32) {
        let mut json = String::new();
        eval::write_json_string(&mut json, text);
        self.string(json.as_bytes())
    }

    /// A list of [`Str`] records.
    fn strs<'a>(&mut self, items: impl ExactSizeIterator<Item = &'a [u8]>) -> (u32, u32) {
        let items: Vec<(u32, u32)> = items.map(|t| self.string(t)).collect();
        let at = self.reserve(Str::SIZE, items.len());
        for (i, (off, len)) in items.iter().enumerate() {
            self.put(at + (i * Str::SIZE) as u32, |o| Str { off: *off, len: *len }.encode(o));
        }
        (at, items.len() as u32)
    }

    fn words(&mut self, words: &[u32]) -> u32 {
        let at = self.reserve(4, words.len());
        for (i, w) in words.iter().enumerate() {
            self.put(at + 4 * i as u32, |o| o[..4].copy_from_slice(&w.to_le_bytes()));
        }
        at
    }

    /// The index of a deciding rule (equal rules share one).
    fn entry(&mut self, rule: DecidingRule) -> u32 {
        if let Some(&i) = self.entry_index.get(&rule) {
            return i;
        }
        let i = self.entries.len() as u32;
        self.entries.push(rule.clone());
        self.entry_index.insert(rule, i);
        i
    }

    fn ty(&mut self, ty: &Type) -> u32 {
        if let Some(&at) = self.types.get(ty) {
            return at;
        }
        let mut record = rec::Type { code: type_code(ty), ..rec::Type::default() };
        match ty {
            Type::Enum(_, variants) => {
                (record.variants_off, record.variants_count) = self.strs(variants.iter().map(|v| v.as_bytes()));
            }
            Type::Set(element) => record.element = self.ty(element),
            _ => {}
        }
        let at = self.reserve(rec::Type::SIZE, 1);
        self.put(at, |o| record.encode(o));
        self.types.insert(ty.clone(), at);
        at
    }

    /// `values` as consecutive [`rec::Value`] records; their offset.
    fn values(&mut self, values: &[Value]) -> u32 {
        let records: Vec<rec::Value> = values.iter().map(|v| self.value(v)).collect();
        let at = self.reserve(rec::Value::SIZE, records.len());
        for (i, r) in records.iter().enumerate() {
            self.put(at + (i * rec::Value::SIZE) as u32, |o| r.encode(o));
        }
        at
    }

    fn value(&mut self, value: &Value) -> rec::Value {
        let mut r = rec::Value::default();
        match value {
            Value::String(s) => {
                r.tag = rec::VALUE_STRING;
                (r.str_off, r.str_len) = self.string(s.as_bytes());
            }
            Value::Number(n) => {
                r.tag = rec::VALUE_NUMBER;
                r.set_number(n.0);
            }
            Value::Money(m) => {
                r.tag = rec::VALUE_MONEY;
                (r.str_off, r.str_len) = self.string(m.currency.as_bytes());
                r.set_number(m.amount.0);
            }
            Value::Bool(b) => {
                r.tag = rec::VALUE_BOOL;
                r.set_number(i128::from(*b));
            }
            Value::Timestamp(t) => {
                r.tag = rec::VALUE_TIMESTAMP;
                r.set_number(*t);
            }
            Value::Duration(d) => {
                r.tag = rec::VALUE_DURATION;
                r.set_number(i128::from(*d));
            }
            Value::Level(l) => {
                r.tag = rec::VALUE_LEVEL;
                r.set_number(*l as i128);
            }
            Value::Set(items) => {
                r.tag = rec::VALUE_SET;
                r.items_off = self.values(items);
                r.items_count = items.len() as u32;
            }
        }
        r
    }

    fn atom(&mut self, atom: &Atom) -> u32 {
        if let Some(&at) = self.atoms.get(atom) {
            return at;
        }
        let mut r = self.attribute(&atom.attr, &atom.ty);
        // The atom as a closest grant's `failed.condition` names it, as a JSON string.
        (r.text_off, r.text_len) = self.json(&eval::atom_text(atom, self.program));
        let (test, operands): (u32, Vec<Value>) = match &atom.test {
            Test::Compare(op, v) => (compare_code(*op), vec![v.clone()]),
            Test::In(vs) => (rec::TEST_IN, vs.clone()),
            Test::NotIn(vs) => (rec::TEST_NOT_IN, vs.clone()),
            Test::Under(p) => (rec::TEST_UNDER, vec![Value::String(p.clone())]),
            Test::NotUnder(p) => (rec::TEST_NOT_UNDER, vec![Value::String(p.clone())]),
            Test::Contains(v) => (rec::TEST_CONTAINS, vec![v.clone()]),
            Test::NotContains(v) => (rec::TEST_NOT_CONTAINS, vec![v.clone()]),
            Test::Within(vs) => (rec::TEST_WITHIN, vs.clone()),
            Test::NotWithin(vs) => (rec::TEST_NOT_WITHIN, vs.clone()),
        };
        r.test = test;
        r.values_off = self.values(&operands);
        r.values_count = operands.len() as u32;
        let at = self.reserve(rec::Atom::SIZE, 1);
        self.put(at, |o| r.encode(o));
        self.atoms.insert(atom.clone(), at);
        at
    }

    /// The fields of an [`rec::Atom`] record that say how `attr` is read as `ty`: its code and name, its type, whether
    /// its money may be negative, its display, and a derived attribute's operands (each a record of its own).
    fn attribute(&mut self, attr: &Attr, ty: &Type) -> rec::Atom {
        let (code, name) = match attr {
            Attr::Arg(name) => (rec::ATTR_ARG, Some(name.as_str())),
            Attr::ResourceId => (rec::ATTR_RESOURCE_ID, None),
            Attr::SubjectId => (rec::ATTR_SUBJECT_ID, None),
            Attr::SubjectScopes => (rec::ATTR_SUBJECT_SCOPES, None),
            Attr::Context(name) => (rec::ATTR_CONTEXT, Some(name.as_str())),
            Attr::Now => (rec::ATTR_NOW, None),
            Attr::Attempt => (rec::ATTR_ATTEMPT, None),
            Attr::Level => (rec::ATTR_LEVEL, None),
            Attr::Subject(name) => (rec::ATTR_SUBJECT, Some(name.as_str())),
            Attr::Resource(name) => (rec::ATTR_RESOURCE, Some(name.as_str())),
            Attr::Principal(name) => (rec::ATTR_PRINCIPAL, Some(name.as_str())),
            Attr::Compare(..) => (rec::ATTR_COMPARE, None),
            Attr::Member(..) => (rec::ATTR_MEMBER, None),
            Attr::Relation(name, _) => (rec::ATTR_RELATION, Some(name.as_str())),
            Attr::InCalendar(name, _) => (rec::ATTR_IN_CALENDAR, Some(name.as_str())),
            Attr::Elapsed(..) => (rec::ATTR_ELAPSED, None),
            // A template's parameter: read from the instance the request is decided under.
            Attr::Param(name) => (rec::ATTR_PARAM, Some(name.as_str())),
            // `parent.NAME` (a template under a template): read from the parent instance.
            Attr::ParentParam(name) => (rec::ATTR_PARENT_PARAM, Some(name.as_str())),
        };
        let mut r = rec::Atom { attr: code, ty: self.ty(ty), ..rec::Atom::default() };
        if let Some(name) = name {
            (r.name_off, r.name_len) = self.string(name.as_bytes());
        }
        r.signed = u32::from(match attr {
            Attr::Context(name) => self.program.signed_contexts.contains(name),
            Attr::Subject(name) => self.program.subject_attributes.get(name).is_some_and(|a| a.signed),
            Attr::Resource(name) => self.program.resource_attributes.get(name).is_some_and(|a| a.signed),
            Attr::Principal(name) => self.program.principal_attributes.get(name).is_some_and(|a| a.signed),
            // Arguments look it up on the called tool.
            _ => false,
        });
        (r.attr_text_off, r.attr_text_len) = self.json(&attr.display());
        // Each operand is read as the interpreter's `fetch` reads it: a comparison's sides as the operand type, a
        // membership's set as a set of the item's type, a relation's terms as strings.
        let operands: Vec<rec::Atom> = match attr {
            Attr::Compare(left, op, right, operand_ty) => {
                r.op = compare_code(*op);
                vec![self.operand(left, operand_ty), self.operand(right, operand_ty)]
            }
            Attr::Member(item, set, item_ty) => {
                let set_ty = Type::Set(Box::new(item_ty.clone()));
                vec![self.operand(item, item_ty), self.operand(set, &set_ty)]
            }
            Attr::InCalendar(name, instant) => {
                r.calendar = self.calendar(name);
                vec![self.operand(instant, &Type::Timestamp)]
            }
            Attr::Elapsed(later, earlier, op, seconds) => {
                r.op = compare_code(*op);
                (r.seconds_lo, r.seconds_hi) = rec::split64(*seconds);
                vec![self.operand(later, &Type::Timestamp), self.operand(earlier, &Type::Timestamp)]
            }
            Attr::Relation(_, terms) => terms
                .iter()
                .map(|term| match term {
                    Term::Attr(attr) => self.operand(attr, &Type::String),
                    Term::Value(text) => {
                        let mut r = rec::Atom { attr: rec::ATTR_TEXT, ..rec::Atom::default() };
                        (r.name_off, r.name_len) = self.string(text.as_bytes());
                        (r.attr_text_off, r.attr_text_len) = self.json(&term.display());
                        r
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        if !operands.is_empty() {
            let records: Vec<u32> = operands
                .iter()
                .map(|o| {
                    let at = self.reserve(rec::Atom::SIZE, 1);
                    self.put(at, |out| o.encode(out));
                    at
                })
                .collect();
            r.operands_off = self.words(&records);
            r.operands_count = records.len() as u32;
        }
        r
    }

    /// The index of the record of the calendar named `name` (its record is written once, at the end).
    fn calendar(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.calendar_index.get(name) {
            return i;
        }
        let i = self.calendars.len() as u32;
        self.calendars.push(name.to_string());
        self.calendar_index.insert(name.to_string(), i);
        i
    }

    /// An operand's record: a written attribute (the checker lowers only those into comparisons, memberships and
    /// relations; the runtime reads operands one level deep, so a derived operand is refused).
    fn operand(&mut self, attr: &Attr, ty: &Type) -> rec::Atom {
        self.too_deep |= attr.is_derived();
        self.attribute(attr, ty)
    }

    /// The condition as [`rec::Node`] records in prefix order; `(offset, count)`.
    fn condition(&mut self, cond: &Cond) -> (u32, u32) {
        let mut nodes = Vec::new();
        self.nodes(cond, 1, &mut nodes);
        let at = self.reserve(rec::Node::SIZE, nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            self.put(at + (i * rec::Node::SIZE) as u32, |o| n.encode(o));
        }
        (at, nodes.len() as u32)
    }

    fn nodes(&mut self, cond: &Cond, depth: usize, out: &mut Vec<rec::Node>) {
        match cond {
            Cond::True => out.push(rec::Node { op: rec::NODE_TRUE, arg: 0 }),
            Cond::False => out.push(rec::Node { op: rec::NODE_FALSE, arg: 0 }),
            Cond::Atom(atom) => {
                let arg = self.atom(atom);
                out.push(rec::Node { op: rec::NODE_ATOM, arg });
            }
            Cond::And(items) | Cond::Or(items) => {
                if depth > rec::MAX_COND_DEPTH {
                    self.too_deep = true;
                    return;
                }
                let op = if matches!(cond, Cond::And(_)) { rec::NODE_AND } else { rec::NODE_OR };
                out.push(rec::Node { op, arg: items.len() as u32 });
                for item in items {
                    self.nodes(item, depth + 1, out);
                }
            }
        }
    }

    /// The record of `template`, whose instances decide as the mandate record `mandate` (`shape`).
    fn template(&mut self, template: &crate::ir::Template, shape: &crate::ir::Mandate, mandate: u32) -> rec::Template {
        let program = self.program;
        let mut r = rec::Template { mandate, ..rec::Template::default() };
        (r.name_off, r.name_len) = self.string(template.name.as_bytes());
        let at = |span| eval::deciding_rule(program, shape, "", span).at;
        let mut params = Vec::new();
        for param in &template.params {
            let mut p =
                rec::TemplateParam { ty: self.ty(&param.ty), signed: u32::from(param.signed), ..Default::default() };
            (p.name_off, p.name_len) = self.string(param.name.as_bytes());
            (p.cond_off, p.cond_count) = self.condition(&param.bound);
            (p.bound_json_off, p.bound_json_len) = self.json(param.bound_text.as_deref().unwrap_or("true"));
            (p.declaration_json_off, p.declaration_json_len) =
                self.json(&format!("{}: {}", param.name, param.ty.display()));
            (p.at_json_off, p.at_json_len) = self.json(&at(param.span));
            params.push(p);
        }
        r.params_off = self.reserve(rec::TemplateParam::SIZE, params.len());
        r.params_count = params.len() as u32;
        for (i, p) in params.iter().enumerate() {
            self.put(r.params_off + (i * rec::TemplateParam::SIZE) as u32, |o| p.encode(o));
        }
        (r.principals_off, r.principals_count) = self.strs(template.principals.iter().map(|s| s.as_bytes()));
        (r.principal_prefixes_off, r.principal_prefixes_count) =
            self.strs(template.principal_prefixes.iter().map(|s| s.as_bytes()));
        (r.holders_off, r.holders_count) = self.strs(template.holders.iter().map(|s| s.as_bytes()));
        (r.holder_prefixes_off, r.holder_prefixes_count) =
            self.strs(template.holder_prefixes.iter().map(|s| s.as_bytes()));
        let bound = |b: &Option<crate::ir::TimeBound>| match b {
            None => (rec::BOUND_NONE, 0, 0),
            Some(crate::ir::TimeBound::At(at)) => {
                let (lo, hi) = rec::split64(*at);
                (rec::BOUND_AT, lo, hi)
            }
            Some(crate::ir::TimeBound::Param(name)) => {
                let index = template.params.iter().position(|p| &p.name == name).map_or(u32::MAX, |i| i as u32);
                (rec::BOUND_PARAM, index, 0)
            }
        };
        (r.from_kind, r.from_lo, r.from_hi) = bound(&template.valid_from);
        (r.until_kind, r.until_lo, r.until_hi) = bound(&template.valid_until);
        r.parent_template = match template.parent {
            crate::ir::Parent::Mandate(_) => 0,
            crate::ir::Parent::Template(parent) => parent as u32 + 1,
        };
        (r.mismatch_json_off, r.mismatch_json_len) = self.json(&format!("template {}", template.name));
        (r.parent_json_off, r.parent_json_len) = self.json(&eval::grants::parent_clause(program, template));
        (r.for_json_off, r.for_json_len) =
            self.json(&eval::grants::patterns("for", &template.principals, &template.principal_prefixes));
        (r.holder_json_off, r.holder_json_len) =
            self.json(&eval::grants::patterns("holder", &template.holders, &template.holder_prefixes));
        let declared = template.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
        (r.declared_json_off, r.declared_json_len) = self.json(&format!("{}({declared})", template.name));
        (r.window_json_off, r.window_json_len) = self.json(&eval::grants::window_text(template));
        (r.at_json_off, r.at_json_len) = self.json(&at(template.span));
        (r.window_at_json_off, r.window_at_json_len) = self.json(&at(template.valid_span));
        r
    }

    fn write(mut self) -> Result<Vec<u8>, ImageError> {
        let program = self.program;
        let mut h = Header { magic: rec::MAGIC, version: rec::VERSION, ..Header::default() };
        h.output_limit = eval::output_limit(program) as u32;
        (h.policy_off, h.policy_len) = self.json(&program.hash);
        let info = policy_info(program);
        (h.info_off, h.info_len) = self.string(info.as_bytes());
        (h.levels_off, h.levels_count) = self.strs(program.levels.iter().map(|l| l.as_bytes()));

        // Approval kinds, ranked by name.
        let kind_rank = ranks(program.approvals.iter().map(|k| k.name.clone()).collect());
        let mut kinds = Vec::new();
        for (i, kind) in program.approvals.iter().enumerate() {
            let (name_off, name_len) = self.string(kind.name.as_bytes());
            let (name_json_off, name_json_len) = self.json(&kind.name);
            let (ttl_lo, ttl_hi) = rec::split64(kind.ttl as i64);
            let binds = kind.binds.iter().map(|b| binding_bit(*b)).fold(0, |a, b| a | b);
            let none = crate::ir::Approvers::default();
            let approvers = kind.approvers.as_ref().unwrap_or(&none);
            let (approver_ids_off, approver_ids_count) = self.strs(approvers.ids.iter().map(|s| s.as_bytes()));
            let (approver_prefixes_off, approver_prefixes_count) =
                self.strs(approvers.prefixes.iter().map(|s| s.as_bytes()));
            kinds.push(rec::Kind {
                name_off,
                name_len,
                name_json_off,
                name_json_len,
                name_rank: kind_rank[i],
                binds,
                ttl_lo,
                ttl_hi,
                single_use: u32::from(kind.single_use),
                approvers: u32::from(kind.approvers.is_some()),
                approver_principal: u32::from(approvers.principal),
                approver_ids_off,
                approver_ids_count,
                approver_prefixes_off,
                approver_prefixes_count,
            });
        }
        h.kinds_off = self.reserve(rec::Kind::SIZE, kinds.len());
        h.kinds_count = kinds.len() as u32;
        for (i, k) in kinds.iter().enumerate() {
            self.put(h.kinds_off + (i * rec::Kind::SIZE) as u32, |o| k.encode(o));
        }

        // Budget counters, ranked by their obligation's JSON (the order of `obligations`).
        let counter_names: Vec<String> = program
            .mandates
            .iter()
            .flat_map(|m| m.rules.iter())
            .chain(program.templates.iter().flat_map(|t| t.rules.iter()))
            .filter_map(|r| match &r.kind {
                RuleKind::Budget { name, .. } => Some(Obligation::IncrementCounter(name.clone()).to_json()),
                _ => None,
            })
            .collect();
        let counter_rank: HashMap<String, u32> = {
            let mut sorted = counter_names.clone();
            sorted.sort();
            sorted.dedup();
            sorted.into_iter().enumerate().map(|(i, n)| (n, i as u32)).collect()
        };

        // Mandates, with their clauses' entries and the records of their rules; after the policy's, the mandate each
        // template's instances decide as (`rec::MANDATE_TEMPLATE`), ranked by the template's name among all names.
        let shapes: Vec<crate::ir::Mandate> =
            program.templates.iter().map(|t| eval::Chain::template_mandate(program, t)).collect();
        let all: Vec<&crate::ir::Mandate> = program.mandates.iter().chain(shapes.iter()).collect();
        let mandate_rank = ranks(all.iter().map(|m| m.name.clone()).collect());
        let statics = program.mandates.len();
        let mut mandates = Vec::new();
        // Per mandate, per rule: the offset of the rule's record.
        let mut rule_at: Vec<Vec<u32>> = Vec::new();
        for (index, &mandate) in all.iter().enumerate() {
            let (name_off, name_len) = self.string(mandate.name.as_bytes());
            let (name_json_off, name_json_len) = self.json(&mandate.name);
            let (principal_off, principal_len) = self.json(&mandate.principal);
            let (principal_text_off, principal_text_len) = self.string(mandate.principal.as_bytes());
            let (holders_off, holders_count) = self.strs(mandate.holders.iter().map(|s| s.as_bytes()));
            let (holder_prefixes_off, holder_prefixes_count) =
                self.strs(mandate.holder_prefixes.iter().map(|s| s.as_bytes()));
            let mut flags = 0;
            let chain: Vec<u32> = match index.checked_sub(statics) {
                None => program.chain(index).iter().map(|&m| m as u32).collect(),
                Some(t) => {
                    flags |= rec::MANDATE_TEMPLATE;
                    // Its parent's chain and itself: a template under a template (sub-delegation) decides under its
                    // parent template's mandate, and so on up to the ceiling's chain.
                    let mut chain = Vec::new();
                    let mut current = t;
                    loop {
                        chain.push((statics + current) as u32);
                        match program.templates[current].parent {
                            crate::ir::Parent::Template(parent) if chain.len() <= program.templates.len() => {
                                current = parent
                            }
                            crate::ir::Parent::Template(_) => break,
                            crate::ir::Parent::Mandate(parent) => {
                                chain.extend(program.chain(parent).iter().rev().map(|&m| m as u32));
                                break;
                            }
                        }
                    }
                    chain.reverse();
                    chain
                }
            };
            let chain_off = self.words(&chain);
            let mut chain_json = String::new();
            // A template's mandate: its parent's chain alone (a decision appends the instance's name).
            let names: Vec<String> =
                chain.iter().filter(|&&m| (m as usize) < statics).map(|&m| all[m as usize].name.clone()).collect();
            crate::eval::write_json_strings(&mut chain_json, &names);
            let (chain_json_off, chain_json_len) = self.string(chain_json.as_bytes());
            let (mut valid_from_lo, mut valid_from_hi, mut valid_until_lo, mut valid_until_hi) = (0, 0, 0, 0);
            if let Some(from) = mandate.valid_from {
                flags |= rec::MANDATE_VALID_FROM;
                (valid_from_lo, valid_from_hi) = rec::split64(from);
            }
            if let Some(until) = mandate.valid_until {
                flags |= rec::MANDATE_VALID_UNTIL;
                (valid_until_lo, valid_until_hi) = rec::split64(until);
            }
            if mandate.otherwise == Outcome::Escalate {
                flags |= rec::MANDATE_ESCALATES;
            }
            let validity = eval::deciding_rule(program, mandate, &eval::validity_text(mandate), mandate.valid_span);
            let validity_entry = self.entry(validity);
            let stop_entry = self.entry(eval::deciding_rule(program, mandate, "stop", mandate.span));
            let [pause_entry, cancel_entry, revoke_entry, quarantine_entry] = eval::STOP_LEVEL_NAMES.map(|level| {
                self.entry(eval::deciding_rule(program, mandate, &format!("stop ({level})"), mandate.span))
            });
            let mut max_level = 0;
            let mut level_entry = 0;
            if let Some(level) = mandate.max_level {
                flags |= rec::MANDATE_MAX_LEVEL;
                max_level = level as u32;
                let name = program.levels.get(level).cloned().unwrap_or_else(|| level.to_string());
                let text = format!("max level {name}");
                level_entry = self.entry(eval::deciding_rule(program, mandate, &text, mandate.max_level_span));
            }
            let otherwise = eval::otherwise_text(mandate.otherwise);
            let otherwise_entry = self.entry(eval::deciding_rule(program, mandate, otherwise, mandate.otherwise_span));
            mandates.push(rec::Mandate {
                name_off,
                name_len,
                name_json_off,
                name_json_len,
                principal_off,
                principal_len,
                principal_text_off,
                principal_text_len,
                name_rank: mandate_rank[index],
                holders_off,
                holders_count,
                holder_prefixes_off,
                holder_prefixes_count,
                chain_off,
                chain_count: chain.len() as u32,
                chain_json_off,
                chain_json_len,
                flags,
                valid_from_lo,
                valid_from_hi,
                valid_until_lo,
                valid_until_hi,
                max_level,
                validity_entry,
                stop_entry,
                level_entry,
                pause_entry,
                cancel_entry,
                revoke_entry,
                quarantine_entry,
                otherwise_entry,
            });

            let mut ats = Vec::new();
            for rule in &mandate.rules {
                let (cond_off, cond_count) = self.condition(&rule.condition);
                let entry = self.entry(eval::deciding_rule(program, mandate, &rule.label, rule.span));
                let mut r = rec::Rule { cond_off, cond_count, entry, ..rec::Rule::default() };
                r.kind = match &rule.kind {
                    RuleKind::Allow => rec::RULE_ALLOW,
                    RuleKind::Forbid => rec::RULE_FORBID,
                    RuleKind::Limit => rec::RULE_LIMIT,
                    RuleKind::Scope => rec::RULE_SCOPE,
                    RuleKind::Gate { approval, on_missing } => {
                        r.kind_index = *approval as u32;
                        r.escalates = u32::from(*on_missing == Outcome::Escalate);
                        rec::RULE_GATE
                    }
                    RuleKind::RequireOperationId => rec::RULE_OPERATION_ID,
                    RuleKind::Fact { name, version, on_stale } => {
                        (r.name_off, r.name_len) = self.string(name.as_bytes());
                        match version {
                            FactVersion::Number(n) => (r.number_lo, r.number_hi) = rec::split64(*n as i64),
                            FactVersion::Text(text) => (r.text_off, r.text_len) = self.string(text.as_bytes()),
                        }
                        r.escalates = u32::from(*on_stale == Outcome::Escalate);
                        rec::RULE_FACT
                    }
                    RuleKind::Budget { name, max, .. } => {
                        (r.name_off, r.name_len) = self.string(name.as_bytes());
                        (r.number_lo, r.number_hi) = rec::split64(*max as i64);
                        let json = Obligation::IncrementCounter(name.clone()).to_json();
                        r.counter_rank = counter_rank.get(&json).copied().unwrap_or(0);
                        rec::RULE_BUDGET
                    }
                };
                let at = self.reserve(rec::Rule::SIZE, 1);
                self.put(at, |o| r.encode(o));
                ats.push(at);
            }
            rule_at.push(ats);
        }
        h.mandates_off = self.reserve(rec::Mandate::SIZE, mandates.len());
        // The templates' mandates follow, past the count: found only through their templates.
        h.mandates_count = statics as u32;
        for (i, m) in mandates.iter().enumerate() {
            self.put(h.mandates_off + (i * rec::Mandate::SIZE) as u32, |o| m.encode(o));
        }

        // Templates: what a decision re-checks of an instance, and the texts its refusal names.
        let mut templates = Vec::new();
        for (t, template) in program.templates.iter().enumerate() {
            templates.push(self.template(template, &shapes[t], (statics + t) as u32));
        }
        h.templates_off = self.reserve(rec::Template::SIZE, templates.len());
        h.templates_count = templates.len() as u32;
        for (i, t) in templates.iter().enumerate() {
            self.put(h.templates_off + (i * rec::Template::SIZE) as u32, |o| t.encode(o));
        }

        // Tools, with their parameters and their rules per mandate.
        let mut tools = Vec::new();
        for (tool_id, tool) in program.tools.iter().enumerate() {
            let (name_off, name_len) = self.string(tool.name.as_bytes());
            let (name_json_off, name_json_len) = self.json(&tool.name);
            let mut params = Vec::new();
            for (name, ty) in &tool.params {
                let (name_off, name_len) = self.string(name.as_bytes());
                let ty = self.ty(ty);
                params.push(rec::Param { name_off, name_len, ty, signed: u32::from(tool.is_signed(name)) });
            }
            let params_off = self.reserve(rec::Param::SIZE, params.len());
            for (i, p) in params.iter().enumerate() {
                self.put(params_off + (i * rec::Param::SIZE) as u32, |o| p.encode(o));
            }
            let (scopes_off, scopes_count) = self.strs(tool.scopes.iter().map(|s| s.as_bytes()));
            let mut lists = Vec::new();
            for (m, mandate) in all.iter().enumerate() {
                let covering: Vec<u32> = mandate
                    .rules
                    .iter()
                    .zip(&rule_at[m])
                    .filter(|(rule, _)| program.covers(&rule.target, tool_id))
                    .map(|(_, &at)| at)
                    .collect();
                if !covering.is_empty() {
                    let rules_off = self.words(&covering);
                    lists.push(rec::RuleList { mandate: m as u32, rules_off, rules_count: covering.len() as u32 });
                }
            }
            let lists_off = self.reserve(rec::RuleList::SIZE, lists.len());
            for (i, l) in lists.iter().enumerate() {
                self.put(lists_off + (i * rec::RuleList::SIZE) as u32, |o| l.encode(o));
            }
            let mut flags = 0;
            if tool.side_effects {
                flags |= rec::TOOL_SIDE_EFFECTS;
            }
            if tool.administers_mandates {
                flags |= rec::TOOL_ADMINISTERS_MANDATES;
            }
            if tool.open_arguments {
                flags |= rec::TOOL_OPEN_ARGUMENTS;
            }
            tools.push(rec::Tool {
                name_off,
                name_len,
                name_json_off,
                name_json_len,
                params_off,
                params_count: params.len() as u32,
                level: tool.level as u32,
                flags,
                scopes_off,
                scopes_count,
                lists_off,
                lists_count: lists.len() as u32,
            });
        }
        h.tools_off = self.reserve(rec::Tool::SIZE, tools.len());
        h.tools_count = tools.len() as u32;
        for (i, t) in tools.iter().enumerate() {
            self.put(h.tools_off + (i * rec::Tool::SIZE) as u32, |o| t.encode(o));
        }
        let listing: Vec<u32> = program.tool_index.values().map(|&t| t as u32).collect();
        h.listing_off = self.words(&listing);

        // Name tables.
        let tool_names: Vec<&[u8]> = program.tools.iter().map(|t| t.name.as_bytes()).collect();
        let slots = rec::hash_table(&tool_names);
        (h.tool_slots_off, h.tool_slots_len) = (self.words(&slots), slots.len() as u32);
        let mandate_names: Vec<&[u8]> = program.mandates.iter().map(|m| m.name.as_bytes()).collect();
        let slots = rec::hash_table(&mandate_names);
        (h.mandate_slots_off, h.mandate_slots_len) = (self.words(&slots), slots.len() as u32);

        // Entries, with their JSON and canonical rank.
        let mut order: Vec<u32> = (0..self.entries.len() as u32).collect();
        order.sort_by(|&a, &b| self.entries[a as usize].sort_key().cmp(&self.entries[b as usize].sort_key()));
        let mut rank = vec![0u32; self.entries.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let entries = std::mem::take(&mut self.entries);
        let mut records = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let mut json = String::new();
            eval::write_deciding_rule(e, &mut json);
            let (json_off, json_len) = self.string(json.as_bytes());
            let mut record = rec::Entry { json_off, json_len, rank: rank[i], ..rec::Entry::default() };
            if let Some(&template) = program.template_index.get(&e.mandate) {
                record.template = template as u32 + 1;
                let mut name = String::new();
                eval::write_json_string(&mut name, &e.mandate);
                record.instance = ("{\"mandate\":".len() + name.len()) as u32;
                record.window = u32::from(e.rule == "valid");
            }
            records.push(record);
        }
        h.entries_off = self.reserve(rec::Entry::SIZE, records.len());
        h.entries_count = records.len() as u32;
        for (i, e) in records.iter().enumerate() {
            self.put(h.entries_off + (i * rec::Entry::SIZE) as u32, |o| e.encode(o));
        }

        // The calendars conditions read: each name, its zone's table and its hours as the runtime decodes them.
        let mut calendars = Vec::new();
        for name in std::mem::take(&mut self.calendars) {
            let mut record = rec::Calendar::default();
            (record.name_off, record.name_len) = self.string(name.as_bytes());
            // The checker resolves every calendar a condition names; an unknown one would stay empty, which the
            // runtime's decode refuses (the condition fails closed).
            if let Some(def) = program.calendars.get(&name) {
                (record.table_off, record.table_len) = self.string(&def.table.encode());
                (record.hours_off, record.hours_len) = self.string(&def.calendar.encode());
            }
            calendars.push(record);
        }
        h.calendars_off = self.reserve(rec::Calendar::SIZE, calendars.len());
        h.calendars_count = calendars.len() as u32;
        for (i, c) in calendars.iter().enumerate() {
            self.put(h.calendars_off + (i * rec::Calendar::SIZE) as u32, |o| c.encode(o));
        }

        if self.too_deep {
            return Err(ImageError::TooDeep);
        }
        if self.bytes.len() > u32::MAX as usize / 2 {
            return Err(ImageError::TooLarge);
        }
        while !self.bytes.len().is_multiple_of(8) {
            self.bytes.push(0);
        }
        h.image_len = self.bytes.len() as u32;
        h.encode(&mut self.bytes[..Header::SIZE]);
        Ok(self.bytes)
    }
}

/// Each name's rank in byte order (names are distinct).
fn ranks(names: Vec<String>) -> Vec<u32> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| names[a].cmp(&names[b]));
    let mut rank = vec![0u32; names.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u32;
    }
    rank
}

fn type_code(ty: &Type) -> u32 {
    match ty {
        Type::String => rec::TYPE_STRING,
        Type::Int => rec::TYPE_INT,
        Type::Decimal => rec::TYPE_DECIMAL,
        Type::Money => rec::TYPE_MONEY,
        Type::Bool => rec::TYPE_BOOL,
        Type::Timestamp => rec::TYPE_TIMESTAMP,
        Type::Duration => rec::TYPE_DURATION,
        Type::Kind(_) => rec::TYPE_KIND,
        Type::Enum(..) => rec::TYPE_ENUM,
        Type::Set(_) => rec::TYPE_SET,
        Type::Level => rec::TYPE_LEVEL,
    }
}

fn compare_code(op: CompareOp) -> u32 {
    match op {
        CompareOp::Eq => rec::TEST_EQ,
        CompareOp::Ne => rec::TEST_NE,
        CompareOp::Lt => rec::TEST_LT,
        CompareOp::Le => rec::TEST_LE,
        CompareOp::Gt => rec::TEST_GT,
        CompareOp::Ge => rec::TEST_GE,
    }
}

fn binding_bit(b: Binding) -> u32 {
    match b {
        Binding::Tool => rec::BINDS_TOOL,
        Binding::Target => rec::BINDS_TARGET,
        Binding::Arguments => rec::BINDS_ARGUMENTS,
        Binding::Manifest => rec::BINDS_MANIFEST,
    }
}

/// The JSON `remit_policy_info` returns (docs/abi.md).
fn policy_info(program: &Program) -> String {
    let mut out = String::from("{\"policy\":");
    eval::write_json_string(&mut out, &program.hash);
    out.push_str(",\"program\":");
    eval::write_json_string(&mut out, &crate::check::program_hash(program));
    out.push_str(&format!(",\"abi_version\":{},\"mandates\":", super::ABI_VERSION));
    let names: Vec<String> = program.mandates.iter().map(|m| m.name.clone()).collect();
    eval::write_json_strings(&mut out, &names);
    out.push_str(",\"entry_points\":[\"remit_decide\",\"remit_visible_tools\",\"remit_policy_info\"]}");
    out
}
