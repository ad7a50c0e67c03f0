//! What the gateway must know about a policy besides its decisions: which subjects hold which mandates (to pick
//! the mandate of a request that names none), each mandate's chain, the approval kinds (to mint an approval of the
//! right binding and TTL), and the budgets with their windows (to fill each counter with the count of its window).
//!
//! It is a pure function of the checked program ([`PolicyMeta::from_program`]) and travels as JSON next to the
//! module, and the argument each tool names as its target (`target args.NAME`: the gateway fills `resource.id`
//! from it, so MCP calls, which have no resource, can be scoped and approvals bound). It travels as JSON next to the
//! module (`remit build` embeds it in the module's custom section `remit.gateway`, which runtimes ignore), so a
//! gateway serving a `.wasm` knows the same as one serving the sources. The decisions themselves always come from
//! the module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ir::{Attr, Cond, Parent, Program, RuleKind, Term, TimeBound, Type};
use crate::syntax::ast::Window;
use remit_module::leb128;

/// The name of the custom section that carries a [`PolicyMeta`] inside a decision module.
pub const SECTION: &str = remit_module::GATEWAY_SECTION;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyMeta {
    /// The policy hash; must equal the module's.
    pub policy: String,
    pub mandates: Vec<MandateMeta>,
    pub approvals: Vec<ApprovalMeta>,
    pub budgets: Vec<BudgetMeta>,
    /// Tools whose target is one of their arguments; absent in metadata written before targets existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetMeta>,
    /// The fact names the policy's `fact` rules read (sorted), so that a version published for another name is
    /// refused; absent in metadata written before they were recorded (then every name is accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Vec<String>>,
    /// What the gateway fills from its data sets or a trusted caller: the declared attributes of subjects and
    /// resources and the relation tuples conditions ask about. Absent when the policy declares none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldMeta>,
    /// The templates (`template NAME(…) under PARENT`), in declaration order: what a grant is checked against
    /// (docs/grants-design.md). Absent when the policy has none, so metadata of a policy without templates is
    /// unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<TemplateMeta>,
}

/// A template as a grant needs it: its parameters with their types and bounds, who may be an instance's principal,
/// hold it and grant it, and its window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateMeta {
    pub name: String,
    /// The mandate or template it narrows.
    pub parent: String,
    /// `mandate` or `template`.
    pub parent_kind: String,
    pub params: Vec<TemplateParamMeta>,
    /// `for …`: ids and `under` prefixes an instance's principal may be (both empty: anyone).
    pub principals: Vec<String>,
    pub principal_prefixes: Vec<String>,
    pub holders: Vec<String>,
    pub holder_prefixes: Vec<String>,
    /// `granted by …` (the principal alone when not written).
    pub granted_by: ApproversMeta,
    /// `valid from`/`valid until`: an instant (Unix seconds) or a timestamp parameter's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<TimeBoundMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<TimeBoundMeta>,
    /// Whether `remit check` proved that every instance within the bounds narrows the parent (docs/narrowing.md,
    /// "Templates"); `false` when the proof did not run (`--no-narrowing`) or left it undecided
    /// (`remit::template-narrowing-unproved`), so a gateway need not grant on it.
    pub proved: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateParamMeta {
    pub name: String,
    /// The type as the language writes it (`money`, `set<string>`, an enum's name).
    #[serde(rename = "type")]
    pub ty: String,
    /// An enum's variants (the values a string of this type may take); absent for other types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<String>>,
    #[serde(default)]
    pub signed: bool,
    /// The bound as written (`cap > 0 USD and cap <= 500 USD`); absent when the parameter is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeBoundMeta {
    At(i64),
    Param(String),
}

impl TemplateMeta {
    fn from_program(program: &Program) -> Vec<TemplateMeta> {
        program
            .templates
            .iter()
            .map(|t| {
                let (parent, parent_kind) = match t.parent {
                    Parent::Mandate(id) => (program.mandates[id].name.clone(), "mandate"),
                    Parent::Template(id) => (program.templates[id].name.clone(), "template"),
                };
                let time = |bound: &Option<TimeBound>| {
                    bound.as_ref().map(|b| match b {
                        TimeBound::At(t) => TimeBoundMeta::At(*t),
                        TimeBound::Param(name) => TimeBoundMeta::Param(name.clone()),
                    })
                };
                TemplateMeta {
                    name: t.name.clone(),
                    parent,
                    parent_kind: parent_kind.into(),
                    params: t
                        .params
                        .iter()
                        .map(|p| TemplateParamMeta {
                            name: p.name.clone(),
                            ty: p.ty.display(),
                            variants: match &p.ty {
                                Type::Enum(_, variants) => Some(variants.clone()),
                                _ => None,
                            },
                            signed: p.signed,
                            bound: p.bound_text.clone(),
                        })
                        .collect(),
                    principals: t.principals.clone(),
                    principal_prefixes: t.principal_prefixes.clone(),
                    holders: t.holders.clone(),
                    holder_prefixes: t.holder_prefixes.clone(),
                    granted_by: ApproversMeta {
                        principal: t.granted_by.principal,
                        ids: t.granted_by.ids.clone(),
                        prefixes: t.granted_by.prefixes.clone(),
                    },
                    valid_from: time(&t.valid_from),
                    valid_until: time(&t.valid_until),
                    proved: t.proved,
                }
            })
            .collect()
    }
}

/// The declared world of a policy, as the gateway needs it to fill a request (docs/gateway.md, "Data").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldMeta {
    /// `subject TYPE { … }`, sorted by type (principals are not among them: see `principal`).
    pub subjects: Vec<EntityMeta>,
    /// `resource TYPE { … }`, sorted by type.
    pub resources: Vec<EntityMeta>,
    /// `relation NAME(…)`, sorted by name, each with the atoms conditions write.
    pub relations: Vec<RelationMeta>,
    /// `calendar NAME …`, sorted by name: whether the gateway fills its holidays.
    #[serde(default)]
    pub calendars: Vec<CalendarMeta>,
    /// `principal TYPE { … }`: the gateway fills `context.principals.PRINCIPAL` from its data sets (entities of this
    /// type) for the principals of the mandates that may decide a request. Absent when none is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<EntityMeta>,
    /// Each tool that declares the resource type it acts on (`resource TYPE` in the tool), by tool name: the gateway
    /// looks a call's resource up as that type, whatever `resource.type` the caller sent. Absent when no tool
    /// declares one, and in metadata written before tools could.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_resource_types: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalendarMeta {
    pub name: String,
    /// `closed on holidays`: the gateway fills `context.holidays.NAME` from its data sets.
    pub holidays: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityMeta {
    /// The type name (AuthZEN's `subject.type` / `resource.type`).
    #[serde(rename = "type")]
    pub type_name: String,
    pub attributes: Vec<AttributeMeta>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeMeta {
    pub name: String,
    /// The type as written (`string`, `set<string>`, `money`, a kind's name…).
    #[serde(rename = "type")]
    pub ty: String,
    /// `data` (the gateway's data sets) or `properties` (a trusted enforcement point's AuthZEN properties).
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationMeta {
    pub name: String,
    /// The parameter types as written.
    pub params: Vec<String>,
    /// `data` or `properties`.
    pub source: String,
    /// Each distinct list of terms a condition asks the relation about (sorted): the gateway looks up exactly these
    /// tuples for a request, with each term's value in it.
    pub atoms: Vec<Vec<TermMeta>>,
}

/// A relation atom's term as the gateway evaluates it against a request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TermMeta {
    /// A constant: a string written in the policy, or a mandate's principal.
    Value(String),
    /// `subject.id`.
    Subject,
    /// `resource.id`.
    Resource,
    /// `args.NAME`.
    Arg(String),
    /// `context.NAME`.
    Context(String),
    /// `subject.NAME` (a declared attribute).
    SubjectAttribute(String),
    /// `resource.NAME`.
    ResourceAttribute(String),
    /// `principal.NAME` (an attribute of the mandate's principal).
    PrincipalAttribute(String),
}

impl TermMeta {
    fn of(term: &Term) -> Option<TermMeta> {
        Some(match term {
            Term::Value(text) => TermMeta::Value(text.clone()),
            Term::Attr(Attr::SubjectId) => TermMeta::Subject,
            Term::Attr(Attr::ResourceId) => TermMeta::Resource,
            Term::Attr(Attr::Arg(name)) => TermMeta::Arg(name.clone()),
            Term::Attr(Attr::Context(name)) => TermMeta::Context(name.clone()),
            Term::Attr(Attr::Subject(name)) => TermMeta::SubjectAttribute(name.clone()),
            Term::Attr(Attr::Resource(name)) => TermMeta::ResourceAttribute(name.clone()),
            Term::Attr(Attr::Principal(name)) => TermMeta::PrincipalAttribute(name.clone()),
            Term::Attr(_) => return None,
        })
    }
}

impl WorldMeta {
    fn from_program(program: &Program) -> Option<WorldMeta> {
        use crate::syntax::ast::EntityRole;
        if program.entities.is_empty() && program.relations.is_empty() && program.calendars.is_empty() {
            return None;
        }
        let entity = |e: &crate::ir::EntityType| EntityMeta {
            type_name: e.name.clone(),
            attributes: e
                .attributes
                .iter()
                .map(|(name, ty, source)| AttributeMeta {
                    name: name.clone(),
                    ty: ty.display(),
                    source: source.keyword().to_string(),
                })
                .collect(),
        };
        let subjects = program.entities.iter().filter(|e| e.role == EntityRole::Subject).map(entity).collect();
        let resources = program.entities.iter().filter(|e| e.role == EntityRole::Resource).map(entity).collect();
        let principal = program.entities.iter().find(|e| e.role == EntityRole::Principal).map(entity);
        let mut atoms: BTreeMap<String, std::collections::BTreeSet<Vec<TermMeta>>> = Default::default();
        for rule in program.mandates.iter().flat_map(|m| &m.rules) {
            relation_atoms(&rule.condition, &mut |name, terms| {
                if let Some(terms) = terms.iter().map(TermMeta::of).collect::<Option<Vec<_>>>() {
                    atoms.entry(name.to_string()).or_default().insert(terms);
                }
            });
        }
        let relations = program
            .relations
            .values()
            .map(|r| RelationMeta {
                name: r.name.clone(),
                params: r.params.iter().map(|t| t.display()).collect(),
                source: r.source.keyword().to_string(),
                atoms: atoms.remove(&r.name).unwrap_or_default().into_iter().collect(),
            })
            .collect();
        let calendars = program
            .calendars
            .values()
            .map(|c| CalendarMeta { name: c.name.clone(), holidays: c.calendar.closed_on_holidays() })
            .collect();
        let tool_resource_types =
            program.tools.iter().filter_map(|t| Some((t.name.clone(), t.resource_type.clone()?))).collect();
        Some(WorldMeta { subjects, resources, relations, calendars, principal, tool_resource_types })
    }
}

/// Calls `found` with every relation atom of `cond`, also inside comparisons.
fn relation_atoms(cond: &Cond, found: &mut impl FnMut(&str, &[Term])) {
    match cond {
        Cond::True | Cond::False => {}
        Cond::Atom(atom) => {
            for attr in atom.attr.reads() {
                if let Attr::Relation(name, terms) = attr {
                    found(name, terms);
                }
            }
        }
        Cond::And(items) | Cond::Or(items) => items.iter().for_each(|c| relation_atoms(c, found)),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetMeta {
    pub tool: String,
    /// The argument whose (string) value is the call's `resource.id`.
    pub argument: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MandateMeta {
    pub name: String,
    pub principal: String,
    pub holders: Vec<String>,
    /// `holder under` prefixes: every subject id under one of them holds the mandate (`eval::holds`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holder_prefixes: Vec<String>,
    /// Root first, this mandate last.
    pub chain: Vec<String>,
    /// When the mandate stops granting (the earliest `valid … until` of its chain), Unix seconds; absent when it has
    /// no end, or in metadata written before it was carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalMeta {
    pub kind: String,
    /// `tool`, `target`, `arguments`, `manifest`.
    pub binds: Vec<String>,
    /// Seconds.
    pub ttl: u64,
    pub single_use: bool,
    /// `approved by`: who may grant it (`principal`, ids, `under` prefixes); absent: the principal answers, as before
    /// approvers could be named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<ApproversMeta>,
}

/// [`crate::ir::Approvers`] as the gateway keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproversMeta {
    #[serde(default)]
    pub principal: bool,
    #[serde(default)]
    pub ids: Vec<String>,
    #[serde(default)]
    pub prefixes: Vec<String>,
}

impl ApprovalMeta {
    /// Whether `identity` may answer for this kind in a chain of `principal`: one its `approved by` admits, or,
    /// without `approved by`, the principal.
    pub fn answerable_by(&self, identity: &str, principal: &str) -> bool {
        match &self.approvers {
            None => identity == principal,
            Some(a) => crate::eval::admits(a.principal, &a.ids, &a.prefixes, identity, principal),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetMeta {
    /// The mandate that declares it, or the template when `template` is set (mandate and template names share a
    /// namespace).
    pub mandate: String,
    pub name: String,
    pub max: u64,
    /// `operation`, `hour`, `day`, `total`.
    pub window: String,
    /// Declared by a template (`mandate` is its name): the gateway counts it per instance
    /// (docs/gateway.md "Grants", budgets of templates). Absent for a mandate's budget, so the metadata of a policy whose
    /// templates declare no budget is unchanged, and a gateway that predates it never counts one (no chain names a
    /// template).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub template: bool,
}

impl PolicyMeta {
    /// The mandates that have expired at `now` or expire within `horizon` seconds of it, soonest first, with their
    /// end: what `remit serve` warns of at start and reload.
    pub fn expiring(&self, now: i64, horizon: u64) -> Vec<(&str, i64)> {
        let mut out: Vec<(&str, i64)> = self
            .mandates
            .iter()
            .filter_map(|m| m.expires_at.map(|until| (m.name.as_str(), until)))
            .filter(|&(_, until)| until <= now || until.abs_diff(now) <= horizon)
            .collect();
        out.sort_by_key(|&(name, until)| (until, name));
        out
    }

    pub fn from_program(program: &Program) -> PolicyMeta {
        let mandates = program
            .mandates
            .iter()
            .enumerate()
            .map(|(id, m)| MandateMeta {
                name: m.name.clone(),
                principal: m.principal.clone(),
                holders: m.holders.clone(),
                holder_prefixes: m.holder_prefixes.clone(),
                chain: program.chain(id).into_iter().map(|c| program.mandates[c].name.clone()).collect(),
                expires_at: program.expires_at(id),
            })
            .collect();
        let approvals = program
            .approvals
            .iter()
            .map(|a| ApprovalMeta {
                kind: a.name.clone(),
                binds: a.binds.iter().map(|b| b.name().to_string()).collect(),
                ttl: a.ttl,
                single_use: a.single_use,
                approvers: a.approvers.as_ref().map(|a| ApproversMeta {
                    principal: a.principal,
                    ids: a.ids.clone(),
                    prefixes: a.prefixes.clone(),
                }),
            })
            .collect();
        let mut budgets = Vec::new();
        let declarers = program.mandates.iter().map(|m| (&m.name, &m.rules, false));
        let declarers = declarers.chain(program.templates.iter().map(|t| (&t.name, &t.rules, true)));
        for (declarer, rules, template) in declarers {
            for rule in rules {
                if let RuleKind::Budget { name, max, window } = &rule.kind {
                    let window = match window {
                        Window::PerOperation => "operation",
                        Window::PerHour => "hour",
                        Window::PerDay => "day",
                        Window::InTotal => "total",
                    };
                    budgets.push(BudgetMeta {
                        mandate: declarer.clone(),
                        name: name.clone(),
                        max: *max,
                        window: window.to_string(),
                        template,
                    });
                }
            }
        }
        let targets = crate::check::tool_targets(program)
            .into_iter()
            .map(|(tool, argument)| TargetMeta { tool, argument })
            .collect();
        let mut facts: Vec<String> = program
            .mandates
            .iter()
            .flat_map(|m| &m.rules)
            .filter_map(|rule| match &rule.kind {
                RuleKind::Fact { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        facts.sort();
        facts.dedup();
        PolicyMeta {
            policy: program.hash.clone(),
            mandates,
            approvals,
            budgets,
            targets,
            facts: Some(facts),
            world: WorldMeta::from_program(program),
            templates: TemplateMeta::from_program(program),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    pub fn from_json(text: &[u8]) -> Result<PolicyMeta, String> {
        serde_json::from_slice(text).map_err(|e| format!("the gateway metadata is not valid: {e}"))
    }

    pub fn mandate(&self, name: &str) -> Option<&MandateMeta> {
        self.mandates.iter().find(|m| m.name == name)
    }

    /// The mandates `subject` holds, by id or by a `holder under` prefix.
    pub fn held_by(&self, subject: &str) -> Vec<&MandateMeta> {
        self.mandates.iter().filter(|m| crate::eval::holds(&m.holders, &m.holder_prefixes, subject)).collect()
    }

    /// The argument `tool` names as its target.
    pub fn target_of(&self, tool: &str) -> Option<&str> {
        self.targets.iter().find(|t| t.tool == tool).map(|t| t.argument.as_str())
    }

    /// Whether the policy reads the fact `name` (always, for metadata that does not record its facts).
    pub fn uses_fact(&self, name: &str) -> bool {
        self.facts.as_ref().is_none_or(|facts| facts.iter().any(|f| f == name))
    }

    pub fn approval(&self, kind: &str) -> Option<&ApprovalMeta> {
        self.approvals.iter().find(|a| a.kind == kind)
    }

    /// The budgets a decision under `chain` reads, one per counter name (the module reads `context.counters.NAME`
    /// and increments NAME once, whoever declares it): those of the chain's mandates, the first declared of a name
    /// first; then, for each instance of the chain (`TEMPLATE/ID@VERSION`, [`PolicyMeta::instance_in`]; several
    /// under sub-delegation, root first), its template's budgets whose names nothing above declares.
    pub fn budgets_of<'a>(&'a self, chain: &[String]) -> Vec<&'a BudgetMeta> {
        let of_mandates = self.budgets.iter().filter(|b| !b.template && chain.contains(&b.mandate));
        let templates: Vec<&str> = chain.iter().filter_map(|step| Self::instance_in(step)).map(|(t, _)| t).collect();
        let of_templates = templates
            .into_iter()
            .flat_map(|template| self.budgets.iter().filter(move |b| b.template && b.mandate == template));
        let mut out: Vec<&BudgetMeta> = Vec::new();
        for budget in of_mandates.chain(of_templates) {
            if !out.iter().any(|b| b.name == budget.name) {
                out.push(budget);
            }
        }
        out
    }

    /// The budget a counter named by an `increment-counter` obligation of a decision under `chain` counts in: the
    /// one of that name [`PolicyMeta::budgets_of`] gives.
    pub fn budget_of(&self, chain: &[String], counter: &str) -> Option<&BudgetMeta> {
        self.budgets_of(chain).into_iter().find(|b| b.name == counter)
    }

    /// The window of a counter named by an `increment-counter` obligation, as the chain's budgets declare it.
    pub fn window_of(&self, chain: &[String], counter: &str) -> Option<&str> {
        self.budget_of(chain, counter).map(|b| b.window.as_str())
    }

    /// The template and the reference (`TEMPLATE/ID`) of the instance a chain ends with (`TEMPLATE/ID@VERSION`, as
    /// a decision under an instance names it); `None` when it ends with a mandate (whose name, an identifier, has no
    /// `/`).
    pub fn instance_of(chain: &[String]) -> Option<(&str, &str)> {
        Self::instance_in(chain.last()?)
    }

    /// The template and the reference (`TEMPLATE/ID`) of a step of a chain that names an instance
    /// (`TEMPLATE/ID@VERSION`); `None` for a mandate.
    pub fn instance_in(step: &str) -> Option<(&str, &str)> {
        let (template, _) = step.split_once('/')?;
        let reference = step.rsplit_once('@').map_or(step, |(reference, _)| reference);
        Some((template, reference))
    }
}

/// `wasm` with a custom section `remit.gateway` holding `meta` appended (a custom section may come last; runtimes
/// skip it).
pub fn embed(wasm: &[u8], meta: &PolicyMeta) -> Vec<u8> {
    let payload = meta.to_json();
    let mut content = Vec::new();
    leb128(&mut content, SECTION.len() as u64);
    content.extend_from_slice(SECTION.as_bytes());
    content.extend_from_slice(payload.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    leb128(&mut out, content.len() as u64);
    out.extend_from_slice(&content);
    out
}

/// The [`PolicyMeta`] of a module's `remit.gateway` section, when it has one.
pub fn extract(wasm: &[u8]) -> Result<Option<PolicyMeta>, String> {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|e| format!("not a valid module: {e}"))?;
        if let wasmparser::Payload::CustomSection(section) = payload {
            if section.name() == SECTION {
                return PolicyMeta::from_json(section.data()).map(Some);
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_survives_a_round_trip_through_a_custom_section() {
        let meta = PolicyMeta {
            policy: "sha256:x".into(),
            mandates: vec![MandateMeta {
                name: "m".into(),
                principal: "user:p".into(),
                holders: vec!["agent:a".into()],
                holder_prefixes: vec!["agent:club/".into()],
                chain: vec!["m".into()],
                expires_at: Some(1_798_761_600),
            }],
            approvals: vec![ApprovalMeta {
                kind: "k".into(),
                binds: vec!["tool".into()],
                ttl: 900,
                single_use: true,
                approvers: Some(ApproversMeta { principal: true, ids: vec!["user:cfo".into()], prefixes: vec![] }),
            }],
            budgets: vec![BudgetMeta {
                mandate: "m".into(),
                name: "b".into(),
                max: 2,
                window: "hour".into(),
                template: false,
            }],
            targets: vec![TargetMeta { tool: "read_file".into(), argument: "path".into() }],
            facts: Some(vec!["price_sheet".into()]),
            world: None,
            templates: Vec::new(),
        };
        // The smallest valid module: magic and version.
        let empty = b"\0asm\x01\0\0\0".to_vec();
        assert_eq!(extract(&empty).unwrap(), None);
        let with = embed(&empty, &meta);
        wasmparser::Validator::new().validate_all(&with).expect("still a valid module");
        assert_eq!(extract(&with).unwrap(), Some(meta.clone()));
        assert_eq!(meta.window_of(&["m".to_string()], "b"), Some("hour"));
        assert_eq!(meta.window_of(&["other".to_string()], "b"), None);
        assert_eq!(meta.held_by("agent:a").len(), 1);
        // A `holder under` prefix holds as `under` tests: exact bytes, never an id that climbs out of it.
        assert_eq!(meta.held_by("agent:club/desk").len(), 1);
        assert!(meta.held_by("agent:clubhouse").is_empty());
        assert!(meta.held_by("agent:club/../a").is_empty());
        assert_eq!(meta.target_of("read_file"), Some("path"));
        assert!(meta.uses_fact("price_sheet") && !meta.uses_fact("price_shet"));
        // Metadata written before facts were recorded accepts every name.
        assert!(PolicyMeta { facts: None, ..meta.clone() }.uses_fact("price_shet"));
        assert_eq!(meta.target_of("m"), None);
    }

    #[test]
    fn expiring_mandates_are_those_ended_or_ending_within_the_horizon() {
        let mandate = |name: &str, expires_at| MandateMeta {
            name: name.into(),
            principal: "user:p".into(),
            holders: vec![],
            holder_prefixes: vec![],
            chain: vec![name.into()],
            expires_at,
        };
        let meta = PolicyMeta {
            policy: "sha256:x".into(),
            mandates: vec![mandate("late", Some(1_000)), mandate("soon", Some(500)), mandate("never", None)],
            approvals: vec![],
            budgets: vec![],
            targets: vec![],
            facts: None,
            world: None,
            templates: Vec::new(),
        };
        assert_eq!(meta.expiring(100, 0), vec![]);
        assert_eq!(meta.expiring(100, 400), vec![("soon", 500)]);
        assert_eq!(meta.expiring(600, 399), vec![("soon", 500)]);
        assert_eq!(meta.expiring(600, 400), vec![("soon", 500), ("late", 1_000)]);
        assert_eq!(meta.expiring(2_000, 0), vec![("soon", 500), ("late", 1_000)]);
    }

    /// A tool's `resource TYPE` is in the world metadata, by tool, and travels in the module's section; a tool
    /// without one is absent, and world metadata written before tools declared one still reads.
    #[test]
    fn each_tools_declared_resource_type_is_carried() {
        let mut sources = crate::stdlib::sources();
        let policy = "resource todo { owner: string }\nresource board { owner: string }\n\
                      tool update_todo(todo: string) {\n  target args.todo\n  resource todo\n}\n\
                      tool rename_board(board: string)\n\
                      mandate m for \"user:alice\" {\n  holder \"agent:a\"\n  allow update_todo\n  allow rename_board\n}\n";
        sources.add("p.remit", policy);
        let checked = crate::check::check(sources);
        let program = checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let meta = PolicyMeta::from_program(&program);
        let world = meta.world.clone().unwrap();
        assert_eq!(world.tool_resource_types, BTreeMap::from([("update_todo".into(), "todo".into())]));
        let empty = b"\0asm\x01\0\0\0".to_vec();
        assert_eq!(extract(&embed(&empty, &meta)).unwrap().unwrap().world, Some(world));
        let old = br#"{"policy":"sha256:x","mandates":[],"approvals":[],"budgets":[],
            "world":{"subjects":[],"resources":[{"type":"todo","attributes":[]}],"relations":[]}}"#;
        assert!(PolicyMeta::from_json(old).unwrap().world.unwrap().tool_resource_types.is_empty());
    }

    /// A template's budgets are carried, marked; a chain ending with one of its instances reads them after its
    /// mandates', a name a mandate declares being the mandate's.
    #[test]
    fn templates_budgets_are_read_under_their_instances_after_the_chains_mandates() {
        let mut sources = crate::stdlib::sources();
        let policy = "tool pay(amount: money)
tool ship(merchant: string)
                      mandate ceiling for \"org:acme\" {\n  allow pay\n  allow ship\n                        budget shipments: at most 3 calls to ship per day\n}\n                      template budgeted(cap: money) under ceiling {\n  holder under \"agent:\"\n  allow pay\n                        allow ship\n  budget purchases: at most 2 calls to pay per hour\n                        budget shipments: at most 3 calls to ship per day\n}\n";
        sources.add("p.remit", policy);
        let checked = crate::check::check(sources);
        let program = checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let meta = PolicyMeta::from_program(&program);
        let declared: Vec<(&str, &str, bool)> =
            meta.budgets.iter().map(|b| (b.mandate.as_str(), b.name.as_str(), b.template)).collect();
        assert_eq!(
            declared,
            [("ceiling", "shipments", false), ("budgeted", "purchases", true), ("budgeted", "shipments", true)]
        );
        let text = meta.to_json();
        assert_eq!(text.matches("\"template\":true").count(), 2, "{text}");
        assert_eq!(PolicyMeta::from_json(text.as_bytes()).unwrap(), meta);
        let of = |chain: &[&str]| {
            let chain: Vec<String> = chain.iter().map(|c| c.to_string()).collect();
            meta.budgets_of(&chain).iter().map(|b| (b.mandate.clone(), b.name.clone())).collect::<Vec<_>>()
        };
        let pair = |m: &str, n: &str| (m.to_string(), n.to_string());
        assert_eq!(of(&["ceiling"]), [pair("ceiling", "shipments")]);
        assert_eq!(of(&["ceiling", "budgeted/g-1@3"]), [pair("ceiling", "shipments"), pair("budgeted", "purchases")]);
        // A template's name alone is not an instance of it.
        assert_eq!(of(&["ceiling", "budgeted"]), [pair("ceiling", "shipments")]);
        let chain = ["ceiling".to_string(), "budgeted/g-1@3".to_string()];
        assert_eq!(meta.window_of(&chain, "purchases"), Some("hour"));
        assert_eq!(meta.window_of(&chain[..1], "purchases"), None);
        assert_eq!(PolicyMeta::instance_of(&chain), Some(("budgeted", "budgeted/g-1")));
        assert_eq!(PolicyMeta::instance_of(&chain[..1]), None);
    }

    #[test]
    fn metadata_without_targets_still_reads() {
        let old = br#"{"policy":"sha256:x","mandates":[],"approvals":[],"budgets":[]}"#;
        assert_eq!(PolicyMeta::from_json(old).unwrap().targets, Vec::new());
        let old = br#"{"policy":"sha256:x","mandates":[{"name":"m","principal":"p","holders":["a"],"chain":["m"]}],
            "approvals":[],"budgets":[]}"#;
        assert_eq!(PolicyMeta::from_json(old).unwrap().mandates[0].holder_prefixes, Vec::<String>::new());
    }
}
