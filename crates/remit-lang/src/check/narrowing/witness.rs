//! Counterexamples: a model of the solver written as a request (docs/requests.md), and its confirmation by the
//! reference interpreter. Nothing is shown as a witness unless the interpreter agrees with it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value as Json};

use super::formula::{Model, Var, VarId, Vars};
use crate::eval::{argument_digest, decide, Decision, Outcome};
use crate::ir::{Attr, Binding, MandateId, Program, Type, Value};
use crate::syntax::ast::CompareOp;
use crate::value::{format_instant, NANOS_PER_SECOND};

/// What the request is about, besides the model.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    /// The program whose declarations give the types of the attributes the model leaves open.
    pub program: &'a Program,
    pub tool: &'a str,
    pub mandate: &'a str,
}

/// The currencies literals compare each currency variable with (a fresh one must differ from all of them).
pub type Currencies = BTreeMap<VarId, BTreeSet<String>>;

/// Writes the model as a request: what the model says is present appears, and, when `fill` is set, every other
/// argument the tool declares, with a value of its type (no rule reads it, so it changes nothing but the
/// argument digest, which is computed from the request as written).
pub fn request(model: &Model, vars: &Vars, shape: Shape<'_>, currencies: &Currencies, fill: bool) -> Json {
    request_with(model, vars, shape, currencies, fill, &BTreeMap::new()).0
}

/// [`request`] for a template's symbolic instance: also the values of its parameters (`params`, with their types),
/// in the request encoding of their types, chosen with the request so that the interpreter computes every
/// comparison and membership of a parameter as the model has it.
pub fn request_with(
    model: &Model,
    vars: &Vars,
    shape: Shape<'_>,
    currencies: &Currencies,
    fill: bool,
    params: &BTreeMap<String, Type>,
) -> (Json, Map<String, Json>) {
    let bool_of = |id: VarId| matches!(model.get(id as usize), Some(Value::Bool(true)));
    let find = |wanted: &Var| vars.iter().find(|(_, v)| *v == wanted).map(|(id, _)| id);
    let present = |attr: &Attr| find(&Var::Present(attr.clone())).is_some_and(bool_of);
    // The value variable of an attribute and its type (the first one when two versions typed it differently); a
    // term of the theory of equality has the value its class was given, whether or not a variable stands for it.
    let value_of = |attr: &Attr| -> Option<(Value, Type)> {
        if let Some(term) = model.terms.get(attr) {
            return Some(term.clone());
        }
        vars.iter().find_map(|(id, v)| match v {
            Var::Value(a, ty) if a == attr => model.get(id as usize).map(|value| (value.clone(), ty.clone())),
            _ => None,
        })
    };
    let program = shape.program;
    let currency_of = |attr: &Attr| -> String {
        if let Some(code) = model.currencies.get(attr) {
            return code.clone();
        }
        let Some(id) = find(&Var::Currency(attr.clone())) else { return "USD".into() };
        let mentioned = currencies.get(&id).cloned().unwrap_or_default();
        match model.get(id as usize) {
            Some(Value::String(code)) if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) => {
                code.clone()
            }
            // A currency no literal mentions: any other valid code behaves the same.
            _ => ["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK"]
                .iter()
                .find(|c| !mentioned.contains(**c))
                .map_or("XTS".to_string(), |c| c.to_string()),
        }
    };
    let levels = &program.levels;
    let attribute = |attr: &Attr, declared: Option<&Type>| -> Json {
        let (value, ty) = match value_of(attr) {
            Some(found) => found,
            None => {
                let ty = declared.cloned().unwrap_or(Type::String);
                let value = crate::check::sat::domain_model(&ty, &[], levels.len()).unwrap_or(Value::Bool(false));
                (value, ty)
            }
        };
        encode(&value, &ty, levels, &currency_of(attr))
    };

    let tool = program.tool(shape.tool).map(|t| &program.tools[t]);
    let mut arguments = Map::new();
    let mut attributes = Map::new();
    let mut scopes: Option<Json> = None;
    let mut resource: Option<Json> = None;
    let mut attempt: Option<Json> = None;
    let mut subject_properties = Map::new();
    let mut resource_properties = Map::new();
    let mut principal_properties = Map::new();
    let mut relations: Vec<(String, Vec<crate::ir::Term>, bool)> = Vec::new();
    let mut param_values = Map::new();
    for (name, ty) in params {
        param_values.insert(name.clone(), attribute(&key_attr(name), Some(ty)));
    }
    for (_, var) in vars.iter() {
        let Var::Present(attr) = var else { continue };
        if !present(attr) {
            continue;
        }
        match attr {
            Attr::Arg(name) => {
                let declared = tool.and_then(|t| t.param(name));
                // A closed tool refuses an argument it does not declare: no witness carries one.
                if declared.is_some() || tool.is_some_and(|t| t.open_arguments) {
                    arguments.insert(name.clone(), attribute(attr, declared));
                }
            }
            Attr::Context(name) => {
                attributes.insert(name.clone(), attribute(attr, program.contexts.get(name)));
            }
            Attr::ResourceId => resource = Some(attribute(attr, Some(&Type::String))),
            Attr::SubjectScopes => scopes = Some(attribute(attr, Some(&Type::Set(Box::new(Type::String))))),
            Attr::Attempt => attempt = Some(attribute(attr, Some(&Type::Int))),
            Attr::Subject(name) => {
                let declared = program.subject_attributes.get(name).map(|a| &a.ty);
                subject_properties.insert(name.clone(), attribute(attr, declared));
            }
            Attr::Resource(name) => {
                let declared = program.resource_attributes.get(name).map(|a| &a.ty);
                resource_properties.insert(name.clone(), attribute(attr, declared));
            }
            Attr::Principal(name) => {
                let declared = program.principal_attributes.get(name).map(|a| &a.ty);
                principal_properties.insert(name.clone(), attribute(attr, declared));
            }
            Attr::Relation(name, terms) => {
                let holds = matches!(value_of(attr), Some((Value::Bool(true), _)));
                relations.push((name.clone(), terms.clone(), holds));
            }
            // The solver treats a comparison of two attributes as a bool of its own; its operands carry the values
            // (a model that disagrees with them is not confirmed, so it is never shown).
            Attr::Now
            | Attr::SubjectId
            | Attr::Level
            | Attr::Compare(..)
            | Attr::Member(..)
            | Attr::InCalendar(..)
            | Attr::Elapsed(..) => {}
            // A template's parameter is no part of a request (no mandate reads one), nor is its parent instance's.
            Attr::Param(_) | Attr::ParentParam(_) => {}
        }
    }
    let model_now = match value_of(&Attr::Now) {
        Some((Value::Timestamp(t), _)) => t,
        _ => 1_767_225_600 * NANOS_PER_SECOND,
    };
    let mut now_override: Option<i128> = None;
    let mut holidays = Map::new();
    // A comparison or membership of two attributes is a bool of its own to the solver: write its operands so that
    // the interpreter computes the bool the model chose (the left operand as the model has it, the right one
    // picked to agree). The interpreter confirms the result; a pick that cannot agree is never shown.
    {
        let mut slots = Slots {
            arguments: &mut arguments,
            attributes: &mut attributes,
            subject: &mut subject_properties,
            resource: &mut resource_properties,
            principal: &mut principal_properties,
            resource_id: &mut resource,
            params: &mut param_values,
        };
        let mut calendar_wants: Vec<(Attr, String, bool)> = Vec::new();
        let mut set_wants: BTreeMap<Attr, Vec<Json>> = BTreeMap::new();
        let mut unwanted: BTreeMap<Attr, Vec<Json>> = BTreeMap::new();
        for (_, var) in vars.iter() {
            let Var::Present(attr) = var else { continue };
            if !present(attr) {
                continue;
            }
            let wanted = matches!(value_of(attr), Some((Value::Bool(true), _)));
            match attr {
                Attr::Compare(left, op, right, ty) => {
                    // Keep what the model decided: set the operand it leaves free (both decided: keep both).
                    let (left_fixed, right_fixed) = (value_of(left).is_some(), value_of(right).is_some());
                    if left_fixed && right_fixed {
                        continue;
                    }
                    if right_fixed {
                        let Some(right_json) = slots.get(right) else { continue };
                        if let Some(left_json) = agreeing(&right_json, ty, op.swapped(), wanted, levels) {
                            slots.set(left, left_json);
                        }
                        continue;
                    }
                    let Some(mut left_json) = slots.get(left) else { continue };
                    let Some(mut right_json) = agreeing(&left_json, ty, *op, wanted, levels) else { continue };
                    // Below zero, money is mistyped: raise the left operand instead of lowering the right one.
                    let negative =
                        |j: &Json| j.as_str().and_then(crate::value::Money::parse).is_some_and(|m| m.amount.0 < 0);
                    if *ty == Type::Money && negative(&right_json) {
                        if let Some(raised) = agreeing(&left_json, ty, CompareOp::Lt, true, levels) {
                            right_json = left_json;
                            left_json = raised;
                            slots.set(left, left_json);
                        }
                    }
                    slots.set(right, right_json);
                }
                // Gathered per set and written below: the items wanted in it, and no other.
                Attr::Member(item, set, _) => {
                    if let Some(item_json) = slots.get(item) {
                        let elements = set_wants.entry((**set).clone()).or_default();
                        if wanted && !elements.contains(&item_json) {
                            elements.push(item_json);
                        } else if !wanted {
                            unwanted.entry((**set).clone()).or_default().push(item_json);
                        }
                    }
                }
                // `t in CALENDAR`: gathered per instant and placed below, so that an instant two calendars ask about
                // is searched for once, against both.
                Attr::InCalendar(name, instant) => {
                    let Some(def) = program.calendars.get(name) else { continue };
                    calendar_wants.push(((**instant).clone(), name.clone(), wanted));
                    if def.calendar.closed_on_holidays() {
                        holidays.insert(name.clone(), json!([]));
                    }
                }
                // `later - earlier OP d`: the earlier instant placed d (a second more or less) before the later.
                Attr::Elapsed(later, earlier, op, seconds) => {
                    // Both instants given values by the theory's difference constraints: they agree already.
                    if model.terms.contains_key(later) && model.terms.contains_key(earlier) {
                        continue;
                    }
                    let Some(at) = slots.get(later).and_then(|j| j.as_str().and_then(crate::value::parse_instant))
                    else {
                        continue;
                    };
                    let between = match agreeing(&json!(0), &Type::Int, *op, wanted, levels) {
                        // The right operand (here 0) must be above the left: the elapsed time is below `d`.
                        Some(j) if j.as_i64() == Some(1) => seconds - 1,
                        Some(j) if j.as_i64() == Some(-1) => seconds + 1,
                        _ => *seconds,
                    };
                    slots.set(earlier, json!(format_instant(at - i128::from(between) * NANOS_PER_SECOND)));
                }
                _ => {}
            }
        }
        for (set, mut elements) in set_wants {
            // A parameter's set keeps what its bounds chose (`contains`), less the items the model keeps out.
            if let (Attr::Param(_) | Attr::ParentParam(_), Some(Json::Array(chosen))) = (&set, slots.get(&set)) {
                let out = unwanted.get(&set).cloned().unwrap_or_default();
                for item in chosen {
                    if !elements.contains(&item) && !out.contains(&item) {
                        elements.push(item);
                    }
                }
            }
            slots.set(&set, Json::Array(elements));
        }
        // Each instant a calendar atom reads: the first candidate that every calendar asking about it answers as the
        // model chose, without holidays (an empty list where a calendar needs one).
        let instants: BTreeSet<Attr> = calendar_wants.iter().map(|(instant, _, _)| instant.clone()).collect();
        for instant in instants {
            let wants: Vec<(&crate::ir::CalendarDef, bool)> = calendar_wants
                .iter()
                .filter(|(at, _, _)| *at == instant)
                .filter_map(|(_, name, wanted)| Some((program.calendars.get(name)?, *wanted)))
                .collect();
            let start = match slots.get(&instant).and_then(|j| j.as_str().and_then(crate::value::parse_instant)) {
                Some(t) if instant != Attr::Now => t,
                _ => model_now,
            };
            let defs: Vec<&crate::ir::CalendarDef> = wants.iter().map(|(def, _)| *def).collect();
            let found = calendar_candidates(start, &defs).find(|&t| {
                wants.iter().all(|(def, wanted)| def.calendar.contains(&def.table, t, Some(&[])) == Ok(*wanted))
            });
            // Else an instant a calendar closed on holidays refuses because the request lists its date as one (the
            // holidays are data: any date may be listed), the others answering as wanted without holidays.
            let found = found.map(|t| (t, Vec::new())).or_else(|| {
                calendar_candidates(start, &defs).find_map(|t| {
                    let mut listed = Vec::new();
                    for (def, wanted) in &wants {
                        if def.calendar.contains(&def.table, t, Some(&[])) == Ok(*wanted) {
                            continue;
                        }
                        let date = def.table.local_parts(t)?.date;
                        let refused = def.calendar.contains(&def.table, t, Some(&[date])) == Ok(false);
                        if *wanted || !def.calendar.closed_on_holidays() || !refused {
                            return None;
                        }
                        listed.push((def.name.clone(), date.to_string()));
                    }
                    Some((t, listed))
                })
            });
            if let Some((t, listed)) = found {
                for (name, date) in listed {
                    holidays.insert(name, json!([date]));
                }
                if instant == Attr::Now {
                    now_override = Some(t);
                } else {
                    slots.set(&instant, json!(format_instant(t)));
                }
            }
        }
    }
    if let (true, Some(tool)) = (fill, tool) {
        // In the order the tool declares them, then any undeclared one an open tool was given.
        let mut ordered = Map::new();
        for (name, ty) in &tool.params {
            let attr = Attr::Arg(name.clone());
            if let Some(value) = arguments.remove(name) {
                ordered.insert(name.clone(), value);
            } else if find(&Var::Present(attr.clone())).is_none() {
                ordered.insert(name.clone(), attribute(&attr, Some(ty)));
            }
        }
        ordered.append(&mut arguments);
        arguments = ordered;
    }
    let now = now_override.unwrap_or(model_now);
    let subject = match value_of(&Attr::SubjectId) {
        _ if params.contains_key("holder") => {
            param_values.get("holder").and_then(Json::as_str).unwrap_or_default().to_string()
        }
        Some((Value::String(s), _)) => s,
        _ => program
            .mandate(shape.mandate)
            .and_then(|m| {
                let m = &program.mandates[m];
                m.holders.first().cloned().or_else(|| m.holder_prefixes.first().map(|p| format!("{p}agent")))
            })
            .unwrap_or_default(),
    };

    let mut subject_json = json!({ "id": subject });
    if let Some(scopes) = scopes {
        subject_json["credential"] = json!({ "id": "witness-credential", "scopes": scopes });
    }
    let mut context = Map::new();
    context.insert("mandate".into(), json!(shape.mandate));
    context.insert("now".into(), json!(format_instant(now)));
    if find(&Var::OperationId).is_some_and(bool_of) {
        context.insert("operation_id".into(), json!("op-witness"));
    }
    if let Some(attempt) = attempt {
        context.insert("attempt".into(), attempt);
    }
    let arguments_json = Json::Object(arguments.clone());
    let mut approvals = Vec::new();
    let mut facts = Map::new();
    let mut counters = Map::new();
    for (id, var) in vars.iter() {
        match var {
            Var::Approval(kind) if bool_of(id) => {
                let age = match find(&Var::ApprovalAge(kind.clone())).and_then(|a| model.get(a as usize)) {
                    Some(Value::Duration(d)) => *d,
                    _ => 0,
                };
                let mandate = match find(&Var::ApprovalMandate(kind.clone())).and_then(|a| model.get(a as usize)) {
                    Some(Value::String(m)) => m.clone(),
                    _ => shape.mandate.to_string(),
                };
                // A binding no side constrains is written matching, as a real approval would be.
                let bound = |b: Binding| find(&Var::ApprovalBound(kind.clone(), b)).is_none_or(bool_of);
                let mut approval = json!({
                    "id": format!("witness-{kind}"),
                    "kind": kind,
                    "mandate": mandate,
                    "issued_at": format_instant(now.saturating_sub(i128::from(age) * NANOS_PER_SECOND)),
                    "expires_at": format_instant(now.saturating_add(3600 * NANOS_PER_SECOND)),
                });
                if let Some(Value::String(by)) =
                    find(&Var::ApprovalBy(kind.clone())).and_then(|a| model.get(a as usize))
                {
                    // The principal of a chain of templates' symbolic instances: the instance's principal.
                    let by = match param_values.get("principal") {
                        Some(principal) if by == INSTANCE_PRINCIPAL => principal.clone(),
                        _ => json!(by),
                    };
                    approval["approved_by"] = by;
                }
                let tool_name =
                    if bound(Binding::Tool) { shape.tool.to_string() } else { format!("not-{}", shape.tool) };
                approval["tool"] = json!(tool_name);
                if let Some(Json::String(target)) = &resource {
                    let target = if bound(Binding::Target) { target.clone() } else { format!("not-{target}") };
                    approval["target"] = json!(target);
                }
                let digest = argument_digest(shape.tool, &arguments_json);
                approval["digest"] = json!(if bound(Binding::Arguments) { digest } else { "sha256:0".into() });
                if let Some(Json::String(manifest)) = arguments.get("manifest") {
                    let manifest = if bound(Binding::Manifest) { manifest.clone() } else { format!("not-{manifest}") };
                    approval["manifest"] = json!(manifest);
                }
                approvals.push(approval);
            }
            Var::FactPresent(name) if bool_of(id) => {
                let text = find(&Var::FactIsText(name.clone())).is_some_and(bool_of);
                let fact = if text {
                    let value = find(&Var::FactText(name.clone())).and_then(|f| model.get(f as usize)).cloned();
                    encode(&value.unwrap_or(Value::String(String::new())), &Type::String, levels, "")
                } else {
                    let value = find(&Var::Fact(name.clone())).and_then(|f| model.get(f as usize)).cloned();
                    encode(&value.unwrap_or(int(0)), &Type::Int, levels, "")
                };
                facts.insert(name.clone(), fact);
            }
            Var::CounterPresent(name) if bool_of(id) => {
                let value = find(&Var::Counter(name.clone())).and_then(|c| model.get(c as usize)).cloned();
                counters.insert(name.clone(), encode(&value.unwrap_or(int(0)), &Type::Int, levels, ""));
            }
            _ => {}
        }
    }
    if !approvals.is_empty() {
        context.insert("approvals".into(), Json::Array(approvals));
    }
    if !facts.is_empty() {
        context.insert("facts".into(), Json::Object(facts));
    }
    if !counters.is_empty() {
        context.insert("counters".into(), Json::Object(counters));
    }
    if !attributes.is_empty() {
        context.insert("attributes".into(), Json::Object(attributes));
    }
    if !holidays.is_empty() {
        context.insert("holidays".into(), Json::Object(holidays));
    }
    // The principal's attributes, under the principal of the witness's mandate (as the gateway fills them).
    let principal = program.mandate(shape.mandate).map(|m| program.mandates[m].principal.clone()).unwrap_or_default();
    if !principal_properties.is_empty() {
        let mut principals = Map::new();
        principals.insert(principal, Json::Object(principal_properties.clone()));
        context.insert("principals".into(), Json::Object(principals));
    }
    // Each relation atom the model decides, as the tuple of its terms' values in this request.
    let mut listed: Map<String, Json> = Map::new();
    for (name, terms, holds) in relations {
        let term_value = |term: &crate::ir::Term| -> Json {
            match term {
                crate::ir::Term::Value(text) => json!(text),
                crate::ir::Term::Attr(Attr::SubjectId) => json!(subject),
                crate::ir::Term::Attr(Attr::ResourceId) => resource.clone().unwrap_or(Json::Null),
                crate::ir::Term::Attr(Attr::Arg(arg)) => arguments.get(arg).cloned().unwrap_or(Json::Null),
                crate::ir::Term::Attr(Attr::Context(c)) => {
                    context.get("attributes").and_then(|a| a.get(c)).cloned().unwrap_or(Json::Null)
                }
                crate::ir::Term::Attr(Attr::Subject(a)) => subject_properties.get(a).cloned().unwrap_or(Json::Null),
                crate::ir::Term::Attr(Attr::Resource(a)) => resource_properties.get(a).cloned().unwrap_or(Json::Null),
                crate::ir::Term::Attr(Attr::Principal(a)) => principal_properties.get(a).cloned().unwrap_or(Json::Null),
                crate::ir::Term::Attr(_) => Json::Null,
            }
        };
        let args: Vec<Json> = terms.iter().map(term_value).collect();
        let entry = json!({ "args": args, "holds": holds });
        match listed.entry(name).or_insert_with(|| json!([])) {
            Json::Array(items) => items.push(entry),
            _ => unreachable!("inserted as an array"),
        }
    }
    if !listed.is_empty() {
        context.insert("relations".into(), Json::Object(listed));
    }
    if !subject_properties.is_empty() {
        subject_json["properties"] = Json::Object(subject_properties);
    }
    let mut request = json!({
        "subject": subject_json,
        "action": { "name": shape.tool, "arguments": arguments_json },
    });
    if let Some(resource) = resource {
        request["resource"] = json!({ "id": resource });
    }
    if !resource_properties.is_empty() {
        if request.get("resource").is_none() {
            request["resource"] = json!({});
        }
        request["resource"]["properties"] = Json::Object(resource_properties);
    }
    request["context"] = Json::Object(context);
    (request, param_values)
}

/// Where a witness keeps the request's values of the attributes it may set.
struct Slots<'a> {
    arguments: &'a mut Map<String, Json>,
    attributes: &'a mut Map<String, Json>,
    subject: &'a mut Map<String, Json>,
    resource: &'a mut Map<String, Json>,
    /// The attributes of the mandate's principal (`context.principals.PRINCIPAL`).
    principal: &'a mut Map<String, Json>,
    resource_id: &'a mut Option<Json>,
    /// A template's parameters (their values for the instance the witness describes).
    params: &'a mut Map<String, Json>,
}

impl Slots<'_> {
    fn get(&self, attr: &Attr) -> Option<Json> {
        match attr {
            Attr::Arg(name) => self.arguments.get(name).cloned(),
            Attr::Context(name) => self.attributes.get(name).cloned(),
            Attr::Subject(name) => self.subject.get(name).cloned(),
            Attr::Resource(name) => self.resource.get(name).cloned(),
            Attr::Principal(name) => self.principal.get(name).cloned(),
            Attr::ResourceId => self.resource_id.clone(),
            Attr::Param(name) => self.params.get(name).cloned(),
            Attr::ParentParam(_) => self.params.get(&attr.display()).cloned(),
            _ => None,
        }
    }

    /// Sets an attribute the witness may choose (not `subject.id`, which picks the mandate, nor `now`).
    fn set(&mut self, attr: &Attr, value: Json) {
        match attr {
            Attr::Arg(name) if self.arguments.contains_key(name) => {
                self.arguments.insert(name.clone(), value);
            }
            Attr::Context(name) => {
                self.attributes.insert(name.clone(), value);
            }
            Attr::Subject(name) => {
                self.subject.insert(name.clone(), value);
            }
            Attr::Resource(name) => {
                self.resource.insert(name.clone(), value);
            }
            Attr::Principal(name) => {
                self.principal.insert(name.clone(), value);
            }
            Attr::ResourceId => *self.resource_id = Some(value),
            Attr::Param(name) => {
                self.params.insert(name.clone(), value);
            }
            Attr::ParentParam(_) => {
                self.params.insert(attr.display(), value);
            }
            _ => {}
        }
    }
}

/// A value for the right operand of `left OP right` that makes the comparison `wanted`, given the left one as a
/// request carries it; `None` when the type has no such value here.
fn agreeing(left: &Json, ty: &Type, op: CompareOp, wanted: bool, levels: &[String]) -> Option<Json> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    // The order the right operand must have relative to the left one.
    let order = match (op, wanted) {
        (CompareOp::Eq, true) | (CompareOp::Ne, false) | (CompareOp::Lt, false) | (CompareOp::Gt, false) => Equal,
        (CompareOp::Le, true) | (CompareOp::Ge, false) => Equal,
        (CompareOp::Eq, false) | (CompareOp::Ne, true) | (CompareOp::Lt, true) | (CompareOp::Ge, true) => Greater,
        (CompareOp::Le, false) | (CompareOp::Gt, true) => Less,
    };
    if order == Equal {
        return Some(left.clone());
    }
    let step: i64 = if order == Greater { 1 } else { -1 };
    match ty {
        Type::String | Type::Kind(_) => Some(json!(format!("{}-other", left.as_str()?))),
        Type::Enum(_, variants) => {
            let current = left.as_str()?;
            variants.iter().find(|v| *v != current).map(|v| json!(v))
        }
        Type::Bool => Some(json!(!left.as_bool()?)),
        Type::Int | Type::Duration => {
            let n = left.as_i64()?.checked_add(step)?;
            Some(json!(n))
        }
        Type::Decimal => {
            let d = crate::value::Decimal::parse(left.to_string().trim_matches('"'))?;
            Some(json!(
                crate::value::Decimal(d.0 + i128::from(step) * 10i128.pow(crate::value::DECIMAL_SCALE)).to_string()
            ))
        }
        Type::Money => {
            let m = crate::value::Money::parse(left.as_str()?)?;
            let amount = crate::value::Decimal(m.amount.0 + i128::from(step) * 10i128.pow(crate::value::DECIMAL_SCALE));
            Some(json!(format!("{amount} {}", m.currency)))
        }
        Type::Timestamp => {
            let t = crate::value::parse_instant(left.as_str()?)?;
            Some(json!(format_instant(t + i128::from(step) * NANOS_PER_SECOND)))
        }
        Type::Level => {
            let at = levels.iter().position(|l| Some(l.as_str()) == left.as_str())? as i64 + step;
            levels.get(usize::try_from(at).ok()?).map(|l| json!(l))
        }
        Type::Set(_) => None,
    }
}

fn int(n: i64) -> Value {
    Value::Number(crate::value::Decimal::from_int(n))
}

/// A JSON number from its decimal text (exact: serde_json keeps the digits).
fn number(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or(Json::Null)
}

/// A value in the request encoding of its type (docs/requests.md).
fn encode(value: &Value, ty: &Type, levels: &[String], currency: &str) -> Json {
    match (value, ty) {
        (Value::Number(d), Type::Money) => json!(format!("{d} {currency}")),
        (Value::Number(d), Type::Int) => number(&d.to_string()),
        (Value::Number(d), _) => json!(d.to_string()),
        (Value::Money(m), _) => json!(m.to_string()),
        (Value::String(s), _) => json!(s),
        (Value::Bool(b), _) => json!(b),
        (Value::Timestamp(t), _) => json!(format_instant(*t)),
        (Value::Duration(d), _) => number(&d.to_string()),
        (Value::Level(l), _) => json!(levels.get(*l).cloned().unwrap_or_default()),
        (Value::Set(items), Type::Set(element)) => {
            Json::Array(items.iter().map(|i| encode(i, element, levels, currency)).collect())
        }
        (Value::Set(items), _) => {
            Json::Array(items.iter().map(|i| encode(i, &Type::String, levels, currency)).collect())
        }
    }
}

/// The interpreter's decisions on a counterexample: the sub-mandate standing alone, and its parent.
#[derive(Debug, Clone)]
pub struct Confirmation {
    pub child: Decision,
    pub parent: Decision,
}

impl Confirmation {
    /// The sub-mandate's own terms allow the request and its parent's chain does not.
    pub fn confirms(&self) -> bool {
        self.child.outcome == Outcome::Allow && self.parent.outcome != Outcome::Allow
    }
}

/// The request as the parent sees it: addressed to the parent, with approvals issued under the child counted as
/// issued under the parent (one approval, presented once, serves the whole chain at run time).
pub fn for_parent(request: &Json, child: &str, parent: &str) -> Json {
    let mut out = request.clone();
    out["context"]["mandate"] = json!(parent);
    if let Some(Json::Array(approvals)) = out.pointer_mut("/context/approvals") {
        for approval in approvals {
            if approval.get("mandate").and_then(Json::as_str) == Some(child) {
                approval["mandate"] = json!(parent);
            }
        }
    }
    out
}

/// A copy of a program that evaluates a sub-mandate standing alone (no parent) and its parent for the
/// sub-mandate's holder: the two sides the narrowing check compares.
#[derive(Debug, Clone)]
pub struct Scratch {
    program: Program,
}

impl Scratch {
    pub fn new(program: &Program) -> Scratch {
        Scratch { program: program.clone() }
    }

    /// A scratch copy made of a program already copied.
    pub fn from_program(program: Program) -> Scratch {
        Scratch { program }
    }

    pub fn confirm(&mut self, child: MandateId, request: &Json) -> Option<Confirmation> {
        let parent = self.program.mandates.get(child)?.parent?;
        let bytes = serde_json::to_vec(request).ok()?;
        self.program.mandates[child].parent = None;
        let child_decision = decide(&self.program, &bytes);
        self.program.mandates[child].parent = Some(parent);

        // The parent judges the same call by the same agent: the holder check is the child's, not the parent's.
        let subject = request.pointer("/subject/id").and_then(Json::as_str).unwrap_or_default().to_string();
        let (child_name, parent_name) =
            (self.program.mandates[child].name.clone(), self.program.mandates[parent].name.clone());
        let parent_request = for_parent(request, &child_name, &parent_name);
        let bytes = serde_json::to_vec(&parent_request).ok()?;
        let holders = self.program.mandates[parent].holders.clone();
        if !holders.contains(&subject) {
            self.program.mandates[parent].holders.push(subject);
        }
        let parent_decision = decide(&self.program, &bytes);
        self.program.mandates[parent].holders = holders;
        Some(Confirmation { child: child_decision, parent: parent_decision })
    }
}

/// Confirms a narrowing counterexample on a copy of `program` (for tests and tools; the check reuses one copy).
pub fn confirm(program: &Program, child: MandateId, request: &Json) -> Option<Confirmation> {
    Scratch::new(program).confirm(child, request)
}

/// Instants to try for a calendar atom, in order: every whole hour of the two weeks from `start` (the weekly hours
/// repeat within them), then around each date the calendars name — the hours of the day before, the date and the
/// day after (local midnight is within a day of UTC midnight), and the exact starts of the dated hours — so that an
/// opening or a closure on one date, however far from `start`, is found.
fn calendar_candidates(start: i128, defs: &[&crate::ir::CalendarDef]) -> impl Iterator<Item = i128> {
    let hour = 3600 * NANOS_PER_SECOND;
    let exact = start;
    let start = start - start.rem_euclid(hour);
    let mut dated: Vec<i128> = Vec::new();
    for def in defs {
        let mut days: Vec<(i64, Vec<u16>)> = Vec::new();
        for interval in def.calendar.dated() {
            for date in [interval.first, interval.last] {
                days.push((date.day_number(), vec![interval.start_minute, interval.end_minute.saturating_sub(1)]));
            }
        }
        for range in def.calendar.closed() {
            days.push((range.first.day_number(), Vec::new()));
            days.push((range.last.day_number(), Vec::new()));
        }
        for (day, minutes) in days {
            let midnight = i128::from(day) * 86_400 * NANOS_PER_SECOND;
            dated.extend((-24..48).map(|h| midnight + h * hour));
            for minute in minutes {
                let local = midnight + i128::from(minute) * 60 * NANOS_PER_SECOND;
                // The offset in force near that reading; a reading in a skipped hour is no instant, and is not found.
                if let Some(parts) = def.table.local_parts(local) {
                    dated.push(local - i128::from(parts.offset_seconds) * NANOS_PER_SECOND);
                }
            }
        }
    }
    // The start itself first: the theory may have placed it where the calendars answer as the model chose.
    std::iter::once(exact).chain((0..14 * 24).map(move |h| start + h * hour)).chain(dated)
}

/// The attribute a parameter's key names in a witness's values (`cap`, `parent.cap`, `parent.parent.cap`, as
/// `parametric` keys the values of a chain of instances).
fn key_attr(key: &str) -> Attr {
    match key.strip_prefix("parent.") {
        Some(rest) => Attr::ParentParam(rest.to_string()),
        None => Attr::Param(key.to_string()),
    }
}

/// The principal of the symbolic instances of a chain of templates (`parametric`), as a gate `approved by principal`
/// reads it: one name for the one principal every instance of the chain has, which no identity is (it has a NUL). A
/// model's approver of that name is the principal's value in the witness ([`request_with`]). Exact for gates: an
/// approver is the principal on one side exactly when on the other.
pub const INSTANCE_PRINCIPAL: &str = "\u{0}principal";
