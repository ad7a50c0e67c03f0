//! Declarations about the world outside the request's own fields: the attributes of subjects, resources and the
//! mandates' principals (`subject user { … }`, `resource todo { … }`, `principal customer { … }`) and relations (`relation member_of(string, string)`). Conditions
//! read them (`conditions.rs`); where their values come from is the gateway's business (`from data` /
//! `from properties`), the module only reads the request.

use std::collections::{BTreeMap, HashMap};

use super::{err, Checker};
use crate::ir::{self, EntityAttribute, Type};
use crate::source::Span;
use crate::syntax::ast::{self, Decl, EntityRole};
use crate::time;

/// What the declarations say, gathered before any condition is checked.
#[derive(Debug, Clone, Default)]
pub(super) struct World {
    pub entities: Vec<ir::EntityType>,
    pub subject_attributes: BTreeMap<String, EntityAttribute>,
    pub resource_attributes: BTreeMap<String, EntityAttribute>,
    pub principal_attributes: BTreeMap<String, EntityAttribute>,
    pub relations: BTreeMap<String, ir::Relation>,
    pub calendars: BTreeMap<String, ir::CalendarDef>,
}

/// Attribute names a request already uses for its own fields (`subject.id`, `subject.scopes`, `resource.id`) or that
/// AuthZEN reserves (`type`, `properties`).
const RESERVED: [&str; 4] = ["id", "scopes", "type", "properties"];

impl Checker<'_> {
    /// Collects and checks every `subject`, `resource` and `relation` declaration.
    pub(super) fn world(&mut self, decls: &[Decl]) {
        let mut seen_types: HashMap<(EntityRole, String), Span> = HashMap::new();
        // Where each attribute name was first declared, with its type: one name has one type.
        let mut first: HashMap<(EntityRole, String), (Type, Span)> = HashMap::new();
        // The principal type: a mandate's principal is one entity, so a policy declares one type of them.
        let mut principal_type: Option<(String, Span)> = None;
        for decl in decls {
            let Decl::Entity(e) = decl else { continue };
            let key = (e.role, e.name.text.clone());
            if let Some(previous) = seen_types.insert(key, e.name.span) {
                let what = format!("{} type", e.role.keyword());
                self.error(err::duplicate_definition(&what, &e.name.text, e.name.span, previous));
                continue;
            }
            if e.role == EntityRole::Principal {
                if let Some((other, at)) = &principal_type {
                    self.error(err::second_principal_type(&e.name.text, e.name.span, other, *at));
                    continue;
                }
                principal_type = Some((e.name.text.clone(), e.name.span));
            }
            let mut attributes = Vec::new();
            let mut names: HashMap<&str, Span> = HashMap::new();
            for attr in &e.attributes {
                let name = attr.name.text.as_str();
                if let Some(previous) = names.insert(name, attr.name.span) {
                    self.error(err::duplicate_definition("attribute", name, attr.name.span, previous));
                    continue;
                }
                if RESERVED.contains(&name) {
                    self.error(err::reserved_attribute(e.role.keyword(), name, attr.name.span));
                    continue;
                }
                // The enforcement point does not know the mandate's principal, and the agent is never a source:
                // only the gateway's data sets say what a principal is.
                if let (EntityRole::Principal, ast::Source::Properties) = (e.role, attr.source) {
                    let span = attr.source_span.unwrap_or(attr.name.span);
                    self.error(err::principal_from_properties(name, span));
                    continue;
                }
                let Some(ty) = self.resolve_type(&attr.ty) else { continue };
                let signed = match attr.signed {
                    Some(span) if ty != Type::Money && ty != Type::Set(Box::new(Type::Money)) => {
                        self.error(err::signed_not_money("attribute", name, &ty.display(), span));
                        continue;
                    }
                    Some(_) => true,
                    None => false,
                };
                match first.get(&(e.role, name.to_string())) {
                    Some((other, at)) if *other != ty => {
                        let d =
                            err::conflicting_attribute_type(e.role.keyword(), name, &ty, attr.name.span, other, *at);
                        self.error(d);
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        first.insert((e.role, name.to_string()), (ty.clone(), attr.name.span));
                    }
                }
                let map = match e.role {
                    EntityRole::Subject => &mut self.world.subject_attributes,
                    EntityRole::Resource => &mut self.world.resource_attributes,
                    EntityRole::Principal => &mut self.world.principal_attributes,
                };
                let entry = map.entry(name.to_string()).or_insert_with(|| EntityAttribute {
                    ty: ty.clone(),
                    signed,
                    source: attr.source,
                    types: Vec::new(),
                });
                // Signed anywhere is signed: a value that is valid for one type of resource stays readable.
                entry.signed |= signed;
                entry.types.push(e.name.text.clone());
                entry.types.sort();
                attributes.push((name.to_string(), ty, attr.source));
            }
            self.world.entities.push(ir::EntityType {
                role: e.role,
                name: e.name.text.clone(),
                attributes,
                span: e.name.span,
            });
        }
        self.world.entities.sort_by(|a, b| (a.role, &a.name).cmp(&(b.role, &b.name)));
        for decl in decls {
            let Decl::Relation(r) = decl else { continue };
            if let Some(previous) = self.world.relations.get(&r.name.text) {
                let previous = previous.span;
                self.error(err::duplicate_definition("relation", &r.name.text, r.name.span, previous));
                continue;
            }
            let mut params = Vec::new();
            for ty in &r.params {
                let Some(resolved) = self.resolve_type(ty) else { continue };
                if !resolved.is_textual() {
                    self.error(err::relation_parameter(&r.name.text, &resolved.display(), ty.span()));
                    continue;
                }
                params.push(resolved);
            }
            if params.len() != r.params.len() {
                continue;
            }
            self.world.relations.insert(
                r.name.text.clone(),
                ir::Relation { name: r.name.text.clone(), params, source: r.source, span: r.name.span },
            );
        }
        for decl in decls {
            let Decl::Calendar(c) = decl else { continue };
            if let Some(previous) = self.world.calendars.get(&c.name.text) {
                let previous = previous.span;
                self.error(err::duplicate_definition("calendar", &c.name.text, c.name.span, previous));
                continue;
            }
            let (zone, zone_span) = (&c.zone.0, c.zone.1);
            // The zone over the default window; `Checker::calendar_windows` cuts it to the mandates that read it.
            let table = match time::ZoneTable::new(zone, None, None) {
                Ok(table) => table,
                Err(e) => {
                    self.error(err::unknown_zone(&e.to_string(), e.help(), zone_span));
                    continue;
                }
            };
            let mut calendar = time::Calendar::new(zone, c.closed_on_holidays);
            let mut ok = true;
            for hours in &c.hours {
                for &(start, end, span) in &hours.times {
                    for &day in &hours.days {
                        let weekday = time::Weekday::from_index(day).expect("the parser gives 0..7");
                        if let Err(e) = calendar.add(weekday, start, end) {
                            self.error(err::calendar_hours(&e.to_string(), span));
                            ok = false;
                            break;
                        }
                    }
                }
            }
            for dated in &c.dated {
                for range in &dated.dates {
                    let Some((first, last)) = self.calendar_dates(range) else {
                        ok = false;
                        continue;
                    };
                    for &(start, end, span) in &dated.times {
                        if let Err(e) = calendar.add_dated(first, last, start, end) {
                            self.error(err::calendar_hours(&e.to_string(), span));
                            ok = false;
                            break;
                        }
                    }
                }
            }
            for range in &c.closed {
                match self.calendar_dates(range) {
                    Some((first, last)) => calendar.close(first, last).expect("checked by calendar_dates"),
                    None => ok = false,
                }
            }
            if ok {
                let def = ir::CalendarDef { name: c.name.text.clone(), calendar, table, span: c.name.span };
                self.world.calendars.insert(c.name.text.clone(), def);
            }
        }
    }

    /// The local dates a calendar line writes (`2026-12-24`, `2026-12-27..2027-01-03`), or `None` after saying
    /// what is wrong: a text that is not a date, or a range that ends before it starts.
    fn calendar_dates(
        &mut self,
        range: &crate::syntax::ast::DateRangeText,
    ) -> Option<(time::LocalDate, time::LocalDate)> {
        let mut parsed = Vec::with_capacity(2);
        for text in std::iter::once(&range.first).chain(range.last.as_ref()) {
            let Some(date) = time::LocalDate::parse(text) else {
                self.error(err::calendar_date(&format!("`{text}` is not a date"), "no such day", range.span));
                return None;
            };
            parsed.push(date);
        }
        let (first, last) = (parsed[0], *parsed.last().expect("a date"));
        // An empty calendar reports what `add_dated` and `close` would refuse, for the range alone.
        if let Err(e) = time::Calendar::new("", false).close(first, last) {
            self.error(err::calendar_date(&e.to_string(), "not a range of dates", range.span));
            return None;
        }
        Some((first, last))
    }

    /// Cuts each calendar's zone table to the instants the mandates that read it can be asked about: from the
    /// earliest `valid from` to the latest end of their chains, open where one of them is open (then the default
    /// window, 1970 to 2100). An instant outside the table is unevaluable: the decision fails closed.
    pub(super) fn calendar_windows(&mut self, mandates: &[ir::Mandate], chain_of: impl Fn(usize) -> Vec<usize>) {
        let mut windows: BTreeMap<String, (Option<i64>, Option<i64>, bool)> = BTreeMap::new();
        for (id, mandate) in mandates.iter().enumerate() {
            let chain = chain_of(id);
            let from = chain.iter().filter_map(|&m| mandates[m].valid_from).max();
            let until = chain.iter().filter_map(|&m| mandates[m].valid_until).min();
            for rule in &mandate.rules {
                calendars_read(&rule.condition, &mut |name| {
                    let entry = windows.entry(name.to_string()).or_insert((from, until, false));
                    if entry.2 {
                        entry.0 = match (entry.0, from) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            _ => None,
                        };
                        entry.1 = match (entry.1, until) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            _ => None,
                        };
                    }
                    entry.2 = true;
                });
            }
        }
        for (name, (from, until, _)) in windows {
            if let Some(def) = self.world.calendars.get_mut(&name) {
                if let Ok(table) = time::ZoneTable::new(def.calendar.zone(), from, until) {
                    def.table = table;
                }
            }
        }
    }
}

/// Calls `found` with the name of every calendar `cond` reads.
fn calendars_read(cond: &ir::Cond, found: &mut impl FnMut(&str)) {
    match cond {
        ir::Cond::True | ir::Cond::False => {}
        ir::Cond::Atom(atom) => {
            for attr in atom.attr.reads() {
                if let ir::Attr::InCalendar(name, _) = attr {
                    found(name);
                }
            }
        }
        ir::Cond::And(items) | ir::Cond::Or(items) => items.iter().for_each(|c| calendars_read(c, found)),
    }
}
