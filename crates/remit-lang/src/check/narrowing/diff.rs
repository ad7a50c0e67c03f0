//! Semantic comparison of two versions of a policy set (`remit diff`): for each mandate name, whether the new
//! version allows requests the old one refuses (widened), refuses requests the old one allows (narrowed), both,
//! or neither. Authority is a mandate's standalone-chain authority in its own version (the mandate with all its
//! ancestors, as the interpreter evaluates it), compared over every request; the text is never compared, so
//! reordering rules or files and renaming files change nothing. Each direction comes with a request confirmed
//! by the interpreter in both versions.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::authority::{conjuncts, Conjunct, Origin, Side};
use super::formula::{negate, Vars, F};
use super::solve::{Answer, Lemmas, Solver};
use super::witness::{self, Shape};
use super::{currencies, granted_tools};
use crate::eval::{decide, Decision, Outcome};
use crate::ir::{MandateId, Program};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Unchanged,
    Narrowed,
    Widened,
    /// Widened for some requests and narrowed for others.
    Both,
    Added,
    Removed,
    /// No answer within the search budget, or a counterexample the interpreter did not confirm.
    Undecided,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unchanged => "unchanged",
            Status::Narrowed => "narrowed",
            Status::Widened => "widened",
            Status::Both => "both",
            Status::Added => "added",
            Status::Removed => "removed",
            Status::Undecided => "undecided",
        }
    }

    /// Whether the change needs a human review: authority that was not there before (or cannot be ruled out).
    pub fn widens(self) -> bool {
        matches!(self, Status::Widened | Status::Both | Status::Added | Status::Undecided)
    }
}

/// A request that one version allows and the other refuses.
#[derive(Debug, Clone)]
pub struct Example {
    pub tool: String,
    pub request: Json,
    /// Why the refusing version refuses it, in words, naming the clause.
    pub refused_by: String,
    pub old: Decision,
    pub new: Decision,
}

#[derive(Debug, Clone)]
pub struct MandateDiff {
    pub name: String,
    pub status: Status,
    /// Requests the new version allows and the old one refuses: one for each clause of the old version that
    /// refuses some (each refused by that clause alone, where a request can be), in catalog order of the tools.
    pub widened: Vec<Example>,
    /// Requests the old version allows and the new one refuses, one for each clause of the new version likewise.
    pub narrowed: Vec<Example>,
}

/// Compares every mandate of the two versions, by name, sorted by name.
pub fn diff(old: &Program, new: &Program) -> Vec<MandateDiff> {
    let names: BTreeSet<&str> = old.mandates.iter().chain(new.mandates.iter()).map(|m| m.name.as_str()).collect();
    names
        .into_iter()
        .map(|name| match (old.mandate(name), new.mandate(name)) {
            (Some(o), Some(n)) => compare(old, o, new, n),
            (None, Some(n)) => MandateDiff {
                name: name.to_string(),
                status: Status::Added,
                widened: exceeding(new, n, old, None, true, &mut false),
                narrowed: Vec::new(),
            },
            (Some(o), _) => MandateDiff {
                name: name.to_string(),
                status: Status::Removed,
                widened: Vec::new(),
                narrowed: exceeding(old, o, new, None, false, &mut false),
            },
            (None, None) => unreachable!("every name comes from one of the versions"),
        })
        .collect()
}

fn compare(old: &Program, o: MandateId, new: &Program, n: MandateId) -> MandateDiff {
    let mut undecided = false;
    let widened = exceeding(new, n, old, Some(o), true, &mut undecided);
    let narrowed = exceeding(old, o, new, Some(n), false, &mut undecided);
    let status = match (widened.is_empty(), narrowed.is_empty()) {
        (false, false) => Status::Both,
        (false, true) => Status::Widened,
        (true, false) => Status::Narrowed,
        (true, true) if undecided => Status::Undecided,
        (true, true) => Status::Unchanged,
    };
    MandateDiff { name: old.mandates[o].name.clone(), status, widened, narrowed }
}

fn side(program: &Program, mandate: MandateId) -> Side<'_> {
    let chain = program.chain(mandate);
    let approval_names = chain.iter().map(|&m| program.mandates[m].name.clone()).collect();
    Side {
        program,
        chain,
        holders: Some(&program.mandates[mandate]),
        approval_names,
        instance_principal: None,
        leaf: None,
    }
}

/// Confirmed requests mandate `w` of `wide` allows and mandate `n` of `narrow` (absent: unknown there) refuses,
/// one for each clause of `narrow` that refuses some: a version that adds a requisition and raises a cap shows
/// both. Each is refused by its clause alone when such a request exists, so that it shows what that clause
/// changed. `wide_is_new` says which version `wide` is.
fn exceeding(
    wide: &Program,
    w: MandateId,
    narrow: &Program,
    n: Option<MandateId>,
    wide_is_new: bool,
    undecided: &mut bool,
) -> Vec<Example> {
    let name = wide.mandates[w].name.as_str();
    let allowing = side(wide, w);
    let refusing = n.map(|n| side(narrow, n));
    let mut found: Vec<Example> = Vec::new();
    for tool in granted_tools(wide, w) {
        let tool_name = wide.tools[tool].name.as_str();
        let mut vars = Vars::default();
        let a = conjuncts(&allowing, tool_name, &mut vars);
        if a.iter().any(|c| c.formula == F::False) {
            continue;
        }
        // Without the mandate in the other version, everything it allows is refused there.
        let b: Vec<Conjunct> = match &refusing {
            Some(side) => conjuncts(side, tool_name, &mut vars),
            None => vec![Conjunct { formula: F::False, origin: Origin::Undeclared }],
        };
        let questions: Vec<(usize, Origin, F)> = b
            .iter()
            .enumerate()
            .filter(|(_, c)| !a.iter().any(|x| x.formula == c.formula))
            .map(|(i, c)| (i, c.origin, negate(&c.formula)))
            .collect();
        let lemmas = Lemmas::default();
        let mut solver = Solver::new(&vars, wide.levels.len().max(narrow.levels.len()), &lemmas);
        for (index, origin, refused) in &questions {
            let refused_by = match n {
                Some(_) => super::err::clause(narrow, *origin, tool_name),
                None => super::err::no_mandate(name, wide_is_new),
            };
            // One request per clause: a class rule refuses the same way for each of its tools.
            if found.iter().any(|e| e.refused_by == refused_by) {
                continue;
            }
            let plain: Vec<&F> = a.iter().map(|c| &c.formula).chain([refused]).collect();
            // The request this clause alone refuses: every other clause of the refusing version holds.
            let others = b.iter().enumerate().filter(|(i, _)| i != index).map(|(_, c)| &c.formula);
            let alone: Vec<&F> = plain.iter().copied().chain(others).collect();
            let mut example = None;
            for goals in [&alone, &plain] {
                match solver.solve(goals) {
                    Answer::Unsat => {}
                    // Only the plain question decides whether the clause widens; the other is a nicer witness.
                    Answer::Unknown => *undecided |= std::ptr::eq(goals, &plain),
                    Answer::Sat(model) => {
                        let shape = Shape { program: wide, tool: tool_name, mandate: name };
                        let request = witness::request(&model, &vars, shape, &currencies(goals, &vars), false);
                        let bytes = serde_json::to_vec(&request).unwrap_or_default();
                        let (allowed, refused_decision) = (decide(wide, &bytes), decide(narrow, &bytes));
                        if allowed.outcome != Outcome::Allow || refused_decision.outcome == Outcome::Allow {
                            // A model the interpreter does not confirm is never shown.
                            *undecided |= std::ptr::eq(goals, &plain);
                            continue;
                        }
                        let (old, new) =
                            if wide_is_new { (refused_decision, allowed) } else { (allowed, refused_decision) };
                        example = Some(Example { tool: tool_name.to_string(), request, refused_by, old, new });
                        break;
                    }
                }
            }
            found.extend(example);
        }
    }
    found
}
