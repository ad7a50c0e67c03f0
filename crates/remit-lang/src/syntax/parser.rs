//! Lowers pest's parse tree to the [`ast`](super::ast).

use pest::iterators::Pair;
use pest::Parser as _;

use super::ast::*;
use super::err;
use crate::diag::Diagnostic;
use crate::source::{FileId, Span};
use crate::value::{parse_duration, parse_timestamp, Decimal};

#[derive(pest_derive::Parser)]
#[grammar = "../../../grammar/remit.pest"]
struct RemitParser;

/// How deeply parentheses, `not`s and `set<…>` types may nest. Every phase after the parser (pest itself, the
/// lowering, the checker, narrowing, the interpreter, codegen) recurses over this nesting, so bounding it here
/// bounds their stack use; real conditions nest a handful of levels.
pub const MAX_NESTING: usize = 64;

/// Parses one file. On a syntax error, returns the diagnostics found.
pub fn parse_file(file: FileId, text: &str) -> Result<File, Vec<Diagnostic>> {
    let invisible = invisible_characters(file, text);
    if !invisible.is_empty() {
        return Err(invisible);
    }
    if let Some(at) = too_deep(text) {
        let word = text[at..].find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(text.len() - at);
        let end = at + word.max(1);
        return Err(vec![err::nesting_too_deep(Span::new(file, at, end), MAX_NESTING)]);
    }
    let mut pairs = match RemitParser::parse(Rule::file, text) {
        Ok(pairs) => pairs,
        Err(error) => return Err(syntax_errors(file, text, error)),
    };
    let mut lower = Lower { file, errors: Vec::new() };
    let root = pairs.next().expect("the file rule always produces one pair");
    let (mut decls, mut spans) = (Vec::new(), Vec::new());
    for pair in root.into_inner() {
        if pair.as_rule() != Rule::EOI {
            spans.push(lower.tight_span(&pair));
            decls.push(lower.decl(pair));
        }
    }
    if lower.errors.is_empty() {
        Ok(File { decls, spans })
    } else {
        Err(lower.errors)
    }
}

/// At most this many syntax errors are reported for one file: past the first few, later ones are mostly echoes.
const MAX_SYNTAX_ERRORS: usize = 20;

/// Every syntax error of a file, not only the first (pest stops there): the declaration the error is in is blanked
/// out up to the next line that starts a declaration, and the file is parsed again. Blanking keeps every offset, so
/// each error points at the file as written. A file with a syntax error is not checked further, so what is blanked
/// out never causes an error of its own.
fn syntax_errors(file: FileId, text: &str, first: pest::error::Error<Rule>) -> Vec<Diagnostic> {
    let starts = declaration_starts(text);
    let mut blanked = text.as_bytes().to_vec();
    let mut errors = Vec::new();
    let mut error = first;
    loop {
        let at = match error.location {
            pest::error::InputLocation::Pos(p) => p,
            pest::error::InputLocation::Span((s, _)) => s,
        };
        // Spaces are written over whole lines only, so the bytes stay UTF-8 (and lossy never loses anything).
        let current = String::from_utf8_lossy(&blanked).into_owned();
        errors.push(syntax_error(file, &current, error));
        if errors.len() == MAX_SYNTAX_ERRORS {
            break;
        }
        // The declaration the error is in: the last one starting before it (an error at a declaration's first
        // word is the previous one's: it was not closed).
        let from = starts.iter().rev().find(|&&s| s < at).copied().unwrap_or(0);
        let Some(to) = starts.iter().find(|&&s| s >= at && s > from).copied() else { break };
        for byte in &mut blanked[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        let current = String::from_utf8_lossy(&blanked).into_owned();
        match RemitParser::parse(Rule::file, &current) {
            Ok(_) => break,
            Err(next) => error = next,
        }
    }
    errors
}

/// The offsets of the lines that start a declaration: a declaration keyword at the start of a line.
fn declaration_starts(text: &str) -> Vec<usize> {
    const KEYWORDS: [&str; 11] = [
        "import", "effect", "levels", "kind", "enum", "context", "approval", "tool", "classify", "mandate", "template",
    ];
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let word = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("");
        if KEYWORDS.contains(&word) {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts
}

fn syntax_error(file: FileId, text: &str, error: pest::error::Error<Rule>) -> Diagnostic {
    let (start, end) = match error.location {
        pest::error::InputLocation::Pos(p) => (p, p),
        pest::error::InputLocation::Span((s, e)) => (s, e),
    };
    // Underline the word at the error position so the label is visible.
    let word_end =
        text[start..].char_indices().find(|(_, c)| c.is_whitespace()).map_or(text.len(), |(i, _)| start + i).max(end);
    let expected = match &error.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => describe_expected(positives),
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    if text[start..].trim().is_empty() {
        // Point at the last thing the file says rather than at nothing.
        let end = significant_len(text);
        let last_start = text[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
        return err::unexpected_end(Span::new(file, last_start, end), &expected);
    }
    err::syntax(Span::new(file, start, word_end), &expected)
}

fn describe_expected(rules: &[Rule]) -> String {
    let mut names: Vec<&str> = rules.iter().filter_map(|r| rule_name(*r)).collect();
    names.sort();
    names.dedup();
    match names.len() {
        0 => "a declaration".to_string(),
        1 => names[0].to_string(),
        _ => {
            let last = names.pop().unwrap_or_default();
            format!("{} or {last}", names.join(", "))
        }
    }
}

fn rule_name(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI
        | Rule::import_decl
        | Rule::effect_decl
        | Rule::levels_decl
        | Rule::kind_decl
        | Rule::enum_decl
        | Rule::context_decl
        | Rule::approval_decl
        | Rule::tool_decl
        | Rule::classify_decl
        | Rule::mandate_decl
        | Rule::template_decl
        | Rule::entity_decl
        | Rule::relation_decl
        | Rule::calendar_decl => "a declaration (`tool`, `effect`, `mandate`, …)",
        Rule::ident => "a name",
        Rule::string => "a string",
        Rule::timestamp => "a timestamp",
        Rule::duration => "a duration",
        Rule::number => "a number",
        Rule::literal | Rule::operand => "a value",
        Rule::ty => "a type",
        Rule::params => "a parameter list `(…)`",
        Rule::param => "a parameter `name: type`",
        Rule::target => "a tool, an effect class, `any tool` or `side effects`",
        Rule::expr | Rule::unary | Rule::comparison | Rule::attribute => "a condition",
        Rule::cmp_op | Rule::in_op | Rule::not_in | Rule::under_op | Rule::contains_op | Rule::within_op => {
            "an operator"
        }
        Rule::list => "a list `[…]`",
        Rule::path => "an attribute (`resource.owner`)",
        Rule::term => "a term (`principal`, `subject`, `resource`, an attribute or a string)",
        Rule::entity_attr => "an attribute `name: type`",
        Rule::source => "`from data` or `from properties`",
        Rule::calendar_hours | Rule::calendar_dated | Rule::calendar_closed => {
            "opening hours (`mon..fri 09:00-17:00`, `2026-12-24 09:00-12:00`), `closed on holidays` or `}`"
        }
        Rule::date_range | Rule::date => "a date `YYYY-MM-DD`",
        Rule::holidays => "`holidays`",
        Rule::approver_principal => "`principal`",
        Rule::weekday => "a weekday (`mon` … `sun`)",
        Rule::clock_range => "hours `HH:MM-HH:MM`",
        Rule::outcome => "`deny` or `escalate`",
        Rule::window => "`per operation`, `per hour`, `per day` or `in total`",
        Rule::holder_clause
        | Rule::purpose_clause
        | Rule::valid_clause
        | Rule::max_level_clause
        | Rule::otherwise_clause
        | Rule::depth_clause
        | Rule::allow_clause
        | Rule::forbid_clause
        | Rule::limit_clause
        | Rule::scope_clause
        | Rule::gate_clause
        | Rule::operation_clause
        | Rule::budget_clause
        | Rule::fact_clause => "a mandate clause (`holder`, `allow`, `forbid`, …) or `}`",
        Rule::for_clause | Rule::granted_by_clause => {
            "a template clause (`for`, `granted by`, `holder`, `allow`, …) or `}`"
        }
        Rule::template_params | Rule::template_param => "a parameter `name: type [where …]`",
        Rule::effects_clause
        | Rule::tool_level_clause
        | Rule::side_effects_clause
        | Rule::requires_scope_clause
        | Rule::administers_clause
        | Rule::open_arguments_clause
        | Rule::target_arg_clause
        | Rule::tool_resource_clause => "a tool clause (`effects`, `level`, `side effects`, …) or `}`",
        Rule::binds_clause | Rule::ttl_clause | Rule::single_use_clause => {
            "an approval clause (`binds`, `ttl`, `single use`) or `}`"
        }
        Rule::kw_where => "`where`",
        Rule::kw_and => "`and`",
        Rule::kw_or => "`or`",
        _ => return None,
    })
}

struct Lower {
    file: FileId,
    errors: Vec<Diagnostic>,
}

impl Lower {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span::new(self.file, s.start(), s.end())
    }

    /// The span of a pair without the trivia pest consumed while trying an optional part after its last
    /// token, so that a trailing comment is not part of a clause.
    fn tight_span(&self, pair: &Pair<'_, Rule>) -> Span {
        let mut span = self.span(pair);
        span.end = span.start + significant_len(pair.as_str()) as u32;
        span
    }

    /// `2026-12-24` or `2026-12-27..2027-01-03`, as written.
    fn date_range(&self, pair: Pair<'_, Rule>) -> DateRangeText {
        let span = self.tight_span(&pair);
        let mut dates = pair.into_inner().map(|d| d.as_str().to_string());
        let first = dates.next().expect("a date");
        DateRangeText { first, last: dates.next(), span }
    }

    /// `HH:MM-HH:MM` as minutes of the day, with its span.
    fn clock_range(&self, pair: Pair<'_, Rule>) -> (u16, u16, Span) {
        let span = self.span(&pair);
        let mut clocks = pair.into_inner().map(|c| clock_minutes(c.as_str()));
        (clocks.next().expect("start"), clocks.next().expect("end"), span)
    }

    fn name(&self, pair: Pair<'_, Rule>) -> Name {
        Name { text: pair.as_str().to_string(), span: self.span(&pair) }
    }

    fn string(&self, pair: Pair<'_, Rule>) -> (String, Span) {
        let span = self.span(&pair);
        let inner = pair.into_inner().next().map_or("", |p| p.as_str());
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        (out, span)
    }

    fn timestamp(&mut self, pair: Pair<'_, Rule>) -> (i64, Span) {
        let span = self.span(&pair);
        match parse_timestamp(pair.as_str()) {
            Some(t) => (t, span),
            None => {
                self.errors.push(err::bad_literal(span, "timestamp", pair.as_str()));
                (0, span)
            }
        }
    }

    fn count(&mut self, pair: Pair<'_, Rule>) -> u64 {
        let span = self.span(&pair);
        match pair.as_str().parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                self.errors.push(err::bad_literal(span, "count", pair.as_str()));
                0
            }
        }
    }

    fn decl(&mut self, pair: Pair<'_, Rule>) -> Decl {
        let span = self.span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner();
        match rule {
            Rule::import_decl => {
                let (path, _) = self.string(inner.next().expect("import path"));
                Decl::Import(Import { path, span })
            }
            Rule::effect_decl => {
                let name = self.name(inner.next().expect("effect name"));
                let mut params = Vec::new();
                let mut description = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::params => params = self.params(p),
                        _ => description = Some(self.string(p).0),
                    }
                }
                Decl::Effect(EffectDecl { name, params, description })
            }
            Rule::levels_decl => Decl::Levels(LevelsDecl { levels: inner.map(|p| self.name(p)).collect(), span }),
            Rule::kind_decl => Decl::Kind(self.name(inner.next().expect("kind name"))),
            Rule::enum_decl => {
                let name = self.name(inner.next().expect("enum name"));
                Decl::Enum(EnumDecl { name, variants: inner.map(|p| self.name(p)).collect() })
            }
            Rule::context_decl => {
                let name = self.name(inner.next().expect("context name"));
                let (ty, signed) = self.signed_ty(&mut inner);
                Decl::Context(ContextDecl { name, ty, signed })
            }
            Rule::approval_decl => self.approval(inner),
            Rule::tool_decl => self.tool(inner),
            Rule::classify_decl => {
                let tools = inner.next().expect("classified tools").into_inner().map(|p| self.tool_name(p)).collect();
                let classes = inner.next().expect("classes").into_inner().map(|p| self.name(p)).collect();
                Decl::Classify(ClassifyDecl { tools, classes })
            }
            Rule::mandate_decl => self.mandate(inner, span),
            Rule::template_decl => self.template(inner, span),
            Rule::entity_decl => {
                let role = match inner.next().expect("subject or resource").as_str() {
                    "subject" => EntityRole::Subject,
                    "principal" => EntityRole::Principal,
                    _ => EntityRole::Resource,
                };
                let name = self.name(inner.next().expect("type name"));
                let attributes = inner
                    .map(|attr| {
                        let mut parts = attr.into_inner();
                        let name = self.name(parts.next().expect("attribute name"));
                        let (ty, signed) = self.signed_ty(&mut parts);
                        let from = parts.next();
                        let source_span = from.as_ref().map(|p| self.span(p));
                        let source = from.map_or(Source::Data, source);
                        EntityAttr { name, ty, signed, source, source_span }
                    })
                    .collect();
                Decl::Entity(EntityDecl { role, name, attributes })
            }
            Rule::relation_decl => {
                let name = self.name(inner.next().expect("relation name"));
                let mut params = Vec::new();
                let mut from = Source::Data;
                for part in inner {
                    match part.as_rule() {
                        Rule::source => from = source(part),
                        _ => params.push(self.ty(part)),
                    }
                }
                Decl::Relation(RelationDecl { name, params, source: from })
            }
            Rule::calendar_decl => {
                let name = self.name(inner.next().expect("calendar name"));
                let _ = inner.next(); // `in`
                let zone = self.string(inner.next().expect("zone"));
                let mut decl = CalendarDecl {
                    name,
                    zone,
                    hours: Vec::new(),
                    dated: Vec::new(),
                    closed: Vec::new(),
                    closed_on_holidays: false,
                };
                for item in inner {
                    match item.as_rule() {
                        Rule::calendar_closed => {
                            for part in item.into_inner() {
                                if part.as_rule() == Rule::holidays {
                                    decl.closed_on_holidays = true;
                                } else {
                                    decl.closed.push(self.date_range(part));
                                }
                            }
                        }
                        Rule::calendar_dated => {
                            let mut dated = CalendarDated { dates: Vec::new(), times: Vec::new() };
                            for part in item.into_inner() {
                                if part.as_rule() == Rule::date_range {
                                    dated.dates.push(self.date_range(part));
                                } else {
                                    dated.times.push(self.clock_range(part));
                                }
                            }
                            decl.dated.push(dated);
                        }
                        _ => {
                            let mut hours = CalendarHours { days: Vec::new(), times: Vec::new() };
                            for part in item.into_inner() {
                                if part.as_rule() != Rule::weekday_range {
                                    hours.times.push(self.clock_range(part));
                                    continue;
                                }
                                let names: Vec<u8> = part.into_inner().map(|d| weekday_index(d.as_str())).collect();
                                let (first, last) = (names[0], *names.last().expect("a weekday"));
                                let mut day = first;
                                loop {
                                    hours.days.push(day);
                                    if day == last {
                                        break;
                                    }
                                    day = (day + 1) % 7;
                                }
                            }
                            decl.hours.push(hours);
                        }
                    }
                }
                Decl::Calendar(decl)
            }
            other => unreachable!("not a declaration: {other:?}"),
        }
    }

    /// `[signed] type` (of a parameter or a context attribute): the type, and where `signed` is written.
    fn signed_ty(&mut self, inner: &mut pest::iterators::Pairs<'_, Rule>) -> (TypeExpr, Option<Span>) {
        let mut ty = inner.next().expect("a type");
        let mut signed = None;
        if ty.as_rule() == Rule::signed {
            signed = Some(self.span(&ty));
            ty = inner.next().expect("a type after `signed`");
        }
        (self.ty(ty), signed)
    }

    fn params(&mut self, pair: Pair<'_, Rule>) -> Vec<Param> {
        pair.into_inner()
            .map(|param| {
                let mut inner = param.into_inner();
                let name = self.name(inner.next().expect("param name"));
                let (ty, signed) = self.signed_ty(&mut inner);
                Param { name, ty, signed }
            })
            .collect()
    }

    fn ty(&mut self, pair: Pair<'_, Rule>) -> TypeExpr {
        let inner = pair.into_inner().next().expect("type body");
        match inner.as_rule() {
            Rule::set_ty => {
                let span = self.span(&inner);
                let element = self.ty(inner.into_inner().next().expect("set element type"));
                TypeExpr::Set(Box::new(element), span)
            }
            _ => TypeExpr::Named(self.name(inner)),
        }
    }

    fn approval(&mut self, mut inner: pest::iterators::Pairs<'_, Rule>) -> Decl {
        let name = self.name(inner.next().expect("approval name"));
        let mut decl =
            ApprovalDecl { name, binds: Vec::new(), binds_span: None, ttl: None, single_use: false, approvers: None };
        for clause in inner {
            match clause.as_rule() {
                Rule::binds_clause => {
                    let span = self.tight_span(&clause);
                    decl.binds_span = Some(decl.binds_span.map_or(span, |s| s.to(span)));
                    decl.binds.extend(clause.into_inner().map(|p| self.name(p)))
                }
                Rule::ttl_clause => {
                    let d = clause.into_inner().next().expect("ttl duration");
                    let span = self.span(&d);
                    match parse_duration(d.as_str()) {
                        Some(seconds) => decl.ttl = Some((seconds, span)),
                        None => self.errors.push(err::bad_literal(span, "duration", d.as_str())),
                    }
                }
                Rule::single_use_clause => decl.single_use = true,
                Rule::approved_by_clause => {
                    let approvers = self.approvers(clause.into_inner());
                    decl.approvers.get_or_insert_with(Vec::new).extend(approvers);
                }
                other => unreachable!("not an approval clause: {other:?}"),
            }
        }
        Decl::Approval(decl)
    }

    fn tool(&mut self, mut inner: pest::iterators::Pairs<'_, Rule>) -> Decl {
        let name = self.tool_name(inner.next().expect("tool name"));
        let params = self.params(inner.next().expect("tool params"));
        let mut tool = ToolDecl {
            name,
            params,
            effects: Vec::new(),
            level: None,
            side_effects: false,
            scopes: Vec::new(),
            administers_mandates: false,
            open_arguments: false,
            targets: Vec::new(),
            resource_types: Vec::new(),
        };
        for clause in inner {
            match clause.as_rule() {
                Rule::effects_clause => tool
                    .effects
                    .extend(clause.into_inner().filter(|p| p.as_rule() == Rule::ident).map(|p| self.name(p))),
                Rule::tool_level_clause => tool.level = Some(self.name(clause.into_inner().next().expect("level"))),
                Rule::side_effects_clause => tool.side_effects = true,
                Rule::requires_scope_clause => tool.scopes.extend(clause.into_inner().map(|p| self.string(p))),
                Rule::administers_clause => tool.administers_mandates = true,
                Rule::open_arguments_clause => tool.open_arguments = true,
                Rule::target_arg_clause => {
                    let argument = clause.into_inner().next().expect("target argument");
                    let field = argument.into_inner().next().expect("target argument name");
                    tool.targets.push(self.name(field));
                }
                Rule::tool_resource_clause => {
                    let name = clause.into_inner().find(|p| p.as_rule() == Rule::ident).expect("resource type");
                    tool.resource_types.push(self.name(name));
                }
                other => unreachable!("not a tool clause: {other:?}"),
            }
        }
        Decl::Tool(tool)
    }

    fn mandate(&mut self, mut inner: pest::iterators::Pairs<'_, Rule>, span: Span) -> Decl {
        let name = self.name(inner.next().expect("mandate name"));
        let mut decl = MandateDecl { name, principal: None, parent: None, clauses: Vec::new(), span };
        for pair in inner {
            match pair.as_rule() {
                Rule::principal_spec => {
                    let span = self.span(&pair);
                    let (principal, _) = self.string(pair.into_inner().next().expect("principal"));
                    decl.principal = Some((principal, span));
                }
                Rule::parent_spec => decl.parent = Some(self.name(pair.into_inner().next().expect("parent"))),
                _ => {
                    let clause = self.clause(pair);
                    decl.clauses.push(clause);
                }
            }
        }
        Decl::Mandate(decl)
    }

    fn template(&mut self, mut inner: pest::iterators::Pairs<'_, Rule>, span: Span) -> Decl {
        let name = self.name(inner.next().expect("template name"));
        let mut params = Vec::new();
        for param in inner.next().expect("template params").into_inner() {
            let mut parts = param.into_inner();
            let name = self.name(parts.next().expect("param name"));
            let (ty, signed) = self.signed_ty(&mut parts);
            let bound = parts.next().map(|w| self.where_clause(w));
            params.push(TemplateParam { name, ty, signed, bound });
        }
        let parent_spec = inner.next().expect("template parent");
        let parent = self.name(parent_spec.into_inner().next().expect("parent"));
        let clauses = inner.map(|pair| self.clause(pair)).collect();
        Decl::Template(TemplateDecl { name, params, parent, clauses, span })
    }

    /// The items of `approved by …` or `granted by …`.
    fn approvers<'i>(&mut self, items: impl Iterator<Item = Pair<'i, Rule>>) -> Vec<(Approver, Span)> {
        let mut approvers = Vec::new();
        for item in items {
            let span = self.span(&item);
            let approver = match item.as_rule() {
                Rule::approver_principal => Approver::Principal,
                Rule::holder_under => {
                    let prefix = item.into_inner().find(|p| p.as_rule() == Rule::string).expect("a prefix");
                    Approver::Under(self.string(prefix).0)
                }
                _ => Approver::Id(self.string(item).0),
            };
            approvers.push((approver, span));
        }
        approvers
    }

    fn clause(&mut self, pair: Pair<'_, Rule>) -> Clause {
        let span = self.tight_span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner().filter(|p| !matches!(p.as_rule(), Rule::kw_where));
        let kind = match rule {
            Rule::holder_clause | Rule::for_clause => {
                let holders = inner
                    .map(|p| {
                        let under = p.as_rule() == Rule::holder_under;
                        let string = if under { p.into_inner().nth(1).expect("prefix") } else { p };
                        let (text, span) = self.string(string);
                        Holder { text, span, under }
                    })
                    .collect();
                if rule == Rule::for_clause {
                    ClauseKind::For(holders)
                } else {
                    ClauseKind::Holder(holders)
                }
            }
            Rule::granted_by_clause => ClauseKind::GrantedBy(self.approvers(inner)),
            Rule::purpose_clause => ClauseKind::Purpose(self.string(inner.next().expect("purpose")).0),
            Rule::valid_clause => {
                let (mut from, mut until) = (None, None);
                for bound in inner {
                    let is_from = bound.as_rule() == Rule::valid_from;
                    let at = bound.into_inner().next().expect("timestamp or parameter");
                    let t = if at.as_rule() == Rule::ident {
                        let name = self.name(at);
                        let span = name.span;
                        (TimeBound::Param(name), span)
                    } else {
                        let (t, span) = self.timestamp(at);
                        (TimeBound::At(t), span)
                    };
                    if is_from {
                        from = Some(t);
                    } else {
                        until = Some(t);
                    }
                }
                ClauseKind::Valid { from, until }
            }
            Rule::max_level_clause => ClauseKind::MaxLevel(self.name(inner.next().expect("level"))),
            Rule::otherwise_clause => ClauseKind::Otherwise(outcome(inner.next().expect("outcome"))),
            Rule::depth_clause => {
                let n = self.count(inner.next().expect("depth"));
                ClauseKind::DelegationDepth(n.min(u32::MAX as u64) as u32)
            }
            Rule::allow_clause | Rule::forbid_clause => {
                let target = self.target(inner.next().expect("target"));
                let condition = inner.next().map(|w| self.where_clause(w));
                if rule == Rule::allow_clause {
                    ClauseKind::Allow { target, condition }
                } else {
                    ClauseKind::Forbid { target, condition }
                }
            }
            Rule::limit_clause | Rule::scope_clause => {
                let target = self.target(inner.next().expect("target"));
                let condition = self.expr(inner.next().expect("condition"));
                if rule == Rule::limit_clause {
                    ClauseKind::Limit { target, condition }
                } else {
                    ClauseKind::Scope { target, condition }
                }
            }
            Rule::gate_clause => {
                let approval = self.name(inner.next().expect("approval"));
                let target = self.target(inner.next().expect("target"));
                let (mut condition, mut on_missing) = (None, None);
                for part in inner {
                    match part.as_rule() {
                        Rule::where_clause => condition = Some(self.where_clause(part)),
                        _ => on_missing = Some(outcome(part.into_inner().next().expect("outcome"))),
                    }
                }
                ClauseKind::Gate { approval, target, condition, on_missing }
            }
            Rule::operation_clause => {
                ClauseKind::RequireOperationId { target: self.target(inner.next().expect("target")) }
            }
            Rule::budget_clause => {
                let name = self.name(inner.next().expect("budget name"));
                let max = self.count(inner.next().expect("budget max"));
                let target = self.target(inner.next().expect("target"));
                let window = match inner.next().and_then(|w| w.into_inner().next()).map(|w| w.as_rule()) {
                    Some(Rule::per_operation) => Window::PerOperation,
                    Some(Rule::per_hour) => Window::PerHour,
                    Some(Rule::per_day) => Window::PerDay,
                    _ => Window::InTotal,
                };
                ClauseKind::Budget { name, max, target, window }
            }
            Rule::fact_clause => {
                let name = self.name(inner.next().expect("fact name"));
                let version = inner.next().expect("fact version");
                let version = if version.as_rule() == Rule::string {
                    FactVersion::Text(self.string(version).0)
                } else {
                    FactVersion::Number(self.count(version))
                };
                let target = self.target(inner.next().expect("target"));
                let on_stale = inner.next().map_or(Outcome::Deny, |e| outcome(e.into_inner().next().expect("outcome")));
                ClauseKind::Fact { name, version, target, on_stale }
            }
            other => unreachable!("not a mandate clause: {other:?}"),
        };
        Clause { kind, span }
    }

    fn target(&mut self, pair: Pair<'_, Rule>) -> Target {
        let inner = pair.into_inner().next().expect("target body");
        match inner.as_rule() {
            Rule::any_tool => Target::AnyTool(self.span(&inner)),
            Rule::side_effect_tools => Target::SideEffects(self.span(&inner)),
            _ => Target::Named(self.tool_name(inner)),
        }
    }

    /// A tool name: an identifier, or a quoted string holding the name requests carry (its text unescaped, its
    /// span the whole literal).
    fn tool_name(&self, pair: Pair<'_, Rule>) -> Name {
        match pair.as_rule() {
            Rule::string => {
                let (text, span) = self.string(pair);
                Name { text, span }
            }
            _ => self.name(pair),
        }
    }

    fn where_clause(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let expr = pair.into_inner().find(|p| p.as_rule() == Rule::expr).expect("where condition");
        self.expr(expr)
    }

    fn expr(&mut self, pair: Pair<'_, Rule>) -> Expr {
        match pair.as_rule() {
            Rule::expr | Rule::conj => {
                let is_or = pair.as_rule() == Rule::expr;
                let mut items: Vec<Expr> = pair
                    .into_inner()
                    .filter(|p| !matches!(p.as_rule(), Rule::kw_and | Rule::kw_or))
                    .map(|p| self.expr(p))
                    .collect();
                if items.len() == 1 {
                    items.pop().expect("one item")
                } else if is_or {
                    Expr::Or(items)
                } else {
                    Expr::And(items)
                }
            }
            Rule::unary => self.expr(pair.into_inner().next().expect("unary body")),
            Rule::negation => {
                let span = self.span(&pair);
                let operand = pair.into_inner().find(|p| p.as_rule() != Rule::kw_not).expect("negated");
                Expr::Not(Box::new(self.expr(operand)), span)
            }
            Rule::comparison => self.comparison(pair),
            Rule::relation_atom => {
                let span = self.tight_span(&pair);
                let mut inner = pair.into_inner();
                let name = self.name(inner.next().expect("relation name"));
                let terms = inner.map(|term| self.term(term)).collect();
                Expr::Relation { name, terms, span }
            }
            other => unreachable!("not an expression: {other:?}"),
        }
    }

    fn comparison(&mut self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.tight_span(&pair);
        let mut inner = pair.into_inner();
        let attr = self.attribute(inner.next().expect("attribute"));
        let Some(mut op) = inner.next() else {
            return Expr::Truthy(attr);
        };
        if op.as_rule() == Rule::minus {
            let earlier = self.attribute(inner.next().expect("earlier"));
            let Some(cmp) = inner.next().filter(|p| p.as_rule() == Rule::cmp_op) else {
                self.errors.push(err::difference_without_comparison(span));
                return Expr::Truthy(attr);
            };
            let op = compare_op(cmp.as_str());
            let operand = self.operand(inner.next().expect("operand"));
            return Expr::Elapsed { later: attr, earlier, op, operand, span };
        }
        let _ = &mut op;
        match op.as_rule() {
            Rule::cmp_op => {
                let op = compare_op(op.as_str());
                let operand = self.operand(inner.next().expect("operand"));
                Expr::Compare { attr, op, operand, span }
            }
            Rule::in_op | Rule::not_in => {
                let negated = op.as_rule() == Rule::not_in;
                let right = inner.next().expect("list");
                if right.as_rule() == Rule::path {
                    Expr::InSet { attr, negated, set: self.attribute(right), span }
                } else if right.as_rule() == Rule::ident {
                    Expr::InCalendar { attr, negated, calendar: self.name(right), span }
                } else {
                    Expr::In { attr, negated, items: self.list(right), span }
                }
            }
            Rule::under_op => Expr::Under { attr, prefix: self.string(inner.next().expect("prefix")).0, span },
            Rule::contains_op => {
                let literal = inner.next().expect("item");
                let item = Operand { span: self.span(&literal), value: self.literal(literal) };
                Expr::Contains { attr, item, span }
            }
            Rule::within_op => Expr::Within { attr, items: self.list(inner.next().expect("list")), span },
            other => unreachable!("not an operator: {other:?}"),
        }
    }

    fn attribute(&mut self, pair: Pair<'_, Rule>) -> Attribute {
        let span = self.span(&pair);
        let mut inner = pair.into_inner();
        let root = inner.next().expect("attribute root").as_str().to_string();
        let field = inner.next().map(|p| p.as_str().to_string());
        Attribute { root, field, span }
    }

    fn list(&mut self, pair: Pair<'_, Rule>) -> Vec<Operand> {
        pair.into_inner().map(|p| self.operand(p)).collect()
    }

    fn operand(&mut self, pair: Pair<'_, Rule>) -> Operand {
        let span = self.span(&pair);
        let inner = pair.into_inner().next().expect("operand body");
        let value = match inner.as_rule() {
            Rule::literal => self.literal(inner),
            Rule::path => Literal::Path(self.attribute(inner)),
            _ => Literal::Ident(inner.as_str().to_string()),
        };
        Operand { value, span }
    }

    /// A relation atom's term: a string, another attribute, or a name (`principal`, `subject`, `resource`).
    fn term(&mut self, pair: Pair<'_, Rule>) -> Operand {
        let span = self.span(&pair);
        let inner = pair.into_inner().next().expect("term body");
        let value = match inner.as_rule() {
            Rule::string => Literal::String(self.string(inner).0),
            Rule::path => Literal::Path(self.attribute(inner)),
            _ => Literal::Ident(inner.as_str().to_string()),
        };
        Operand { value, span }
    }

    fn literal(&mut self, pair: Pair<'_, Rule>) -> Literal {
        let inner = pair.into_inner().next().expect("literal body");
        let span = self.span(&inner);
        let text = inner.as_str();
        match inner.as_rule() {
            Rule::string => Literal::String(self.string(inner).0),
            Rule::boolean => Literal::Bool(text == "true"),
            Rule::timestamp => Literal::Timestamp(self.timestamp(inner).0),
            Rule::duration => match parse_duration(text) {
                Some(d) => Literal::Duration(d),
                None => {
                    self.errors.push(err::bad_literal(span, "duration", text));
                    Literal::Duration(0)
                }
            },
            Rule::number => {
                if Decimal::parse(text).is_none() {
                    self.errors.push(err::bad_literal(span, "number", text));
                }
                Literal::Number(text.to_string())
            }
            Rule::money => {
                let mut parts = inner.into_inner();
                let amount = parts.next().expect("amount").as_str().to_string();
                let currency = parts.next().expect("currency").as_str().to_string();
                if Decimal::parse(&amount).is_none() {
                    self.errors.push(err::bad_literal(span, "money amount", text));
                }
                Literal::Money { amount, currency }
            }
            other => unreachable!("not a literal: {other:?}"),
        }
    }
}

fn compare_op(text: &str) -> CompareOp {
    match text {
        "==" => CompareOp::Eq,
        "!=" => CompareOp::Ne,
        "<" => CompareOp::Lt,
        "<=" => CompareOp::Le,
        ">" => CompareOp::Gt,
        _ => CompareOp::Ge,
    }
}

/// Monday 0 … Sunday 6.
fn weekday_index(name: &str) -> u8 {
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].iter().position(|d| *d == name).unwrap_or(0) as u8
}

/// `HH:MM` as minutes of the day (unchecked: the checker refuses what is not a time of day).
fn clock_minutes(text: &str) -> u16 {
    let (h, m) = text.split_once(':').unwrap_or(("0", "0"));
    h.parse::<u16>().unwrap_or(0) * 60 + m.parse::<u16>().unwrap_or(0)
}

/// `from data` / `from properties`.
fn source(pair: Pair<'_, Rule>) -> Source {
    match pair.into_inner().next().map(|p| p.as_rule()) {
        Some(Rule::source_properties) => Source::Properties,
        _ => Source::Data,
    }
}

/// A diagnostic for every character that is invisible or changes the direction of text (and NUL and the other
/// control characters but tab and line ends), anywhere in the file: in a string literal or a comment it would
/// make the policy read differently from what it does ("trojan source", CVE-2021-42574); elsewhere it is not
/// valid anyway, and a syntax error would echo it.
fn invisible_characters(file: FileId, text: &str) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let (mut in_string, mut in_comment, mut escaped) = (false, false, false);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(name) = invisible_name(c) {
            let place = if in_string {
                "a string literal"
            } else if in_comment {
                "a comment"
            } else {
                "the policy text"
            };
            found.push(err::invisible_character(Span::new(file, i, i + c.len_utf8()), c, name, place));
        }
        match c {
            '\n' => (in_string, in_comment) = (false, false),
            _ if in_comment => {}
            '\\' if in_string => {
                escaped = !escaped;
                continue;
            }
            '"' if !escaped => in_string = !in_string,
            '/' if !in_string && chars.peek().is_some_and(|&(_, n)| n == '/') => in_comment = true,
            _ => {}
        }
        escaped = false;
    }
    found
}

/// The name of a character [`invisible_characters`] refuses (`None`: a visible character, tab or line end).
pub fn invisible_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\t' | '\n' | '\r' => return None,
        '\0' => "null",
        '\u{1}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => "control character",
        '\u{202a}' => "left-to-right embedding",
        '\u{202b}' => "right-to-left embedding",
        '\u{202c}' => "pop directional formatting",
        '\u{202d}' => "left-to-right override",
        '\u{202e}' => "right-to-left override",
        '\u{2066}' => "left-to-right isolate",
        '\u{2067}' => "right-to-left isolate",
        '\u{2068}' => "first strong isolate",
        '\u{2069}' => "pop directional isolate",
        '\u{200e}' => "left-to-right mark",
        '\u{200f}' => "right-to-left mark",
        '\u{061c}' => "arabic letter mark",
        '\u{200b}' => "zero width space",
        '\u{200c}' => "zero width non-joiner",
        '\u{200d}' => "zero width joiner",
        '\u{2060}'..='\u{2064}' => "invisible operator or word joiner",
        '\u{feff}' => "zero width no-break space (byte order mark)",
        '\u{2028}' => "line separator",
        '\u{2029}' => "paragraph separator",
        '\u{ad}' => "soft hyphen",
        _ => return None,
    })
}

/// The byte offset of the first `(`, `not` or `set<` that nests deeper than [`MAX_NESTING`], found by a scan of
/// the tokens (strings and comments skipped) before pest, which recurses once per level, sees the text.
///
/// A `(` (or `set<`) opens a level that its `)` (or `>`) closes; a run of `not`s opens one level each, closed
/// when the operand they negate begins (a comparison) or, if the operand is parenthesised, with it.
fn too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    // Each open `(` or `set<` with the number of `not`s right before it; `nots` counts the current run.
    let mut open: Vec<(bool, usize)> = Vec::new(); // (is a set type, nots before it)
    let (mut depth, mut nots, mut i) = (0usize, 0usize, 0usize);
    let mut after_set = false;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                i += 1;
                while i < bytes.len() && !matches!(bytes[i], b'"' | b'\n') {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                (nots, after_set) = (0, false);
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' | b'<' if b == b'(' || after_set => {
                open.push((b == b'<', nots));
                depth += 1 + nots;
                (nots, after_set) = (0, false);
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b'>' => {
                if let Some(&(true, before)) = open.last() {
                    open.pop();
                    depth -= 1 + before;
                }
                (nots, after_set) = (0, false);
            }
            b')' => {
                // Also closes a `set<` left open by a `>` that was missing (the parser will say so).
                while let Some((set, before)) = open.pop() {
                    depth -= 1 + before;
                    if !set {
                        break;
                    }
                }
                (nots, after_set) = (0, false);
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &text[start..i];
                after_set = word == "set";
                // `not in` is an operator, not a negation.
                let rest = text[i..].trim_start();
                let operator =
                    rest.starts_with("in") && !rest[2..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
                if word == "not" && !operator {
                    nots += 1;
                    if depth + nots > MAX_NESTING {
                        return Some(start);
                    }
                } else {
                    nots = 0;
                }
                continue;
            }
            b if b.is_ascii_whitespace() => {}
            _ => (nots, after_set) = (0, false),
        }
        i += 1;
    }
    None
}

/// The length of `text` up to the end of its last character that is neither whitespace nor in a comment.
fn significant_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut i, mut end) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                end = i.min(bytes.len());
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b if b.is_ascii_whitespace() => i += 1,
            _ => {
                i += 1;
                end = i;
            }
        }
    }
    end
}

fn outcome(pair: Pair<'_, Rule>) -> Outcome {
    if pair.as_str() == "escalate" {
        Outcome::Escalate
    } else {
        Outcome::Deny
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<(&'static str, u32)> {
        parse_file(0, text).err().unwrap_or_default().iter().map(|d| (d.code, d.labels[0].span.start)).collect()
    }

    #[test]
    fn invisible_characters_are_refused_in_strings_comments_and_elsewhere() {
        for c in ['\0', '\u{1b}', '\u{7f}', '\u{85}', '\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}', '\u{2028}'] {
            let string = format!("tool t(a: string)\nmandate m for \"o{c}\" {{}}\n");
            assert_eq!(codes(&string), [("remit::invisible-character", 34)], "{c:?} in a string");
            let comment = format!("// a {c}\ntool t(a: string)\n");
            assert_eq!(codes(&comment), [("remit::invisible-character", 5)], "{c:?} in a comment");
            let elsewhere = format!("tool t(a:{c} string)\n");
            assert_eq!(codes(&elsewhere), [("remit::invisible-character", 9)], "{c:?} between tokens");
        }
        // Tabs, line ends, escapes and visible non-ASCII text stay valid.
        let fine = "tool t(a: string)\r\n\t// café, 東京, \"quoted\"\nmandate m for \"o\\\"é\\\\\" {}\n";
        assert_eq!(codes(fine), []);
    }
}
