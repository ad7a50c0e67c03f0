//! The syntax tree of one `.remit` file, as written: names are unresolved and every node keeps its span.

use crate::source::Span;

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub decls: Vec<Decl>,
    /// The span of each declaration, parallel to `decls`.
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decl {
    Import(Import),
    Effect(EffectDecl),
    Levels(LevelsDecl),
    Kind(Name),
    Enum(EnumDecl),
    Context(ContextDecl),
    Approval(ApprovalDecl),
    Tool(ToolDecl),
    Classify(ClassifyDecl),
    Mandate(MandateDecl),
    /// `template NAME(params) under PARENT { … }`: a mandate with typed parameters, instantiated at run time.
    Template(TemplateDecl),
    /// `subject NAME { … }` / `resource NAME { … }`: the attributes of the subjects or resources of a type.
    Entity(EntityDecl),
    /// `relation NAME(T, U) [from …]`.
    Relation(RelationDecl),
    /// `calendar NAME in "Zone" { … }`.
    Calendar(CalendarDecl),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CalendarDecl {
    pub name: Name,
    /// The IANA zone's name as written, and where.
    pub zone: (String, Span),
    /// Each `DAYS TIMES` line: the weekdays (`mon..fri` expanded) and the clock ranges in minutes of the day.
    pub hours: Vec<CalendarHours>,
    /// Each `DATES TIMES` line: local dates (single or ranges) and the clock ranges.
    pub dated: Vec<CalendarDated>,
    /// The dates of `closed on …` lines, as written (the checker says which are not dates).
    pub closed: Vec<DateRangeText>,
    pub closed_on_holidays: bool,
}

/// A date or a range of dates as written in a calendar (`2026-12-24`, `2026-12-27..2027-01-03`): `YYYY-MM-DD`
/// texts, `last` absent for a single date.
#[derive(Debug, Clone, PartialEq)]
pub struct DateRangeText {
    pub first: String,
    pub last: Option<String>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CalendarDated {
    pub dates: Vec<DateRangeText>,
    /// `(start, end)` minutes of the day as written (`24:00` is 1440), each with its span.
    pub times: Vec<(u16, u16, Span)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CalendarHours {
    /// Weekday indexes, Monday 0.
    pub days: Vec<u8>,
    /// `(start, end)` minutes of the day as written (`24:00` is 1440), each with its span.
    pub times: Vec<(u16, u16, Span)>,
}

/// Whose attributes an [`EntityDecl`] declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityRole {
    Subject,
    Resource,
    /// The principal of a mandate (`principal.ATTR`): one type per policy, its attributes always from data.
    Principal,
}

impl EntityRole {
    pub fn keyword(self) -> &'static str {
        match self {
            EntityRole::Subject => "subject",
            EntityRole::Resource => "resource",
            EntityRole::Principal => "principal",
        }
    }
}

/// Where the values of an attribute or a relation come from. Never the agent: the gateway removes whatever the
/// caller sent for a `from data` value and fills it from its data sets; a `from properties` value is kept only from
/// an enforcement point the operator trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Source {
    #[default]
    Data,
    Properties,
}

impl Source {
    pub fn keyword(self) -> &'static str {
        match self {
            Source::Data => "data",
            Source::Properties => "properties",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EntityDecl {
    pub role: EntityRole,
    /// The type name (AuthZEN's `subject.type` / `resource.type`), e.g. `todo`.
    pub name: Name,
    pub attributes: Vec<EntityAttr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EntityAttr {
    pub name: Name,
    pub ty: TypeExpr,
    /// Where `signed` is written: the attribute's money may be negative.
    pub signed: Option<Span>,
    pub source: Source,
    /// Where `from …` is written, if it is.
    pub source_span: Option<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelationDecl {
    pub name: Name,
    pub params: Vec<TypeExpr>,
    pub source: Source,
}

/// `classify TOOL, … as CLASS, …`: the tools (the policy's or the standard library's) are members of the classes,
/// as if each tool's `effects` clause listed them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifyDecl {
    pub tools: Vec<Name>,
    pub classes: Vec<Name>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub path: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EffectDecl {
    pub name: Name,
    pub params: Vec<Param>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LevelsDecl {
    pub levels: Vec<Name>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnumDecl {
    pub name: Name,
    pub variants: Vec<Name>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextDecl {
    pub name: Name,
    pub ty: TypeExpr,
    /// Where `signed` is written: the attribute's money may be negative.
    pub signed: Option<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalDecl {
    pub name: Name,
    pub binds: Vec<Name>,
    pub binds_span: Option<Span>,
    pub ttl: Option<(u64, Span)>,
    pub single_use: bool,
    /// `approved by …`: who may grant it, each where it is written; `None` when not written (anyone).
    pub approvers: Option<Vec<(Approver, Span)>>,
}

/// One entry of `approved by`: the principal of the mandate chain, an identity, or (`under`) every identity that
/// starts with a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    Principal,
    Id(String),
    Under(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Name,
    pub ty: TypeExpr,
    /// Where `signed` was written: the parameter accepts negative money.
    pub signed: Option<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    Named(Name),
    Set(Box<TypeExpr>, Span),
}

impl TypeExpr {
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named(n) => n.span,
            TypeExpr::Set(_, s) => *s,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    pub name: Name,
    pub params: Vec<Param>,
    pub effects: Vec<Name>,
    pub level: Option<Name>,
    pub side_effects: bool,
    pub scopes: Vec<(String, Span)>,
    pub administers_mandates: bool,
    /// `open arguments`: arguments the tool does not declare are allowed (tools are closed by default).
    pub open_arguments: bool,
    /// `target args.NAME`: the parameter whose value is the call's target (the gateway fills `resource.id` from
    /// it). More than one is an error the checker reports.
    pub targets: Vec<Name>,
    /// `resource TYPE`: the declared resource type the tool acts on (a gateway looks the resource's attributes up as
    /// that type). More than one is an error the checker reports.
    pub resource_types: Vec<Name>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MandateDecl {
    pub name: Name,
    /// The principal and the span of its whole `for "…"`.
    pub principal: Option<(String, Span)>,
    pub parent: Option<Name>,
    pub clauses: Vec<Clause>,
    pub span: Span,
}

/// `template NAME(PARAM: TYPE where BOUND, …) under PARENT { … }`. Its clauses are a mandate's, plus `for` (who may
/// be an instance's principal) and `granted by` (who may grant an instance); its conditions may read the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateDecl {
    pub name: Name,
    pub params: Vec<TemplateParam>,
    pub parent: Name,
    pub clauses: Vec<Clause>,
    pub span: Span,
}

/// One parameter of a template: its type and the bound every instance's value must satisfy (`where …`).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateParam {
    pub name: Name,
    pub ty: TypeExpr,
    /// Where `signed` was written: the parameter accepts negative money.
    pub signed: Option<Span>,
    pub bound: Option<Expr>,
}

/// A bound of a validity window: an instant, or (in a template) a timestamp parameter (`valid until until`).
#[derive(Debug, Clone, PartialEq)]
pub enum TimeBound {
    At(i64),
    Param(Name),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Deny,
    Escalate,
}

impl Outcome {
    /// The word after `else` / `otherwise`.
    pub fn keyword(self) -> &'static str {
        match self {
            Outcome::Deny => "deny",
            Outcome::Escalate => "escalate",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    pub kind: ClauseKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    PerOperation,
    PerHour,
    PerDay,
    InTotal,
}

/// One holder of a mandate: an agent's id, or (`under`) every id that starts with a prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub text: String,
    pub span: Span,
    pub under: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClauseKind {
    Holder(Vec<Holder>),
    Purpose(String),
    Valid {
        from: Option<(TimeBound, Span)>,
        until: Option<(TimeBound, Span)>,
    },
    /// `for "user:alice", under "user:"` (templates only): who may be an instance's principal.
    For(Vec<Holder>),
    /// `granted by principal, "user:ops", under "ops:"` (templates only): who may grant an instance.
    GrantedBy(Vec<(Approver, Span)>),
    MaxLevel(Name),
    Otherwise(Outcome),
    DelegationDepth(u32),
    Allow {
        target: Target,
        condition: Option<Expr>,
    },
    Forbid {
        target: Target,
        condition: Option<Expr>,
    },
    Limit {
        target: Target,
        condition: Expr,
    },
    Scope {
        target: Target,
        condition: Expr,
    },
    /// `on_missing`: what a call without the approval gets (`else deny`; escalate when not written).
    Gate {
        approval: Name,
        target: Target,
        condition: Option<Expr>,
        on_missing: Option<Outcome>,
    },
    RequireOperationId {
        target: Target,
    },
    Budget {
        name: Name,
        max: u64,
        target: Target,
        window: Window,
    },
    Fact {
        name: Name,
        version: FactVersion,
        target: Target,
        on_stale: Outcome,
    },
}

/// The version a `fact` clause requires: a whole number (`at version 7`) or a string compared exactly (`at version
/// "v3.2"`); a request's fact is current only as the same JSON type with the same value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FactVersion {
    Number(u64),
    Text(String),
}

impl FactVersion {
    /// A version as the gateway publishes it (`{"version": …}`): a JSON integer ≥ 0, or a string that is not blank
    /// and not digits alone (those are written as numbers, as in a policy). `None` for anything else.
    pub fn from_json(value: &serde_json::Value) -> Option<FactVersion> {
        match value {
            serde_json::Value::String(text) => FactVersion::text(text),
            other => other.as_u64().map(FactVersion::Number),
        }
    }

    /// A version written as a string, unless it is blank or digits alone.
    pub fn text(text: &str) -> Option<FactVersion> {
        let valid = !text.trim().is_empty() && !text.chars().all(|c| c.is_ascii_digit());
        valid.then(|| FactVersion::Text(text.to_string()))
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            FactVersion::Number(n) => serde_json::Value::from(*n),
            FactVersion::Text(text) => serde_json::Value::from(text.as_str()),
        }
    }

    /// Whether a request's `context.facts` value is this version: a JSON integer equal to the number (digits only,
    /// as serde_json's `as_u64` reads it), or a JSON string equal to the text.
    pub fn is_current(&self, value: Option<&serde_json::Value>) -> bool {
        match self {
            FactVersion::Number(n) => value.and_then(serde_json::Value::as_u64) == Some(*n),
            FactVersion::Text(text) => value.and_then(serde_json::Value::as_str) == Some(text.as_str()),
        }
    }
}

impl std::fmt::Display for FactVersion {
    /// As written in a policy: `7`, `"v3.2"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FactVersion::Number(n) => write!(f, "{n}"),
            FactVersion::Text(text) => write!(f, "{text:?}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    AnyTool(Span),
    SideEffects(Span),
    Named(Name),
}

impl Target {
    pub fn span(&self) -> Span {
        match self {
            Target::AnyTool(s) | Target::SideEffects(s) => *s,
            Target::Named(n) => n.span,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>, Span),
    /// A bool attribute used alone as a condition.
    Truthy(Attribute),
    Compare {
        attr: Attribute,
        op: CompareOp,
        operand: Operand,
        span: Span,
    },
    In {
        attr: Attribute,
        negated: bool,
        items: Vec<Operand>,
        span: Span,
    },
    Under {
        attr: Attribute,
        prefix: String,
        span: Span,
    },
    Contains {
        attr: Attribute,
        item: Operand,
        span: Span,
    },
    Within {
        attr: Attribute,
        items: Vec<Operand>,
        span: Span,
    },
    /// `attr in other` / `attr not in other`, where `other` is a set attribute.
    InSet {
        attr: Attribute,
        negated: bool,
        set: Attribute,
        span: Span,
    },
    /// `now in business_hours`: whether a timestamp is within a calendar's hours.
    InCalendar {
        attr: Attribute,
        negated: bool,
        calendar: Name,
        span: Span,
    },
    /// `later - earlier OP duration`: the time between two timestamps compared with a duration.
    Elapsed {
        later: Attribute,
        earlier: Attribute,
        op: CompareOp,
        operand: Operand,
        span: Span,
    },
    /// `owns(principal, resource)`: whether a relation holds between the terms' values.
    Relation {
        name: Name,
        terms: Vec<Operand>,
        span: Span,
    },
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Or(items) | Expr::And(items) => {
                let first = items.first().map(Expr::span).unwrap_or_default();
                let last = items.last().map(Expr::span).unwrap_or_default();
                first.to(last)
            }
            Expr::Not(_, s) => *s,
            Expr::Truthy(a) => a.span,
            Expr::Compare { span, .. }
            | Expr::In { span, .. }
            | Expr::Under { span, .. }
            | Expr::Contains { span, .. }
            | Expr::Within { span, .. }
            | Expr::InSet { span, .. }
            | Expr::InCalendar { span, .. }
            | Expr::Elapsed { span, .. }
            | Expr::Relation { span, .. } => *span,
        }
    }
}

/// `args.amount`, `resource.id`, `now`, … as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub root: String,
    pub field: Option<String>,
    pub span: Span,
}

impl Attribute {
    pub fn display(&self) -> String {
        match &self.field {
            Some(f) => format!("{}.{}", self.root, f),
            None => self.root.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    /// The comparison that holds exactly when this one does not (`<` and `>=`).
    pub fn negated(self) -> CompareOp {
        match self {
            CompareOp::Eq => CompareOp::Ne,
            CompareOp::Ne => CompareOp::Eq,
            CompareOp::Lt => CompareOp::Ge,
            CompareOp::Le => CompareOp::Gt,
            CompareOp::Gt => CompareOp::Le,
            CompareOp::Ge => CompareOp::Lt,
        }
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`).
    pub fn swapped(self) -> CompareOp {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            other => other,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    pub value: Literal,
    pub span: Span,
}

/// A literal as written. Bare identifiers (level names) stay names until checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    String(String),
    /// A number as written (integer or decimal), kept exact.
    Number(String),
    Money {
        amount: String,
        currency: String,
    },
    Bool(bool),
    /// Seconds since the Unix epoch.
    Timestamp(i64),
    /// Seconds.
    Duration(u64),
    Ident(String),
    /// Another attribute (`resource.owner`), where an operand may be one.
    Path(Attribute),
}
