//! What a picture shows, independent of how it is drawn: the delegation forest of a checked program, one node
//! per mandate (and per template, drawn under its parent) with its terms grouped by what they do. Clause texts are the policy's own words (the clause's
//! source with whitespace collapsed), so a reviewer reads exactly what was written.

use std::collections::BTreeMap;

use crate::check::narrowing::diff::{MandateDiff, Status};
use crate::ir::{Approvers, MandateId, Parent, Program, Rule, RuleKind, TemplateId, TimeBound};
use crate::syntax::ast::Outcome as Otherwise;
use crate::value::format_timestamp;

/// The delegation forest: roots in name order, children in name order, so the picture does not depend on the
/// order of files or declarations.
#[derive(Debug, Clone, Default)]
pub struct Forest {
    pub nodes: Vec<Node>,
    pub roots: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    /// Set when the node is a template: what an instance is granted with.
    pub template: Option<TemplateFacts>,
    /// Set when the node is an instance of a template (`remit graph --instances`).
    pub instance: Option<InstanceFacts>,
    /// A mandate's principal; a template's `for` (who an instance may be for).
    pub principal: String,
    pub holders: Vec<String>,
    pub purpose: Option<String>,
    /// `from … until …`, when the mandate states a window.
    pub window: Option<String>,
    pub max_level: Option<String>,
    pub otherwise: &'static str,
    pub delegation_depth: Option<u32>,
    pub sections: Vec<Section>,
    pub children: Vec<usize>,
    pub stop: Stop,
    /// Set on the pictures of `remit diff`.
    pub change: Option<Change>,
}

/// What only a template has: its parameters (as written, with their bounds) and who may grant an instance.
#[derive(Debug, Clone)]
pub struct TemplateFacts {
    pub params: Vec<String>,
    pub granted_by: String,
}

/// What only an instance has: its template and version, its parameters' values, who granted it when, whether it
/// was revoked, and why the check refuses it when it does (`problem: field fails condition (value …)`).
#[derive(Debug, Clone)]
pub struct InstanceFacts {
    pub template: String,
    pub version: u64,
    /// `NAME = VALUE`, in the template's order.
    pub params: Vec<String>,
    pub granted: String,
    pub revoked_at: Option<String>,
    pub outside: Option<String>,
}

/// A group of clauses of one mandate: what it grants, forbids, bounds, gates or requires.
#[derive(Debug, Clone)]
pub struct Section {
    pub title: &'static str,
    pub clauses: Vec<String>,
}

/// Whether a stop refuses the mandate's side-effecting calls: its own stop, or one on an ancestor (a stop on any
/// mandate of the chain applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    None,
    Here,
    Inherited(String),
}

/// How a mandate changed between two versions, with the confirmed requests that show it.
#[derive(Debug, Clone)]
pub struct Change {
    pub status: Status,
    /// Why the old version refused a request the new one allows, and that request (JSON): one per clause.
    pub widened: Vec<(String, String)>,
    /// Why the new version refuses a request the old one allowed, and that request (JSON): one per clause.
    pub narrowed: Vec<(String, String)>,
}

/// The section titles, in the order a node shows them.
const SECTIONS: [&str; 5] = ["grants", "forbids", "bounds", "gates", "requires"];

/// The class of a template's node, and what it means in a legend.
const TEMPLATE: (&str, &str) = ("template", "a template: its instances are granted at run time");

/// The classes of instances' nodes, and what they mean in a legend.
const INSTANCES: [(&str, &str); 3] = [
    ("instance", "an instance of the template above it, granted at run time"),
    ("revoked", "a revoked instance"),
    ("invalid", "an instance outside its template: every decision under it is denied"),
];

fn section_of(kind: &RuleKind) -> &'static str {
    match kind {
        RuleKind::Allow => "grants",
        RuleKind::Forbid => "forbids",
        RuleKind::Limit | RuleKind::Scope => "bounds",
        RuleKind::Gate { .. } => "gates",
        RuleKind::RequireOperationId | RuleKind::Budget { .. } | RuleKind::Fact { .. } => "requires",
    }
}

impl Forest {
    /// The forest of `program`; `stops` names the mandates with an active stop (unknown names are ignored).
    /// Templates follow the mandates, each under its parent (a mandate or a template).
    pub fn of(program: &Program, stops: &[String]) -> Forest {
        let mut forest = Forest::default();
        for (id, _) in program.mandates.iter().enumerate() {
            forest.nodes.push(node(program, id, stops));
        }
        let first_template = forest.nodes.len();
        for (id, _) in program.templates.iter().enumerate() {
            forest.nodes.push(template_node(program, id, stops));
        }
        let mut roots = Vec::new();
        for (id, mandate) in program.mandates.iter().enumerate() {
            match mandate.parent {
                Some(parent) => forest.nodes[parent].children.push(id),
                None => roots.push(id),
            }
        }
        for (id, template) in program.templates.iter().enumerate() {
            let parent = match template.parent {
                Parent::Mandate(m) => m,
                Parent::Template(t) => first_template + t,
            };
            forest.nodes[parent].children.push(first_template + id);
        }
        forest.roots = roots;
        forest.sort();
        forest
    }

    /// The forest of `new` coloured by `report` (`remit diff`), with the mandates only `old` has added where
    /// they were (under their old parent when it still exists, else as roots).
    pub fn of_diff(old: &Program, new: &Program, report: &[MandateDiff]) -> Forest {
        let mut forest = Forest::of(new, &[]);
        let changes: BTreeMap<&str, &MandateDiff> = report.iter().map(|m| (m.name.as_str(), m)).collect();
        let mut removed = Vec::new();
        for (id, mandate) in old.mandates.iter().enumerate() {
            if new.mandate(&mandate.name).is_none() {
                removed.push((forest.nodes.len(), id));
                forest.nodes.push(node(old, id, &[]));
            }
        }
        // Attached once every node exists, so a removed child of a removed parent finds it.
        for (index, id) in removed {
            let parent = old.mandates[id].parent.and_then(|p| forest.index(&old.mandates[p].name));
            match parent {
                Some(p) => forest.nodes[p].children.push(index),
                None => forest.roots.push(index),
            }
        }
        for node in &mut forest.nodes {
            let Some(m) = changes.get(node.name.as_str()) else { continue };
            node.change = Some(Change {
                status: m.status,
                widened: m.widened.iter().map(|e| (e.refused_by.clone(), e.request.to_string())).collect(),
                narrowed: m.narrowed.iter().map(|e| (e.refused_by.clone(), e.request.to_string())).collect(),
            });
        }
        forest.sort();
        forest
    }

    /// The legend of this forest's classes: `legend(diff)`, and templates' when it has any.
    pub fn legend(&self) -> Vec<(&'static str, &'static str)> {
        let mut entries = legend(self.nodes.iter().any(|n| n.change.is_some()));
        if self.nodes.iter().any(|n| n.template.is_some()) {
            entries.push(TEMPLATE);
        }
        if self.nodes.iter().any(|n| n.instance.is_some()) {
            entries.extend(INSTANCES);
        }
        entries
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Nodes in drawing order: each root followed by its subtree, depth first.
    pub fn preorder(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut stack: Vec<(usize, usize)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((id, depth)) = stack.pop() {
            out.push((id, depth));
            stack.extend(self.nodes[id].children.iter().rev().map(|&c| (c, depth + 1)));
        }
        out
    }

    /// Roots and children in name order.
    pub(super) fn sort(&mut self) {
        let names: Vec<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        self.roots.sort_by(|a, b| names[*a].cmp(&names[*b]));
        for node in &mut self.nodes {
            node.children.sort_by(|a, b| names[*a].cmp(&names[*b]));
        }
    }
}

/// A mandate's or template's rules grouped by section, each clause in the policy's own words.
fn sections(program: &Program, rules: &[Rule]) -> Vec<Section> {
    let mut grouped: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for rule in rules {
        grouped.entry(section_of(&rule.kind)).or_default().push(words(program, rule.span));
    }
    SECTIONS
        .iter()
        .filter_map(|title| {
            let mut clauses = grouped.remove(title)?;
            clauses.sort();
            Some(Section { title, clauses })
        })
        .collect()
}

/// The source of `span` with its whitespace collapsed.
fn words(program: &Program, span: crate::source::Span) -> String {
    program.sources.snippet(span).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn window(from: Option<String>, until: Option<String>) -> Option<String> {
    match (from, until) {
        (None, None) => None,
        (from, until) => {
            Some(format!("{} → {}", from.unwrap_or_else(|| "…".into()), until.unwrap_or_else(|| "…".into())))
        }
    }
}

fn otherwise(outcome: Otherwise) -> &'static str {
    match outcome {
        Otherwise::Deny => "deny",
        Otherwise::Escalate => "escalate",
    }
}

/// Ids in name order, then each prefix as "any id under P".
fn patterns(ids: &[String], prefixes: &[String]) -> Vec<String> {
    let mut out = ids.to_vec();
    out.sort();
    out.extend(prefixes.iter().map(|p| format!("any id under {p}")));
    out
}

/// The stop that applies to the mandate chain ending at `id`: its own, else the nearest stopped ancestor's.
fn stop_of(program: &Program, id: MandateId, stops: &[String]) -> Stop {
    if stops.contains(&program.mandates[id].name) {
        return Stop::Here;
    }
    program
        .chain(id)
        .iter()
        .rev()
        .find(|&&m| stops.contains(&program.mandates[m].name))
        .map_or(Stop::None, |&m| Stop::Inherited(program.mandates[m].name.clone()))
}

fn node(program: &Program, id: MandateId, stops: &[String]) -> Node {
    let mandate = &program.mandates[id];
    Node {
        name: mandate.name.clone(),
        template: None,
        instance: None,
        principal: mandate.principal.clone(),
        holders: patterns(&mandate.holders, &mandate.holder_prefixes),
        purpose: mandate.purpose.clone(),
        window: window(mandate.valid_from.map(format_timestamp), mandate.valid_until.map(format_timestamp)),
        max_level: mandate.max_level.map(|l| program.levels[l].clone()),
        otherwise: otherwise(mandate.otherwise),
        delegation_depth: mandate.delegation_depth,
        sections: sections(program, &mandate.rules),
        children: Vec::new(),
        stop: stop_of(program, id, stops),
        change: None,
    }
}

/// A template's node: its parameters and grantors besides what a mandate shows. A stop on the mandate it is
/// (eventually) under applies to its instances, as to any sub-mandate.
fn template_node(program: &Program, id: TemplateId, stops: &[String]) -> Node {
    let template = &program.templates[id];
    let mut above = template.parent;
    let mandate = loop {
        match above {
            Parent::Mandate(m) => break m,
            Parent::Template(t) => above = program.templates[t].parent,
        }
    };
    let stop = match stop_of(program, mandate, stops) {
        Stop::None => Stop::None,
        Stop::Here => Stop::Inherited(program.mandates[mandate].name.clone()),
        inherited => inherited,
    };
    let principals = patterns(&template.principals, &template.principal_prefixes);
    let bound = |b: &Option<TimeBound>| {
        b.as_ref().map(|b| match b {
            TimeBound::At(t) => format_timestamp(*t),
            TimeBound::Param(name) => name.clone(),
        })
    };
    Node {
        name: template.name.clone(),
        template: Some(TemplateFacts {
            params: template
                .params
                .iter()
                .map(|p| match &p.bound_text {
                    Some(bound) => format!("{}: {} where {bound}", p.name, p.ty.display()),
                    None => format!("{}: {}", p.name, p.ty.display()),
                })
                .collect(),
            granted_by: grantors(&template.granted_by),
        }),
        instance: None,
        principal: if principals.is_empty() { "anyone".into() } else { principals.join(", ") },
        holders: patterns(&template.holders, &template.holder_prefixes),
        purpose: template.purpose.clone(),
        window: window(bound(&template.valid_from), bound(&template.valid_until)),
        max_level: template.max_level.map(|l| program.levels[l].clone()),
        otherwise: otherwise(template.otherwise),
        delegation_depth: template.delegation_depth,
        sections: sections(program, &template.rules),
        children: Vec::new(),
        stop,
        change: None,
    }
}

fn grantors(approvers: &Approvers) -> String {
    let mut who = Vec::new();
    if approvers.principal {
        who.push("the principal".to_string());
    }
    who.extend(patterns(&approvers.ids, &approvers.prefixes));
    who.join(", ")
}

impl Node {
    /// The node's header lines (after the name), as every format shows them.
    pub fn facts(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(template) = &self.template {
            lines.push("template: instances granted at run time".to_string());
            lines.extend(template.params.iter().map(|p| format!("parameter {p}")));
            lines.push(format!("granted by {}", template.granted_by));
        }
        if let Some(instance) = &self.instance {
            lines.push(format!("instance of {}, version {}", instance.template, instance.version));
            lines.extend(instance.params.iter().map(|p| format!("parameter {p}")));
            lines.push(instance.granted.clone());
        }
        if self.holders.is_empty() {
            // A ceiling: only the instances of the templates under it act under it.
            lines.push(format!("for {} · held by no one (a ceiling)", self.principal));
        } else {
            lines.push(format!("for {} · held by {}", self.principal, self.holders.join(", ")));
        }
        if let Some(purpose) = &self.purpose {
            lines.push(format!("purpose: {purpose}"));
        }
        if let Some(window) = &self.window {
            lines.push(format!("valid {window}"));
        }
        let mut terms = Vec::new();
        if let Some(level) = &self.max_level {
            terms.push(format!("max level {level}"));
        }
        if let Some(depth) = self.delegation_depth {
            terms.push(format!("delegation depth {depth}"));
        }
        terms.push(format!("otherwise {}", self.otherwise));
        lines.push(terms.join(" · "));
        if let Some(instance) = &self.instance {
            if let Some(at) = &instance.revoked_at {
                lines.push(format!("REVOKED at {at}"));
            }
            if let Some(why) = &instance.outside {
                lines.push(format!("OUTSIDE its template: {why}"));
            }
        }
        match &self.stop {
            Stop::None => {}
            Stop::Here => lines.push("STOPPED: side-effecting calls refused".into()),
            Stop::Inherited(from) => lines.push(format!("STOPPED via {from}: side-effecting calls refused")),
        }
        lines
    }

    /// A short word for the node's state in a diff or under a stop, used as a CSS/DOT class.
    pub fn class(&self) -> &'static str {
        match (&self.change, &self.stop) {
            (Some(change), _) => change.status.as_str(),
            (None, _) if self.instance.as_ref().is_some_and(|i| i.revoked_at.is_some()) => INSTANCES[1].0,
            (None, _) if self.instance.as_ref().is_some_and(|i| i.outside.is_some()) => INSTANCES[2].0,
            (None, Stop::None) if self.instance.is_some() => INSTANCES[0].0,
            (None, Stop::None) if self.template.is_some() => TEMPLATE.0,
            (None, Stop::None) => "mandate",
            (None, _) => "stopped",
        }
    }
}

/// Fill and stroke colours of a node class: the one palette every format uses.
pub fn colours(class: &str) -> (&'static str, &'static str) {
    match class {
        "unchanged" => ("#f2f2f2", "#8c8c8c"),
        "narrowed" => ("#e3f4e1", "#2e7d32"),
        "widened" => ("#fde0dc", "#c62828"),
        "both" => ("#fff0d6", "#e65100"),
        "added" => ("#dfeefc", "#1565c0"),
        "removed" => ("#eeeeee", "#616161"),
        "undecided" => ("#efe3f7", "#6a1b9a"),
        "stopped" => ("#fde0dc", "#b71c1c"),
        "template" => ("#fffde7", "#f9a825"),
        "instance" => ("#e0f2f1", "#00796b"),
        "revoked" => ("#eeeeee", "#9e9e9e"),
        "invalid" => ("#fde0dc", "#c62828"),
        _ => ("#ffffff", "#37474f"),
    }
}

/// What each class means, for legends.
pub fn legend(diff: bool) -> Vec<(&'static str, &'static str)> {
    if diff {
        vec![
            ("unchanged", "same authority"),
            ("narrowed", "refuses requests it allowed"),
            ("widened", "allows requests it refused"),
            ("both", "widened and narrowed"),
            ("added", "new mandate"),
            ("removed", "mandate removed"),
            ("undecided", "review by hand"),
        ]
    } else {
        vec![("mandate", "no stop"), ("stopped", "a stop refuses its side-effecting calls")]
    }
}
