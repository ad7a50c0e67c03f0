//! The checked program: names resolved to ids, types known, targets expanded to tool sets. The interpreter
//! (and later the wasm backend) consume only this.

use std::collections::{BTreeMap, BTreeSet};

use crate::source::{SourceMap, Span};
use crate::syntax::ast::{CompareOp, EntityRole, FactVersion, Outcome, Source, Window};
use crate::value::{Decimal, Money};

pub type ToolId = usize;
pub type EffectId = usize;
pub type MandateId = usize;
pub type ApprovalId = usize;
pub type TemplateId = usize;
/// Position on the impact scale (0 is the lowest level).
pub type Level = usize;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    String,
    Int,
    Decimal,
    Money,
    Bool,
    Timestamp,
    Duration,
    /// Identifiers of a declared kind; strings on the wire.
    Kind(String),
    /// A declared enum and its variants; strings on the wire.
    Enum(String, Vec<String>),
    Set(Box<Type>),
    Level,
}

impl Type {
    pub fn display(&self) -> String {
        match self {
            Type::String => "string".into(),
            Type::Int => "int".into(),
            Type::Decimal => "decimal".into(),
            Type::Money => "money".into(),
            Type::Bool => "bool".into(),
            Type::Timestamp => "timestamp".into(),
            Type::Duration => "duration".into(),
            Type::Kind(k) | Type::Enum(k, _) => k.clone(),
            Type::Set(t) => format!("set<{}>", t.display()),
            Type::Level => "level".into(),
        }
    }

    /// Types whose values have an order (`<`, `<=`, …).
    pub fn is_ordered(&self) -> bool {
        matches!(self, Type::Int | Type::Decimal | Type::Money | Type::Timestamp | Type::Duration | Type::Level)
    }

    /// Types compared as text (`under` applies).
    pub fn is_textual(&self) -> bool {
        matches!(self, Type::String | Type::Kind(_))
    }
}

/// A typed constant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    String(String),
    /// `int` and `decimal` values; the type says which.
    Number(Decimal),
    Money(Money),
    Bool(bool),
    /// Nanoseconds since the Unix epoch (a policy writes whole seconds; a request may carry a fraction).
    Timestamp(i128),
    Duration(i64),
    Level(Level),
    Set(Vec<Value>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attr {
    Arg(String),
    ResourceId,
    SubjectId,
    SubjectScopes,
    Context(String),
    Now,
    Attempt,
    Level,
    /// A declared attribute of the subject (`subject.team`), read from `subject.properties`.
    Subject(String),
    /// A declared attribute of the resource (`resource.owner`), read from `resource.properties`.
    Resource(String),
    /// A declared attribute of the mandate's principal (`principal.accounts`), read from
    /// `context.principals.PRINCIPAL` where PRINCIPAL is the principal of the request's mandate chain.
    Principal(String),
    /// `left OP right`, two attributes of one type compared: a bool. Either side missing, mistyped or not comparable
    /// with the other (money in two currencies) is an evaluation error, as for any attribute.
    Compare(Box<Attr>, CompareOp, Box<Attr>, Type),
    /// `item in set`: whether the value of `item` (of the given type) is an element of the set attribute `set`.
    Member(Box<Attr>, Box<Attr>, Type),
    /// `name(terms…)`: whether the relation holds between the terms' values, as the request's
    /// `context.relations` says. A tuple the request does not answer is missing (fails closed).
    Relation(String, Vec<Term>),
    /// `timestamp in CALENDAR`: whether the instant is within the calendar's hours (in its zone's wall-clock time,
    /// outside the holidays the request's `context.holidays.CALENDAR` lists when the calendar is closed on them).
    InCalendar(String, Box<Attr>),
    /// `later - earlier OP duration`: the exact time between two timestamps compared with a whole number of
    /// seconds, a bool.
    Elapsed(Box<Attr>, Box<Attr>, CompareOp, i64),
    /// A parameter of a template (`cap`, `merchants`), or one it has implicitly (`principal`, `holder`,
    /// `granted`): constant per instance. Only a template's conditions read it; no mandate's decision does, and an
    /// engine given one without an instance finds it missing (fails closed).
    Param(String),
    /// `parent.NAME`: a declared parameter of the parent instance, in a template under a template (sub-delegation
    /// from an instance). Constant per instance, like [`Attr::Param`]; read from the instance's parent instance
    /// (its `parent` in `context.grants`). Only the conditions of a template under a template read it.
    ParentParam(String),
}

/// An argument of a relation atom: an attribute's text, or a constant (a string written in the policy, or the
/// mandate's principal).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    Attr(Attr),
    Value(String),
}

impl Term {
    pub fn display(&self) -> String {
        match self {
            Term::Attr(attr) => attr.display(),
            Term::Value(text) => serde_json::Value::String(text.clone()).to_string(),
        }
    }
}

impl Attr {
    pub fn display(&self) -> String {
        match self {
            Attr::Arg(name) => format!("args.{name}"),
            Attr::ResourceId => "resource.id".into(),
            Attr::SubjectId => "subject.id".into(),
            Attr::SubjectScopes => "subject.scopes".into(),
            Attr::Context(name) => format!("context.{name}"),
            Attr::Now => "now".into(),
            Attr::Attempt => "attempt".into(),
            Attr::Level => "level".into(),
            Attr::Subject(name) => format!("subject.{name}"),
            Attr::Resource(name) => format!("resource.{name}"),
            Attr::Principal(name) => format!("principal.{name}"),
            Attr::Compare(left, op, right, _) => format!("{} {} {}", left.display(), op.symbol(), right.display()),
            Attr::Member(item, set, _) => format!("{} in {}", item.display(), set.display()),
            Attr::Relation(name, terms) => {
                format!("{name}({})", terms.iter().map(Term::display).collect::<Vec<_>>().join(", "))
            }
            Attr::InCalendar(calendar, instant) => format!("{} in {calendar}", instant.display()),
            Attr::Elapsed(later, earlier, op, seconds) => {
                format!("{} - {} {} {seconds}s", later.display(), earlier.display(), op.symbol())
            }
            Attr::Param(name) => name.clone(),
            Attr::ParentParam(name) => format!("parent.{name}"),
        }
    }

    /// How the condition `not ATTR` reads, for the bool attributes derived from others (`a >= b` for `not a < b`).
    pub fn display_negated(&self) -> String {
        match self {
            Attr::Compare(left, op, right, _) => {
                format!("{} {} {}", left.display(), op.negated().symbol(), right.display())
            }
            Attr::Member(item, set, _) => format!("{} not in {}", item.display(), set.display()),
            Attr::InCalendar(calendar, instant) => format!("{} not in {calendar}", instant.display()),
            Attr::Elapsed(later, earlier, op, seconds) => {
                format!("{} - {} {} {seconds}s", later.display(), earlier.display(), op.negated().symbol())
            }
            other => format!("not {}", other.display()),
        }
    }

    /// Whether the attribute is computed from other attributes (a comparison, a membership, a relation atom).
    pub fn is_derived(&self) -> bool {
        matches!(
            self,
            Attr::Compare(..) | Attr::Member(..) | Attr::Relation(..) | Attr::InCalendar(..) | Attr::Elapsed(..)
        )
    }

    /// The attributes this one reads, itself included (a derived attribute's operands, recursively).
    pub fn reads(&self) -> Vec<&Attr> {
        let mut out = vec![self];
        match self {
            Attr::Compare(left, _, right, _) | Attr::Member(left, right, _) | Attr::Elapsed(left, right, _, _) => {
                out.extend(left.reads());
                out.extend(right.reads());
            }
            Attr::InCalendar(_, instant) => out.extend(instant.reads()),
            Attr::Relation(_, terms) => {
                for term in terms {
                    if let Term::Attr(attr) = term {
                        out.extend(attr.reads());
                    }
                }
            }
            _ => {}
        }
        out
    }
}

/// One test on one attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Test {
    Compare(CompareOp, Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    Under(String),
    NotUnder(String),
    Contains(Value),
    NotContains(Value),
    Within(Vec<Value>),
    NotWithin(Vec<Value>),
}

impl Test {
    /// The test that holds exactly when this one does not (the checker keeps conditions negation-free).
    pub fn negated(&self) -> Test {
        match self {
            Test::Compare(op, v) => Test::Compare(op.negated(), v.clone()),
            Test::In(v) => Test::NotIn(v.clone()),
            Test::NotIn(v) => Test::In(v.clone()),
            Test::Under(p) => Test::NotUnder(p.clone()),
            Test::NotUnder(p) => Test::Under(p.clone()),
            Test::Contains(v) => Test::NotContains(v.clone()),
            Test::NotContains(v) => Test::Contains(v.clone()),
            Test::Within(v) => Test::NotWithin(v.clone()),
            Test::NotWithin(v) => Test::Within(v.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Atom {
    pub attr: Attr,
    pub ty: Type,
    pub test: Test,
}

/// A condition. Negation is pushed into the atoms, so conditions are negation-free.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cond {
    True,
    False,
    Atom(Atom),
    And(Vec<Cond>),
    Or(Vec<Cond>),
}

/// What a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Tool(ToolId),
    Effect(EffectId),
    AnyTool,
    SideEffects,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    Allow,
    Forbid,
    Limit,
    Scope,
    /// `on_missing`: deny (`else deny`) or escalate (the default) when no presented approval satisfies it.
    Gate {
        approval: ApprovalId,
        on_missing: Outcome,
    },
    RequireOperationId,
    Budget {
        name: String,
        max: u64,
        window: Window,
    },
    Fact {
        name: String,
        version: FactVersion,
        on_stale: Outcome,
    },
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub kind: RuleKind,
    pub target: Target,
    /// The tools the target covers, sorted: the dispatch index is built from these.
    pub tools: Vec<ToolId>,
    pub condition: Cond,
    /// How the rule is named in decisions, e.g. `forbid external_communication`.
    pub label: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Effect {
    pub name: String,
    pub params: Vec<(String, Type)>,
    /// Parameters declared `signed` (money that may be negative).
    pub signed: Vec<String>,
    pub description: Option<String>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub params: Vec<(String, Type)>,
    pub effects: Vec<EffectId>,
    pub level: Level,
    pub side_effects: bool,
    pub scopes: Vec<String>,
    pub administers_mandates: bool,
    /// `open arguments`: arguments the tool does not declare are allowed. Closed by default: an undeclared
    /// argument denies (`request.undeclared-argument`).
    pub open_arguments: bool,
    /// Parameters declared `signed`: their money may be negative. Every other money value must be >= 0.
    pub signed: Vec<String>,
    /// `resource TYPE`: the declared resource type the tool acts on. Decisions do not read it: a gateway looks the
    /// resource's attributes up as this type, whatever type the caller names (docs/gateway.md "Data sets").
    pub resource_type: Option<String>,
    pub span: Span,
}

impl Tool {
    pub fn param(&self, name: &str) -> Option<&Type> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    pub fn is_signed(&self, name: &str) -> bool {
        self.signed.iter().any(|n| n == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Binding {
    Tool,
    Target,
    Arguments,
    Manifest,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Tool => "tool",
            Binding::Target => "target",
            Binding::Arguments => "arguments",
            Binding::Manifest => "manifest",
        }
    }

    pub const ALL: [Binding; 4] = [Binding::Tool, Binding::Target, Binding::Arguments, Binding::Manifest];
}

/// Who may grant an approval kind (`approved by`): an approval whose `approved_by` is none of these never satisfies a
/// gate of the kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvers {
    /// `principal`: the principal of the gate's mandate chain.
    pub principal: bool,
    pub ids: Vec<String>,
    /// `under "prefix"`: every identity that starts with it (with `under`'s path rules, as for holders).
    pub prefixes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ApprovalKind {
    pub name: String,
    /// `approved by …`; `None`: anyone may grant it.
    pub approvers: Option<Approvers>,
    pub binds: Vec<Binding>,
    pub ttl: u64,
    pub single_use: bool,
    pub span: Span,
    /// Where `binds` and `ttl` were written (the name when absent).
    pub binds_span: Span,
    pub ttl_span: Span,
}

#[derive(Debug, Clone)]
pub struct Mandate {
    pub name: String,
    /// Inherited from the root for sub-mandates.
    pub principal: String,
    pub parent: Option<MandateId>,
    /// The agents' ids written `holder "…"`, sorted.
    pub holders: Vec<String>,
    /// The prefixes written `holder under "…"`, sorted: every subject id under one of them holds the mandate
    /// (`eval::is_holder`).
    pub holder_prefixes: Vec<String>,
    pub purpose: Option<String>,
    pub valid_from: Option<i64>,
    pub valid_until: Option<i64>,
    pub max_level: Option<Level>,
    pub otherwise: Outcome,
    pub delegation_depth: Option<u32>,
    pub rules: Vec<Rule>,
    pub span: Span,
    /// Where `valid`, `max level` and `otherwise` were written (the mandate's name when absent).
    pub valid_span: Span,
    pub max_level_span: Span,
    pub otherwise_span: Span,
    pub depth_span: Span,
}

/// What a template hangs under: the mandate whose ceiling its instances must stay within, or (sub-delegation from
/// an instance) another template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parent {
    Mandate(MandateId),
    Template(TemplateId),
}

/// A bound of a template's validity window: an instant, or a timestamp parameter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TimeBound {
    /// Seconds since the Unix epoch.
    At(i64),
    Param(String),
}

/// The parameters every instance of a template has without declaring them: `principal` and `holder` (identities,
/// chosen at grant time within `for` and `holder`) and `granted` (the instant of the grant, from the store's clock).
/// Bounds may read `granted` only; the body reads all three.
pub const IMPLICIT_PARAMS: [(&str, Type); 3] =
    [("principal", Type::String), ("holder", Type::String), ("granted", Type::Timestamp)];

/// One declared parameter of a template.
#[derive(Debug, Clone)]
pub struct TemplateParam {
    pub name: String,
    pub ty: Type,
    /// Declared `signed`: its money may be negative.
    pub signed: bool,
    /// What every instance's value must satisfy (`where …`), over the parameters and `granted`
    /// ([`Attr::Param`]); `Cond::True` when not written (every value of the type).
    pub bound: Cond,
    /// The bound as written, on one line (as rules are labelled); `None` when not written.
    pub bound_text: Option<String>,
    pub span: Span,
}

/// `template NAME(…) under PARENT { … }`: a mandate with parameters. It decides nothing by itself: instances,
/// granted at run time, will (docs/grants-design.md). Its rules' conditions may read [`Attr::Param`].
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub params: Vec<TemplateParam>,
    pub parent: Parent,
    /// `for …`: who may be an instance's principal, ids and prefixes (sorted). Both empty: anyone.
    pub principals: Vec<String>,
    pub principal_prefixes: Vec<String>,
    /// `holder …`: who may hold an instance (one id, chosen at grant time), ids and prefixes (sorted).
    pub holders: Vec<String>,
    pub holder_prefixes: Vec<String>,
    /// `granted by …`: who may grant an instance; the instance's principal only when not written.
    pub granted_by: Approvers,
    pub purpose: Option<String>,
    pub valid_from: Option<TimeBound>,
    pub valid_until: Option<TimeBound>,
    pub max_level: Option<Level>,
    pub otherwise: Outcome,
    pub delegation_depth: Option<u32>,
    pub rules: Vec<Rule>,
    pub span: Span,
    /// Where `valid from`/`valid until` was written (the template's name when absent, as a mandate's).
    pub valid_span: Span,
    /// Where `max level` was written (the template's name when absent, as a mandate's).
    pub max_level_span: Span,
    /// Where `otherwise` was written (the template's name when absent, as a mandate's).
    pub otherwise_span: Span,
    /// Where `delegation depth` was written (the template's name when absent).
    pub depth_span: Span,
    /// Whether `remit check` proved that every instance within the bounds narrows the parent (set by the narrowing
    /// check; `false` when it did not run, found a widening instance or could not decide).
    pub proved: bool,
}

impl Template {
    pub fn param(&self, name: &str) -> Option<&TemplateParam> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// A declared attribute of subjects or resources (`resource todo { owner: string from data }`). One name has one
/// type across the entity types that declare it, so a condition reading it has one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityAttribute {
    pub ty: Type,
    /// Declared `signed`: its money may be negative.
    pub signed: bool,
    pub source: Source,
    /// The entity types that declare it, sorted.
    pub types: Vec<String>,
}

/// `subject NAME { … }` / `resource NAME { … }`: a type of subjects or resources and its attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityType {
    pub role: EntityRole,
    pub name: String,
    /// Name, type and source of each attribute, as declared.
    pub attributes: Vec<(String, Type, Source)>,
    pub span: Span,
}

/// `relation NAME(T, U) from …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub name: String,
    pub params: Vec<Type>,
    pub source: Source,
    pub span: Span,
}

/// `calendar NAME in "Zone" { … }`: the weekly hours and the zone's offsets over the window of the mandates that
/// read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarDef {
    pub name: String,
    pub calendar: crate::time::Calendar,
    pub table: crate::time::ZoneTable,
    pub span: Span,
}

/// A checked policy set.
#[derive(Debug, Clone)]
pub struct Program {
    pub sources: SourceMap,
    /// `sha256:` + hex digest of every source file (names and texts, sorted by name).
    pub hash: String,
    pub levels: Vec<String>,
    pub effects: Vec<Effect>,
    pub tools: Vec<Tool>,
    pub approvals: Vec<ApprovalKind>,
    pub contexts: BTreeMap<String, Type>,
    /// Context attributes declared `signed`: their money may be negative. Every other money value must be >= 0.
    pub signed_contexts: BTreeSet<String>,
    pub mandates: Vec<Mandate>,
    /// The declared types of subjects and resources, sorted by role and name.
    pub entities: Vec<EntityType>,
    /// Every declared subject attribute (`subject.NAME`), over all subject types.
    pub subject_attributes: BTreeMap<String, EntityAttribute>,
    /// Every declared resource attribute (`resource.NAME`), over all resource types.
    pub resource_attributes: BTreeMap<String, EntityAttribute>,
    /// The attributes of the principal type (`principal TYPE { … }`, at most one per policy): `principal.NAME`.
    pub principal_attributes: BTreeMap<String, EntityAttribute>,
    pub relations: BTreeMap<String, Relation>,
    pub calendars: BTreeMap<String, CalendarDef>,
    pub tool_index: BTreeMap<String, ToolId>,
    pub mandate_index: BTreeMap<String, MandateId>,
    /// The templates, in declaration order. No decision reads them yet: instances come with grants at run time.
    pub templates: Vec<Template>,
    pub template_index: BTreeMap<String, TemplateId>,
}

impl Program {
    pub fn tool(&self, name: &str) -> Option<ToolId> {
        self.tool_index.get(name).copied()
    }

    pub fn mandate(&self, name: &str) -> Option<MandateId> {
        self.mandate_index.get(name).copied()
    }

    /// The chain from the root mandate down to `leaf`.
    pub fn chain(&self, leaf: MandateId) -> Vec<MandateId> {
        let mut chain = vec![leaf];
        let mut current = leaf;
        while let Some(parent) = self.mandates[current].parent {
            if chain.contains(&parent) {
                break; // cycles are rejected by the checker; never loop at run time
            }
            chain.push(parent);
            current = parent;
        }
        chain.reverse();
        chain
    }

    /// When `id` stops granting anything: the earliest `valid … until` along its chain (a sub-mandate never outlives
    /// its parent), or `None` when no mandate of the chain has an end.
    pub fn expires_at(&self, id: MandateId) -> Option<i64> {
        self.chain(id).into_iter().filter_map(|m| self.mandates[m].valid_until).min()
    }

    /// Whether `target` covers `tool`.
    pub fn covers(&self, target: &Target, tool: ToolId) -> bool {
        match target {
            Target::Tool(t) => *t == tool,
            Target::Effect(e) => self.tools[tool].effects.contains(e),
            Target::AnyTool => true,
            Target::SideEffects => self.tools[tool].side_effects,
        }
    }

    pub fn target_name(&self, target: &Target) -> String {
        match target {
            Target::Tool(t) => self.tools[*t].name.clone(),
            Target::Effect(e) => self.effects[*e].name.clone(),
            Target::AnyTool => "any tool".into(),
            Target::SideEffects => "side effects".into(),
        }
    }
}
