//! Lowers a checked [`Program`] to the module's tables (the backend's IR, laid out in static data) and
//! generates one function per rule condition plus `vm_cond`, the dispatcher the decision loop calls.
//!
//! Everything that can be decided at compile time is: each mandate's chain, the rules of each (mandate, tool)
//! pair (the dispatch index: a call only looks at the rules of its tool), the JSON text and sort rank of every
//! entry a decision may list, and the name tables (FNV-1a, open addressing) that map a tool or mandate name to
//! its id in O(1).

use std::collections::{BTreeMap, HashMap};

use wasm_encoder::{BlockType, Instruction as I, ValType};

use super::asm::Body;
use super::module::ModuleBuilder;
use super::vm::prim::fnv1a;
use super::vm::values::{self, ATTR_ARG, ATTR_ATTEMPT, ATTR_CONTEXT, ATTR_LEVEL, ATTR_NOW, ATTR_RESOURCE};
use super::vm::values::{ATTR_SCOPES, ATTR_SUBJECT};
use crate::eval::DecidingRule;
use crate::ir::{Attr, Binding, Cond, Program, RuleKind, Target, Test, Type};
use crate::syntax::ast::Outcome;

/// Addresses and sizes of the tables, used as immediates by the decision code.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    pub tools: u32,
    pub tool_hash: u32,
    pub tool_hash_mask: u32,
    pub mandates: u32,
    pub mandate_hash: u32,
    pub mandate_hash_mask: u32,
    pub rule_ids: u32,
    pub rules: u32,
    pub approvals: u32,
    /// Deciding entries by rank: (json ptr, json len).
    pub entries: u32,
    /// Missing-approval prefixes by rank: (json ptr, json len, binds).
    pub missing: u32,
    /// increment-counter obligations by rank: (json ptr, json len).
    pub counters: u32,
    /// `"sha256:…"` of the policy, as JSON.
    pub policy_json: (u32, u32),
    pub policy_info: (u32, u32),
    pub tool_count: u32,
    /// Tools in name order: (tool id, name as JSON ptr, len).
    pub tools_by_name: u32,
}

// `remit check` reports a policy past this limit (`check::limits`); codegen refuses it again below.
const _: () = assert!(super::vm::ARRAY_CAP as usize == crate::check::limits::MAX_RULES_PER_TOOL);

/// A tool: name ptr, len, level, flags (bit 0 side effects, 1 administers mandates, 2 open arguments), scopes
/// ptr, count, parameter names ptr, count.
pub const TOOL_REC: u32 = 32;
pub const TOOL_OPEN_ARGUMENTS_BIT: u32 = 2;
pub const MANDATE_REC: u32 = 88;
pub const RULE_REC: u32 = 32;
pub const APPROVAL_REC: u32 = 24;

pub const RULE_ALLOW: u32 = 0;
pub const RULE_FORBID: u32 = 1;
pub const RULE_LIMIT: u32 = 2;
pub const RULE_SCOPE: u32 = 3;
pub const RULE_GATE: u32 = 4;
pub const RULE_OPERATION: u32 = 5;
pub const RULE_FACT: u32 = 6;
pub const RULE_BUDGET: u32 = 7;

fn words(out: &mut Vec<u8>, items: &[u32]) {
    for w in items {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::new();
    crate::eval::write_json_string(&mut out, s);
    out
}

/// An open-addressing name table: (name ptr, name len, id) per slot, FNV-1a, linear probing.
fn name_table(m: &mut ModuleBuilder, names: &[&str]) -> (u32, u32) {
    let cap = (names.len() * 2).next_power_of_two().max(4);
    let mut slots = vec![(0u32, 0u32, 0u32); cap];
    for (id, name) in names.iter().enumerate() {
        let mut i = fnv1a(name.as_bytes()) as usize & (cap - 1);
        while slots[i].0 != 0 {
            i = (i + 1) & (cap - 1);
        }
        slots[i] = (m.bytes(name.as_bytes()).max(1), name.len() as u32, id as u32);
    }
    let mut bytes = Vec::new();
    for (p, l, id) in slots {
        words(&mut bytes, &[p, l, id]);
    }
    (m.raw(&bytes, 4), cap as u32 - 1)
}

/// A deciding entry before ranking.
struct Entry {
    rule: DecidingRule,
}

/// Lays out the tables and defines the condition functions and `vm_cond`.
pub fn lower(m: &mut ModuleBuilder, program: &Program) -> Result<Tables, String> {
    let mut t = Tables { tool_count: program.tools.len() as u32, ..Tables::default() };
    // A decision collects at most the rules of its tool along its chain (plus four clauses per mandate) into
    // fixed arrays: refuse a policy that could overflow them rather than emit a module that would drop entries.
    for (index, mandate) in program.mandates.iter().enumerate() {
        let chain = program.chain(index);
        for tool in 0..program.tools.len() {
            let rules: usize = chain
                .iter()
                .map(|&m| program.mandates[m].rules.iter().filter(|r| r.tools.binary_search(&tool).is_ok()).count() + 4)
                .sum();
            if rules > super::vm::ARRAY_CAP as usize {
                return Err(format!(
                    "mandate `{}` has {rules} rules for tool `{}` along its chain; a module supports at most {}",
                    mandate.name,
                    program.tools[tool].name,
                    super::vm::ARRAY_CAP
                ));
            }
        }
    }
    let location = |span| program.sources.location(span);

    // Tools.
    let mut bytes = Vec::new();
    for tool in &program.tools {
        let mut scopes = Vec::new();
        for s in &tool.scopes {
            let p = m.bytes(s.as_bytes());
            words(&mut scopes, &[p, s.len() as u32]);
        }
        let scopes_at = if scopes.is_empty() { 0 } else { m.raw(&scopes, 4) };
        // The declared parameter names, for the closed-arguments check.
        let mut params = Vec::new();
        for (p, _) in &tool.params {
            let at = m.bytes(p.as_bytes());
            words(&mut params, &[at, p.len() as u32]);
        }
        let params_at = if params.is_empty() { 0 } else { m.raw(&params, 4) };
        let name = m.bytes(tool.name.as_bytes());
        let flags = tool.side_effects as u32
            | (tool.administers_mandates as u32) << 1
            | (tool.open_arguments as u32) << TOOL_OPEN_ARGUMENTS_BIT;
        words(
            &mut bytes,
            &[name, tool.name.len() as u32, tool.level as u32, flags, scopes_at, tool.scopes.len() as u32],
        );
        words(&mut bytes, &[params_at, tool.params.len() as u32]);
    }
    t.tools = if bytes.is_empty() { 0 } else { m.raw(&bytes, 4) };
    let names: Vec<&str> = program.tools.iter().map(|x| x.name.as_str()).collect();
    (t.tool_hash, t.tool_hash_mask) = name_table(m, &names);
    let mut bytes = Vec::new();
    for (name, &id) in &program.tool_index {
        let json = json_string(name);
        let p = m.bytes(json.as_bytes());
        words(&mut bytes, &[id as u32, p, json.len() as u32]);
    }
    t.tools_by_name = if bytes.is_empty() { 0 } else { m.raw(&bytes, 4) };
    let names: Vec<&str> = program.mandates.iter().map(|x| x.name.as_str()).collect();
    (t.mandate_hash, t.mandate_hash_mask) = name_table(m, &names);

    // Deciding entries: every rule, and per mandate its validity, stop, level and otherwise entries.
    let mut entries: Vec<Entry> = Vec::new();
    let mut rule_entry: Vec<Vec<u32>> = Vec::new();
    let mut mandate_entries: Vec<u32> = Vec::new();
    for mandate in &program.mandates {
        let entry = |rule: String, span| Entry {
            rule: DecidingRule { mandate: mandate.name.clone(), rule, at: location(span) },
        };
        mandate_entries.push(entries.len() as u32);
        entries.push(entry(crate::eval::validity_text(mandate), mandate.valid_span));
        entries.push(entry("stop".into(), mandate.span));
        let level = mandate.max_level.map_or(String::new(), |l| format!("max level {}", program.levels[l]));
        entries.push(entry(level, mandate.max_level_span));
        let otherwise = match mandate.otherwise {
            Outcome::Deny => "otherwise deny",
            Outcome::Escalate => "otherwise escalate",
        };
        entries.push(entry(otherwise.into(), mandate.otherwise_span));
        let mut ids = Vec::new();
        for rule in &mandate.rules {
            ids.push(entries.len() as u32);
            entries.push(entry(rule.label.clone(), rule.span));
        }
        rule_entry.push(ids);
    }
    // Rank = position in the order decisions list rules; equal entries share a rank (they dedup).
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| entries[a].rule.sort_key().cmp(&entries[b].rule.sort_key()));
    let mut rank_of = vec![0u32; entries.len()];
    let mut by_rank: Vec<usize> = Vec::new();
    for &e in &order {
        if by_rank.last().is_none_or(|&last| entries[last].rule != entries[e].rule) {
            by_rank.push(e);
        }
        rank_of[e] = by_rank.len() as u32 - 1;
    }
    let mut bytes = Vec::new();
    for &e in &by_rank {
        let mut json = String::new();
        crate::eval::write_deciding_rule(&entries[e].rule, &mut json);
        let p = m.bytes(json.as_bytes());
        words(&mut bytes, &[p, json.len() as u32]);
    }
    t.entries = m.raw(&bytes, 4);

    // Missing-approval prefixes, ranked by (kind, mandate).
    let mut missing_keys: Vec<(String, String, u32)> = Vec::new();
    for mandate in &program.mandates {
        for rule in &mandate.rules {
            if let RuleKind::Gate { approval } = rule.kind {
                let kind = &program.approvals[approval];
                let binds = kind.binds.iter().fold(0u32, |acc, b| acc | binding_bit(*b));
                missing_keys.push((kind.name.clone(), mandate.name.clone(), binds));
            }
        }
    }
    missing_keys.sort();
    missing_keys.dedup();
    let mut bytes = Vec::new();
    for (kind, mandate, binds) in &missing_keys {
        let prefix = format!("{{\"kind\":{},\"mandate\":{}", json_string(kind), json_string(mandate));
        let p = m.bytes(prefix.as_bytes());
        words(&mut bytes, &[p, prefix.len() as u32, *binds]);
    }
    t.missing = if bytes.is_empty() { 0 } else { m.raw(&bytes, 4) };
    let missing_rank: HashMap<(&str, &str), u32> =
        missing_keys.iter().enumerate().map(|(i, (k, mm, _))| ((k.as_str(), mm.as_str()), i as u32)).collect();

    // Counter obligations, ranked by their JSON text.
    let mut counters: Vec<String> = program
        .mandates
        .iter()
        .flat_map(|x| x.rules.iter())
        .filter_map(|r| match &r.kind {
            RuleKind::Budget { name, .. } => {
                Some(format!("{{\"kind\":\"increment-counter\",\"counter\":{}}}", json_string(name)))
            }
            _ => None,
        })
        .collect();
    counters.sort();
    counters.dedup();
    let mut bytes = Vec::new();
    for json in &counters {
        let p = m.bytes(json.as_bytes());
        words(&mut bytes, &[p, json.len() as u32]);
    }
    t.counters = if bytes.is_empty() { 0 } else { m.raw(&bytes, 4) };
    let counter_rank: HashMap<&str, u32> = counters.iter().enumerate().map(|(i, c)| (c.as_str(), i as u32)).collect();

    // Approval kinds.
    let mut bytes = Vec::new();
    for kind in &program.approvals {
        let p = m.bytes(kind.name.as_bytes());
        let binds = kind.binds.iter().fold(0u32, |acc, b| acc | binding_bit(*b));
        words(&mut bytes, &[p, kind.name.len() as u32, binds, kind.single_use as u32]);
        bytes.extend_from_slice(&kind.ttl.to_le_bytes());
    }
    t.approvals = if bytes.is_empty() { 0 } else { m.raw(&bytes, 8) };

    // Rules, numbered globally in mandate order.
    let mut rule_base = Vec::new();
    let mut bytes = Vec::new();
    let mut conditions: Vec<&Cond> = Vec::new();
    // Per rule, the parameters its target declares `signed` (every other money argument must be >= 0).
    let mut signed: Vec<&[String]> = Vec::new();
    for (mi, mandate) in program.mandates.iter().enumerate() {
        rule_base.push(conditions.len() as u32);
        for (ri, rule) in mandate.rules.iter().enumerate() {
            let entry = rank_of[rule_entry[mi][ri] as usize];
            let (kind, a, b, c, wide): (u32, u32, u32, u32, u64) = match &rule.kind {
                RuleKind::Allow => (RULE_ALLOW, 0, 0, 0, 0),
                RuleKind::Forbid => (RULE_FORBID, 0, 0, 0, 0),
                RuleKind::Limit => (RULE_LIMIT, 0, 0, 0, 0),
                RuleKind::Scope => (RULE_SCOPE, 0, 0, 0, 0),
                RuleKind::Gate { approval } => {
                    let kind = &program.approvals[*approval];
                    let rank = missing_rank.get(&(kind.name.as_str(), mandate.name.as_str()));
                    (RULE_GATE, *approval as u32, rank.copied().unwrap_or(0), mi as u32, 0)
                }
                RuleKind::RequireOperationId => (RULE_OPERATION, 0, 0, 0, 0),
                RuleKind::Fact { name, version, on_stale } => {
                    let p = m.bytes(name.as_bytes());
                    (RULE_FACT, p, name.len() as u32, (*on_stale == Outcome::Escalate) as u32, *version)
                }
                RuleKind::Budget { name, max, .. } => {
                    let json = format!("{{\"kind\":\"increment-counter\",\"counter\":{}}}", json_string(name));
                    let rank = counter_rank.get(json.as_str()).copied().unwrap_or(0);
                    if rank > 0xffff || name.len() > 0xffff {
                        return Err("more than 65,535 budget counters, or a longer name: see `remit check`".into());
                    }
                    let p = m.bytes(name.as_bytes());
                    // The counter name and its obligation rank share a word pair: len in the low 16 bits.
                    (RULE_BUDGET, p, name.len() as u32 | rank << 16, 0, *max)
                }
            };
            words(&mut bytes, &[kind, entry, a, b, c, 0]);
            bytes.extend_from_slice(&wide.to_le_bytes());
            conditions.push(&rule.condition);
            signed.push(match rule.target {
                Target::Tool(tool) => &program.tools[tool].signed,
                Target::Effect(effect) => &program.effects[effect].signed,
                Target::AnyTool | Target::SideEffects => &[],
            });
        }
    }
    t.rules = if bytes.is_empty() { 0 } else { m.raw(&bytes, 8) };

    // The dispatch index: for each mandate, for each tool, (offset, count) into rule_ids.
    let mut ids: Vec<u32> = Vec::new();
    let mut index_at = Vec::new();
    for (mi, mandate) in program.mandates.iter().enumerate() {
        let mut index = Vec::new();
        for tool in 0..program.tools.len() {
            let offset = ids.len() as u32;
            for (ri, rule) in mandate.rules.iter().enumerate() {
                if rule.tools.binary_search(&tool).is_ok() {
                    ids.push(rule_base[mi] + ri as u32);
                }
            }
            words(&mut index, &[offset, ids.len() as u32 - offset]);
        }
        index_at.push(if index.is_empty() { 0 } else { m.raw(&index, 4) });
    }
    let mut bytes = Vec::new();
    words(&mut bytes, &ids);
    bytes.extend_from_slice(&[0; 4]);
    t.rule_ids = m.raw(&bytes, 4);

    // Mandates.
    let mut bytes = Vec::new();
    for (mi, mandate) in program.mandates.iter().enumerate() {
        let name = m.bytes(mandate.name.as_bytes());
        let mut holders = Vec::new();
        for h in &mandate.holders {
            let p = m.bytes(h.as_bytes());
            words(&mut holders, &[p, h.len() as u32]);
        }
        let holders_at = if holders.is_empty() { 0 } else { m.raw(&holders, 4) };
        let chain = program.chain(mi);
        let mut chain_bytes = Vec::new();
        words(&mut chain_bytes, &chain.iter().map(|&c| c as u32).collect::<Vec<_>>());
        let chain_at = m.raw(&chain_bytes, 4);
        let flags = mandate.valid_from.is_some() as u32
            | (mandate.valid_until.is_some() as u32) << 1
            | ((mandate.otherwise == Outcome::Escalate) as u32) << 2;
        let name_json = json_string(&mandate.name);
        let name_json_at = m.bytes(name_json.as_bytes());
        let principal = json_string(&mandate.principal);
        let principal_at = m.bytes(principal.as_bytes());
        let base = mandate_entries[mi];
        let ranks = [
            rank_of[base as usize],
            rank_of[base as usize + 1],
            rank_of[base as usize + 2],
            rank_of[base as usize + 3],
        ];
        words(&mut bytes, &[name, mandate.name.len() as u32, holders_at, mandate.holders.len() as u32]);
        words(&mut bytes, &[flags, mandate.max_level.map_or(u32::MAX, |l| l as u32)]);
        bytes.extend_from_slice(&mandate.valid_from.unwrap_or(0).to_le_bytes());
        bytes.extend_from_slice(&mandate.valid_until.unwrap_or(0).to_le_bytes());
        words(&mut bytes, &[chain_at, chain.len() as u32, index_at[mi], 0]);
        words(&mut bytes, &[name_json_at, name_json.len() as u32, principal_at, principal.len() as u32]);
        words(&mut bytes, &ranks);
    }
    t.mandates = if bytes.is_empty() { 0 } else { m.raw(&bytes, 8) };

    let policy = json_string(&program.hash);
    t.policy_json = (m.bytes(policy.as_bytes()), policy.len() as u32);
    let info = policy_info(program);
    t.policy_info = (m.bytes(info.as_bytes()), info.len() as u32);

    define_conditions(m, program, &conditions, &signed);
    Ok(t)
}

fn binding_bit(b: Binding) -> u32 {
    match b {
        Binding::Tool => 1,
        Binding::Target => 2,
        Binding::Arguments => 4,
        Binding::Manifest => 8,
    }
}

/// The JSON `remit_policy_info` returns.
fn policy_info(program: &Program) -> String {
    let mandates: Vec<String> = program.mandates.iter().map(|m| json_string(&m.name)).collect();
    format!(
        "{{\"policy\":{},\"abi_version\":{},\"mandates\":[{}],\"entry_points\":[\"remit_decide\",\"remit_visible_tools\",\"remit_policy_info\"]}}",
        json_string(&program.hash),
        super::ABI_VERSION,
        mandates.join(",")
    )
}

/// Declares and defines `cond_N` (0/1/2) and `poss_N` (the set of outcomes while listing tools, src/eval/cond.rs
/// `possible`: bits true 1, false 2, error 4) for every non-trivial condition, and their dispatchers `vm_cond` and
/// `vm_poss`, br_tables over rule numbers. Both take the called tool's level (for `level`).
fn define_conditions(m: &mut ModuleBuilder, program: &Program, conditions: &[&Cond], signed: &[&[String]]) {
    m.declare("vm_poss", &[ValType::I32, ValType::I32], &[ValType::I32]);
    let mut names: Vec<Option<(String, String)>> = Vec::new();
    for (i, cond) in conditions.iter().enumerate() {
        if matches!(cond, Cond::True | Cond::False) {
            names.push(None);
        } else {
            let (eval, poss) = (format!("cond_{i}"), format!("poss_{i}"));
            m.declare(eval.clone(), &[ValType::I32], &[ValType::I32]);
            m.declare(poss.clone(), &[ValType::I32], &[ValType::I32]);
            names.push(Some((eval, poss)));
        }
    }
    for (i, cond) in conditions.iter().enumerate() {
        if let Some((eval, poss)) = &names[i] {
            let mut b = Body::new(1);
            emit_cond(m, program, &mut b, cond, false, signed[i]);
            m.define(eval, b.finish());
            let mut b = Body::new(1);
            emit_cond(m, program, &mut b, cond, true, signed[i]);
            m.define(poss, b.finish());
        }
    }
    for (dispatcher, possible) in [("vm_cond", false), ("vm_poss", true)] {
        let mut b = Body::new(2);
        let n = conditions.len() as u32;
        for _ in 0..=n {
            b.emit([I::Block(BlockType::Empty)]);
        }
        let targets: Vec<u32> = (0..n).collect();
        b.emit([I::LocalGet(0), I::BrTable(targets.into(), n)]);
        for (i, cond) in conditions.iter().enumerate() {
            b.emit([I::End]);
            let (t, f) = if possible { (1, 2) } else { (1, 0) };
            match (cond, &names[i]) {
                (Cond::True, _) => b.emit([I::I32Const(t), I::Return]),
                (Cond::False, _) => b.emit([I::I32Const(f), I::Return]),
                (_, Some((eval, poss))) => {
                    let f = m.func(if possible { poss } else { eval });
                    b.emit([I::LocalGet(1), I::Call(f), I::Return])
                }
                _ => unreachable!("non-trivial conditions have functions"),
            };
        }
        b.emit([I::End, I::I32Const(if possible { 4 } else { 2 })]);
        m.define(dispatcher, b.finish());
    }
}

/// How many condition nodes one function inlines at most, and how many parts one `and`/`or` combines at most.
/// Larger conditions (a 50,000-term `or`) are split into functions of this size: wasm limits a function's body
/// (7.6 MB) and locals (50,000), and Cranelift's compile time grows faster than linearly in a function's size.
const PART_WEIGHT: usize = 1024;
const PART_FANOUT: usize = 64;

/// The number of nodes of a condition.
fn weight(cond: &Cond) -> usize {
    match cond {
        Cond::And(items) | Cond::Or(items) => 1 + items.iter().map(weight).sum::<usize>(),
        _ => 1,
    }
}

/// The parts an `and`/`or` combines: its items, or, past [`PART_FANOUT`] items, groups of them under the same
/// connective. Regrouping never changes a result: both evaluations of `and`/`or` (with errors, and the possible
/// outcomes) fold their parts associatively, without short-circuit.
fn grouped(cond: &Cond) -> std::borrow::Cow<'_, [Cond]> {
    let (Cond::And(items) | Cond::Or(items)) = cond else { return std::borrow::Cow::Owned(Vec::new()) };
    if items.len() <= PART_FANOUT {
        return std::borrow::Cow::Borrowed(items);
    }
    let size = items.len().div_ceil(PART_FANOUT);
    let group = |chunk: &[Cond]| match cond {
        Cond::And(_) => Cond::And(chunk.to_vec()),
        _ => Cond::Or(chunk.to_vec()),
    };
    std::borrow::Cow::Owned(items.chunks(size).map(group).collect())
}

/// One part of an `and`/`or`: inlined while the function's `budget` of nodes lasts, otherwise a call to a function
/// of its own (taking the tool's level, like `cond_N`), so no function grows past [`PART_WEIGHT`] nodes plus
/// [`PART_FANOUT`] calls.
fn emit_part(
    m: &mut ModuleBuilder,
    program: &Program,
    b: &mut Body,
    cond: &Cond,
    possible: bool,
    budget: &mut usize,
    signed: &[String],
) {
    let w = weight(cond);
    if w <= *budget {
        *budget -= w;
        emit_cond(m, program, b, cond, possible, signed);
        return;
    }
    *budget = budget.saturating_sub(1);
    let name = format!("part_{}", m.function_count());
    let index = m.declare(name.clone(), &[ValType::I32], &[ValType::I32]);
    let mut part = Body::new(1);
    emit_cond(m, program, &mut part, cond, possible, signed);
    m.define(&name, part.finish());
    b.emit([I::LocalGet(0), I::Call(index)]);
}

/// Leaves 0/1/2 on the stack (or, when `possible`, the outcome bits): And/Or are errors when any child is
/// (src/eval/cond.rs).
fn emit_cond(m: &mut ModuleBuilder, program: &Program, b: &mut Body, cond: &Cond, possible: bool, signed: &[String]) {
    match cond {
        Cond::True => {
            b.emit([I::I32Const(1)]);
        }
        Cond::False => {
            b.emit([I::I32Const(if possible { 2 } else { 0 })]);
        }
        Cond::And(_) | Cond::Or(_) if possible => {
            // t/f/e over the parts: can_fail = any e; all_can_succeed = all (t|f);
            // And: t = all t, f = all_can_succeed && any f; Or: t = all_can_succeed && any t, f = all f.
            let and = matches!(cond, Cond::And(_));
            let (all_t, all_f, any_t, any_f, any_e, succeed) = (b.i32(), b.i32(), b.i32(), b.i32(), b.i32(), b.i32());
            b.emit([
                I::I32Const(1),
                I::LocalSet(all_t),
                I::I32Const(1),
                I::LocalSet(all_f),
                I::I32Const(1),
                I::LocalSet(succeed),
            ]);
            let mut budget = PART_WEIGHT;
            for item in grouped(cond).iter() {
                let r = b.i32();
                emit_part(m, program, b, item, true, &mut budget, signed);
                b.emit([I::LocalSet(r)]);
                for (acc, bit, all) in
                    [(all_t, 1, true), (all_f, 2, true), (any_t, 1, false), (any_f, 2, false), (any_e, 4, false)]
                {
                    b.emit([I::LocalGet(acc), I::LocalGet(r), I::I32Const(bit), I::I32And, I::I32Const(0), I::I32Ne]);
                    b.emit([if all { I::I32And } else { I::I32Or }, I::LocalSet(acc)]);
                }
                b.emit([
                    I::LocalGet(succeed),
                    I::LocalGet(r),
                    I::I32Const(3),
                    I::I32And,
                    I::I32Const(0),
                    I::I32Ne,
                    I::I32And,
                    I::LocalSet(succeed),
                ]);
            }
            if and {
                b.emit([I::LocalGet(all_t), I::LocalGet(succeed), I::LocalGet(any_f), I::I32And]);
            } else {
                b.emit([I::LocalGet(succeed), I::LocalGet(any_t), I::I32And, I::LocalGet(all_f)]);
            }
            b.emit([I::I32Const(1), I::I32Shl, I::I32Or, I::LocalGet(any_e), I::I32Const(2), I::I32Shl, I::I32Or]);
        }
        Cond::And(_) | Cond::Or(_) => {
            let and = matches!(cond, Cond::And(_));
            let (err, acc) = (b.i32(), b.i32());
            b.emit([I::I32Const(and as i32), I::LocalSet(acc)]);
            let mut budget = PART_WEIGHT;
            for item in grouped(cond).iter() {
                let r = b.i32();
                emit_part(m, program, b, item, false, &mut budget, signed);
                b.emit([
                    I::LocalTee(r),
                    I::I32Const(2),
                    I::I32Eq,
                    I::LocalGet(err),
                    I::I32Or,
                    I::LocalSet(err),
                    I::LocalGet(acc),
                    I::LocalGet(r),
                    I::I32Const(1),
                    I::I32Eq,
                    if and { I::I32And } else { I::I32Or },
                    I::LocalSet(acc),
                ]);
            }
            b.emit([I::I32Const(2), I::LocalGet(acc), I::LocalGet(err), I::Select]);
        }
        Cond::Atom(atom) => {
            let (attr, np, nl) = match &atom.attr {
                Attr::Arg(name) => (ATTR_ARG, m.bytes(name.as_bytes()), name.len() as u32),
                Attr::Context(name) => (ATTR_CONTEXT, m.bytes(name.as_bytes()), name.len() as u32),
                Attr::ResourceId => (ATTR_RESOURCE, 0, 0),
                Attr::SubjectId => (ATTR_SUBJECT, 0, 0),
                Attr::SubjectScopes => (ATTR_SCOPES, 0, 0),
                Attr::Now => (ATTR_NOW, 0, 0),
                Attr::Attempt => (ATTR_ATTEMPT, 0, 0),
                Attr::Level => (ATTR_LEVEL, 0, 0),
            };
            let (cls, ecls) = values::class(&atom.ty);
            let variants = match &atom.ty {
                Type::Enum(_, v) => v.clone(),
                Type::Set(e) => match &**e {
                    Type::Enum(_, v) => v.clone(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let mut vbytes = Vec::new();
            for v in &variants {
                let p = m.bytes(v.as_bytes());
                words(&mut vbytes, &[p, v.len() as u32]);
            }
            let vars = if vbytes.is_empty() { 0 } else { m.raw(&vbytes, 4) };
            let (tk, op) = values::test_code(&atom.test);
            let (items, prefix) = match &atom.test {
                Test::Compare(_, v) | Test::Contains(v) | Test::NotContains(v) => (vec![v.clone()], None),
                Test::In(vs) | Test::NotIn(vs) | Test::Within(vs) | Test::NotWithin(vs) => (vs.clone(), None),
                Test::Under(p) | Test::NotUnder(p) => (Vec::new(), Some(p.clone())),
            };
            let items_at = values::encode(m, &items);
            let (pp, pl) = match prefix {
                Some(p) => (m.bytes(p.as_bytes()).max(1), p.len() as u32),
                None => (0, 0),
            };
            let name_word = if attr == ATTR_LEVEL { None } else { Some(np as i32) };
            // An argument or context attribute that is not `signed` must not be negative money (src/eval/cond.rs
            // `fetch`).
            let non_negative = match &atom.attr {
                Attr::Arg(name) => !signed.contains(name),
                Attr::Context(name) => !program.signed_contexts.contains(name),
                _ => false,
            };
            b.emit([I::I32Const(attr | if non_negative { values::ATTR_NON_NEGATIVE } else { 0 })]);
            match name_word {
                Some(w) => b.emit([I::I32Const(w)]),
                // `level` reads the called tool's level, which the caller passes as the parameter.
                None => b.emit([I::LocalGet(0)]),
            };
            b.emit([
                I::I32Const(nl as i32),
                I::I32Const(cls),
                I::I32Const(ecls),
                I::I32Const(vars as i32),
                I::I32Const(variants.len() as i32),
                I::I32Const(tk),
                I::I32Const(op),
                I::I32Const(items_at as i32),
                I::I32Const(items.len() as i32),
                I::I32Const(pp as i32),
                I::I32Const(pl as i32),
                I::Call(m.func("vm_atom")),
            ]);
            if possible {
                // 0 false → 2, 1 true → 1, 2 error → 4, 3 unknown → 7.
                let (r, v) = (b.i32(), b.i32());
                b.emit([I::LocalSet(r), I::I32Const(4), I::LocalSet(v)]);
                for (code, bits) in [(3, 7), (1, 1), (0, 2)] {
                    b.emit([
                        I::I32Const(bits),
                        I::LocalGet(v),
                        I::LocalGet(r),
                        I::I32Const(code),
                        I::I32Eq,
                        I::Select,
                        I::LocalSet(v),
                    ]);
                }
                b.emit([I::LocalGet(v)]);
            }
        }
    }
    let _ = program;
    let _: BTreeMap<u32, u32> = BTreeMap::new();
}
