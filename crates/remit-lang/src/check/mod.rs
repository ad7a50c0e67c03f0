//! Semantic checks: resolves names, type-checks constraints, lints the mandates, and lowers the syntax tree of
//! a whole policy set to the [`ir::Program`]; then proves that every sub-mandate narrows its parent
//! ([`narrowing`], docs/narrowing.md). Every problem of every file is reported in one run.
//!
//! The phases, in the order [`check_with`] runs them:
//! 1. parse every file ([`crate::syntax`]);
//! 2. collect every top-level name, so declarations may refer to each other in any order (`Checker::collect`,
//!    in `resolve.rs`);
//! 3. lower every declaration (`Checker::lower`, here): effect classes, tools and approval kinds (`resolve.rs`),
//!    mandates with their delegation and rules (`mandates.rs`), templates with their parameters and bounds
//!    (`templates.rs`), each rule's condition typed and made negation-free (`conditions.rs`);
//! 4. on the lowered program: lints (`lints.rs`), the decision module's limits (`limits.rs`), and, when there is no
//!    error, the narrowing proof ([`narrowing`]).

mod conditions;
mod err;
pub mod limits;
mod lints;
mod mandates;
pub mod narrowing;
mod resolve;
pub mod sat;
mod templates;
mod world;

pub use lints::expiring;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest, Sha256};

use crate::diag::Diagnostic;
use crate::ir::{self, Program, RuleKind, Type};
use crate::source::{SourceMap, Span};
use crate::syntax::ast::{self, Decl};
use crate::syntax::parse_file;

/// The result of checking a policy set: a program when there is no error, and every diagnostic.
#[derive(Debug)]
pub struct Checked {
    pub program: Option<ir::Program>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Which optional checks run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Prove that every sub-mandate narrows its parent (`narrowing`). Run time evaluates the whole chain
    /// anyway, so a program checked without it still cannot widen; what only needs decisions (`remit test`,
    /// `remit diff`, tests confirming counterexamples) turns it off.
    pub narrowing: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { narrowing: true }
    }
}

/// Parses and checks every file of `sources` as one policy set.
pub fn check(sources: SourceMap) -> Checked {
    check_with(sources, Options::default())
}

/// [`check`] with a choice of optional checks.
pub fn check_with(sources: SourceMap, options: Options) -> Checked {
    let mut diagnostics = Vec::new();
    let mut decls = Vec::new();
    for (id, file) in sources.files() {
        match parse_file(id, &file.text) {
            Ok(parsed) => decls.extend(parsed.decls),
            Err(errors) => diagnostics.extend(errors),
        }
    }
    let (decls, shadowing) = resolve::shadow_library(&sources, decls);
    diagnostics.extend(shadowing);
    let mut checker = Checker::new(&sources);
    checker.collect(&decls);
    checker.world(&decls);
    let program = checker.lower(&decls);
    diagnostics.extend(checker.diagnostics);
    let program = program.map(|mut program| {
        diagnostics.extend(lints::lint(&program));
        diagnostics.extend(lints::unnamed_library_tools(&program, &sources, &decls));
        diagnostics.extend(limits::check(&program));
        diagnostics.extend(templates::lint(&program));
        // Narrowing compares sound programs only: after any error its questions have no reliable answer.
        if options.narrowing && !diagnostics.iter().any(Diagnostic::is_error) {
            program.sources = sources.clone();
            diagnostics.extend(narrowing::check(&program));
            let findings = narrowing::parametric::analyse(&program);
            diagnostics.extend(narrowing::parametric::check_findings(&program, &findings));
            let proved = narrowing::parametric::proved(&program, &findings);
            for (template, proved) in program.templates.iter_mut().zip(proved) {
                template.proved = proved;
            }
        }
        program.hash = policy_hash(&sources);
        program.sources = sources;
        program
    });
    diagnostics.sort_by_key(|d| (d.primary_span(), d.code));
    let has_error = diagnostics.iter().any(Diagnostic::is_error);
    Checked { program: if has_error { None } else { program }, diagnostics }
}

/// Each tool's target argument (`target args.NAME`), sorted by tool: what a gateway fills `resource.id` from.
/// Decisions never read it, so it is not part of [`ir::Tool`] (the interpreter and the module stay as they are); it
/// is read again from the checked program's sources, where `check` accepted it.
pub fn tool_targets(program: &ir::Program) -> Vec<(String, String)> {
    let mut targets = Vec::new();
    for (id, file) in program.sources.files() {
        let Ok(parsed) = parse_file(id, &file.text) else { continue };
        for decl in parsed.decls {
            let Decl::Tool(t) = decl else { continue };
            let (Some(target), Some(tool)) = (t.targets.first(), program.tool(&t.name.text)) else { continue };
            if matches!(program.tools[tool].param(&target.text), Some(Type::String | Type::Kind(_))) {
                targets.push((t.name.text.clone(), target.text.clone()));
            }
        }
    }
    targets.sort();
    targets.dedup();
    targets
}

/// `sha256:` + hex digest of all sources, sorted by name, so file order does not change it.
fn policy_hash(sources: &SourceMap) -> String {
    let mut files: Vec<_> = sources.files().map(|(_, f)| (f.name.as_str(), f.text.as_str())).collect();
    files.sort();
    let mut hasher = Sha256::new();
    for (name, text) in files {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    sha256_text(&hasher.finalize())
}

/// `sha256:` and the lowercase hex of `digest`.
fn sha256_text(digest: &[u8]) -> String {
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `sha256:` + hex digest of what the checked program says, not how it is written: every declaration and rule in
/// a canonical text (names instead of ids, lists of declarations, clauses, parameters and holders sorted), without
/// positions, comments, white space or file names. So a reformat, a reorder of declarations or clauses, or a move
/// between files keeps it, while any change to the decisions the policy can make changes it (the order of terms
/// inside one condition still counts). `remit_policy_info` reports it next to the source hash (docs/abi.md).
pub fn program_hash(p: &Program) -> String {
    let sorted = |mut items: Vec<String>| {
        items.sort();
        items
    };
    let mut lines: Vec<String> = vec![format!("levels {:?}", p.levels)];
    for e in &p.effects {
        let params = sorted(e.params.iter().map(|(n, t)| format!("{n}: {t:?}")).collect());
        lines.push(format!("effect {:?} {params:?} signed {:?}", e.name, sorted(e.signed.clone())));
    }
    for t in &p.tools {
        let params = sorted(t.params.iter().map(|(n, ty)| format!("{n}: {ty:?}")).collect());
        let effects = sorted(t.effects.iter().map(|&e| p.effects[e].name.clone()).collect());
        let mut line = format!(
            "tool {:?} {params:?} effects {effects:?} level {} side {} scopes {:?} administers {} open {} signed {:?}",
            t.name,
            t.level,
            t.side_effects,
            sorted(t.scopes.clone()),
            t.administers_mandates,
            t.open_arguments,
            sorted(t.signed.clone())
        );
        // Which attributes a gateway fills for the tool's resource; written only when declared, so the hash of a
        // policy that declares none stays what it was.
        if let Some(resource_type) = &t.resource_type {
            line.push_str(&format!(" resource {resource_type:?}"));
        }
        lines.push(line);
    }
    for a in &p.approvals {
        lines.push(format!("approval {:?} {:?} {} {} {:?}", a.name, a.binds, a.ttl, a.single_use, a.approvers));
    }
    for (name, ty) in &p.contexts {
        lines.push(format!("context {name:?} {ty:?} signed {}", p.signed_contexts.contains(name)));
    }
    for e in &p.entities {
        let attributes = sorted(e.attributes.iter().map(|a| format!("{a:?}")).collect());
        lines.push(format!("entity {:?} {:?} {attributes:?}", e.role, e.name));
    }
    for (name, a) in &p.subject_attributes {
        lines.push(format!("subject attribute {name:?} signed {}", a.signed));
    }
    for (name, a) in &p.resource_attributes {
        lines.push(format!("resource attribute {name:?} signed {}", a.signed));
    }
    for (name, a) in &p.principal_attributes {
        lines.push(format!("principal attribute {name:?} signed {}", a.signed));
    }
    for r in p.relations.values() {
        lines.push(format!("relation {:?} {:?} {:?}", r.name, r.params, r.source));
    }
    for c in p.calendars.values() {
        lines.push(format!("calendar {:?} {:?} table {:?}", c.name, c.calendar, c.table.encode()));
    }
    for m in &p.mandates {
        let rules = sorted(
            m.rules
                .iter()
                .map(|r| {
                    let kind = match &r.kind {
                        RuleKind::Gate { approval, on_missing } => {
                            format!("Gate {:?} {on_missing:?}", p.approvals[*approval].name)
                        }
                        other => format!("{other:?}"),
                    };
                    format!("{kind} {:?} {:?}", p.target_name(&r.target), r.condition)
                })
                .collect(),
        );
        lines.push(format!(
            "mandate {:?} principal {:?} parent {:?} holders {:?} {:?} purpose {:?} valid {:?} {:?} max {:?} \
             otherwise {:?} depth {:?} rules {rules:?}",
            m.name,
            m.principal,
            m.parent.map(|parent| &p.mandates[parent].name),
            sorted(m.holders.clone()),
            sorted(m.holder_prefixes.clone()),
            m.purpose,
            m.valid_from,
            m.valid_until,
            m.max_level,
            m.otherwise,
            m.delegation_depth,
        ));
    }
    // Templates add lines only when there are some, so a policy without one keeps its hash.
    for t in &p.templates {
        let rules = sorted(
            t.rules.iter().map(|r| format!("{:?} {:?} {:?}", r.kind, p.target_name(&r.target), r.condition)).collect(),
        );
        let params: Vec<String> =
            t.params.iter().map(|q| format!("{} {:?} {} {:?}", q.name, q.ty, q.signed, q.bound)).collect();
        let parent = match t.parent {
            ir::Parent::Mandate(id) => format!("mandate {:?}", p.mandates[id].name),
            ir::Parent::Template(id) => format!("template {:?}", p.templates[id].name),
        };
        lines.push(format!(
            "template {:?} {params:?} parent {parent} for {:?} {:?} holders {:?} {:?} granted by {:?} purpose {:?} \
             valid {:?} {:?} max {:?} otherwise {:?} depth {:?} rules {rules:?}",
            t.name,
            t.principals,
            t.principal_prefixes,
            t.holders,
            t.holder_prefixes,
            t.granted_by,
            t.purpose,
            t.valid_from,
            t.valid_until,
            t.max_level,
            t.otherwise,
            t.delegation_depth,
        ));
    }
    lines.sort();
    sha256_text(&Sha256::digest(lines.join("\n").as_bytes()))
}

/// What a top-level name refers to.
#[derive(Debug, Clone, Copy)]
enum Symbol {
    Effect(usize),
    Tool(usize),
    Kind,
    Enum,
    Approval(usize),
    Mandate(usize),
    Template(usize),
}

impl Symbol {
    /// The kind of declaration, with its article: "an effect class".
    fn with_article(self) -> &'static str {
        match self {
            Symbol::Effect(_) => "an effect class",
            Symbol::Tool(_) => "a tool",
            Symbol::Kind => "a kind",
            Symbol::Enum => "an enum",
            Symbol::Approval(_) => "an approval kind",
            Symbol::Mandate(_) => "a mandate",
            Symbol::Template(_) => "a template",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Symbol::Effect(_) => "effect class",
            Symbol::Tool(_) => "tool",
            Symbol::Kind => "kind",
            Symbol::Enum => "enum",
            Symbol::Approval(_) => "approval kind",
            Symbol::Mandate(_) => "mandate",
            Symbol::Template(_) => "template",
        }
    }
}

struct Checker<'a> {
    sources: &'a SourceMap,
    diagnostics: Vec<Diagnostic>,
    symbols: HashMap<String, (Symbol, Span)>,
    /// The mandates some template hangs under: such a mandate may be held by no one (a ceiling only instances act
    /// under).
    ceilings: BTreeSet<String>,
    levels: Vec<String>,
    enums: HashMap<String, Vec<String>>,
    contexts: BTreeMap<String, Type>,
    signed_contexts: BTreeSet<String>,
    /// The declared subject and resource types and relations (`world.rs`).
    world: world::World,
}

impl<'a> Checker<'a> {
    fn new(sources: &'a SourceMap) -> Checker<'a> {
        Checker {
            sources,
            diagnostics: Vec::new(),
            symbols: HashMap::new(),
            ceilings: BTreeSet::new(),
            levels: Vec::new(),
            enums: HashMap::new(),
            contexts: BTreeMap::new(),
            signed_contexts: BTreeSet::new(),
            world: world::World::default(),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    fn names_where(&self, keep: impl Fn(Symbol) -> bool) -> Vec<&str> {
        let mut names: Vec<&str> =
            self.symbols.iter().filter(|(_, (s, _))| keep(*s)).map(|(n, _)| n.as_str()).collect();
        names.sort();
        names
    }

    /// Second pass: lowers every declaration. Returns `None` when a declaration could not be lowered.
    fn lower(&mut self, decls: &[Decl]) -> Option<ir::Program> {
        let errors_before = self.diagnostics.len();
        let mut effects = Vec::new();
        let mut effect_spans = Vec::new();
        for decl in decls {
            if let Decl::Effect(e) = decl {
                let params = self.params(&e.params);
                effect_spans.push(e.params.iter().map(|p| p.name.span).collect::<Vec<_>>());
                effects.push(ir::Effect {
                    name: e.name.text.clone(),
                    params,
                    signed: Self::signed_params(&e.params),
                    description: e.description.clone(),
                    span: e.name.span,
                });
            }
        }
        let classified = self.classified(decls);
        let mut tools = Vec::new();
        for decl in decls {
            if let Decl::Tool(t) = decl {
                let extra = classified.get(t.name.text.as_str()).map_or(&[][..], Vec::as_slice);
                tools.push(self.tool(t, extra, &effects, &effect_spans));
            }
        }
        let mut approvals = Vec::new();
        for decl in decls {
            if let Decl::Approval(a) = decl {
                approvals.push(self.approval(a));
            }
        }
        let mandate_decls: Vec<&ast::MandateDecl> =
            decls.iter().filter_map(|d| if let Decl::Mandate(m) = d { Some(m) } else { None }).collect();
        let parents = self.parents(&mandate_decls);
        self.ceilings = decls
            .iter()
            .filter_map(|d| if let Decl::Template(t) = d { Some(t.parent.text.clone()) } else { None })
            .collect();
        let mut mandates = Vec::new();
        for (index, m) in mandate_decls.iter().enumerate() {
            // A sub-mandate acts for its root's principal; conditions may name it (`resource.owner == principal`).
            let mut root = index;
            for _ in 0..mandate_decls.len() {
                match parents[root] {
                    Some(parent) => root = parent,
                    None => break,
                }
            }
            let principal = mandate_decls[root].principal.as_ref().map(|(p, _)| p.as_str());
            let scope = Scope { tools: &tools, effects: &effects, principal, template: None };
            mandates.push(self.mandate(m, parents[index], &scope));
        }
        // Principals are inherited from the root.
        for index in 0..mandates.len() {
            if mandates[index].parent.is_some() {
                let mut root = index;
                let mut steps = 0;
                while let Some(parent) = mandates[root].parent {
                    root = parent;
                    steps += 1;
                    if steps > mandates.len() {
                        break;
                    }
                }
                mandates[index].principal = mandates[root].principal.clone();
            }
        }
        let template_decls: Vec<&ast::TemplateDecl> =
            decls.iter().filter_map(|d| if let Decl::Template(t) = d { Some(t) } else { None }).collect();
        let templates = self.templates(&template_decls, &tools, &effects);
        if self.diagnostics[errors_before..].iter().any(Diagnostic::is_error) {
            return None;
        }
        let parents: Vec<Option<usize>> = mandates.iter().map(|m| m.parent).collect();
        self.calendar_windows(&mandates, |leaf| {
            let mut chain = vec![leaf];
            while let Some(parent) = parents[*chain.last().expect("not empty")] {
                if chain.contains(&parent) {
                    break;
                }
                chain.push(parent);
            }
            chain
        });
        let tool_index = tools.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let mandate_index = mandates.iter().enumerate().map(|(i, m)| (m.name.clone(), i)).collect();
        let template_index = templates.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Some(ir::Program {
            sources: SourceMap::new(),
            hash: String::new(),
            levels: self.levels.clone(),
            effects,
            tools,
            approvals,
            contexts: self.contexts.clone(),
            signed_contexts: self.signed_contexts.clone(),
            mandates,
            entities: self.world.entities.clone(),
            subject_attributes: self.world.subject_attributes.clone(),
            resource_attributes: self.world.resource_attributes.clone(),
            principal_attributes: self.world.principal_attributes.clone(),
            relations: self.world.relations.clone(),
            calendars: self.world.calendars.clone(),
            tool_index,
            mandate_index,
            templates,
            template_index,
        })
    }
}

struct Scope<'a> {
    tools: &'a [ir::Tool],
    effects: &'a [ir::Effect],
    /// The principal of the mandate (its root's), when written.
    principal: Option<&'a str>,
    /// In a template: the parameters its conditions may read.
    template: Option<&'a TemplateScope>,
}

/// What a template's condition may read besides a request's attributes: its parameters (`cap`), and the implicit
/// ones (`principal`, `holder`, `granted`; only `granted` in a bound).
struct TemplateScope {
    name: String,
    params: BTreeMap<String, Type>,
    /// While checking a parameter's bound: its name. A bound reads parameters only (there is no request when an
    /// instance is granted).
    bound_of: Option<String>,
    /// In a template under a template: the parent template's name and declared parameters, which the template's
    /// conditions read as `parent.NAME` ([`ir::Attr::ParentParam`]). `None` under a mandate.
    parent: Option<(String, BTreeMap<String, Type>)>,
}

/// The longest tool name (as MCP's tool-name guidance bounds it).
const MAX_TOOL_NAME: usize = 128;

/// A quoted tool name is the name requests carry: non-empty, at most [`MAX_TOOL_NAME`] bytes, and made of ASCII
/// letters, digits and `_ - . / :` only — no space, quote or control character that a log, a header or a
/// terminal could misread.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b':'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn standard_library_checks_without_diagnostics() {
        let sources = crate::stdlib::sources();
        let checked = super::check(sources.clone());
        let rendered: Vec<String> = checked
            .diagnostics
            .iter()
            .map(|d| format!("{} {} at {:?}", d.code, d.message, d.primary_span().map(|s| sources.location(s))))
            .collect();
        assert!(rendered.is_empty(), "{rendered:#?}");
        assert!(checked.program.is_some());
    }
}
