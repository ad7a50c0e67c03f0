//! Instances of templates (mandates granted at run time, docs/grants-design.md): the shape one instance has in a
//! request's `context.grants` and in the gateway's store, and the check that it lies within its template — the
//! parameters' types, the bounds (evaluated by the interpreter's condition code), the principal and holder patterns
//! and the validity window. The gateway runs [`validate_instance`] when someone grants; every decision runs the same
//! check again on the instance it is given and the instances it hangs under ([`check_lineage`]), and an instance
//! that fails it is decided `grant.invalid`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::cond::{self, Env};
use super::instance::Instance;
pub use super::instance::{GrantInstance, MAX_GRANTS, MAX_INSTANCE_DEPTH, MAX_INSTANCE_ID};
use super::request::Request;
use crate::ir::{Parent, Program, Template, TemplateId, TimeBound, Value};
use crate::value::{format_instant, format_timestamp, parse_instant, NANOS_PER_SECOND};

/// Why an instance is not within its template. Serialises as `{"problem", "field", "condition", "value"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRefusal {
    pub problem: GrantProblem,
    /// What is wrong: `params.NAME`, `principal`, `holder`, `granted`, `template`, `valid` (the window).
    pub field: String,
    /// The clause it fails, in the language's words: the bound as written (`cap > 0 USD and cap <= 500 USD`), the
    /// parameter's declaration (`cap: money`), the pattern (`holder under "agent:"`), the window
    /// (`valid until until`).
    pub condition: String,
    /// The instance's value of the field as canonical JSON (absent when the field is).
    pub value: Option<String>,
    /// For an instance refused by a bound or its window: a request the instance would allow that its parent
    /// refuses, found by the narrowing proof on the concrete instance (filled by the gateway, which has the proof;
    /// absent when there is none or it was not looked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<Box<Json>>,
    /// Whether the concrete instance narrows its parent in spite of the refusal (`true`: no witness exists);
    /// absent when not looked for or not decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_narrows: Option<bool>,
}

/// The kinds of [`GrantRefusal`], in the order the check looks for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrantProblem {
    /// The instance names another template than the one it is checked against.
    TemplateMismatch,
    /// The template hangs under a template and the instance names no parent instance (`parent`), or one that
    /// `context.grants` does not hold (revoked, or never granted).
    ParentMissing,
    /// The instance's `parent` names an instance of another template than its template's parent template, or the
    /// instance names a parent though its template hangs under a mandate.
    ParentMismatch,
    /// `context.grants` holds two entries the instance's `parent` names.
    ParentAmbiguous,
    /// The template is nested more than [`MAX_INSTANCE_DEPTH`] templates deep: no engine decides its instances.
    TooDeep,
    /// `granted` is not an RFC 3339 timestamp.
    GrantedMalformed,
    /// The principal is blank, or not admitted by the template's `for`, or (under a template) not its parent
    /// instance's.
    PrincipalNotAdmitted,
    /// The holder is not admitted by the template's `holder`.
    HolderNotAdmitted,
    /// A parameter the template declares has no value.
    ParamMissing,
    /// A value for a parameter the template does not declare.
    ParamUnknown,
    /// A parameter's value is not of its type (negative money of a parameter not declared `signed` included).
    ParamMistyped,
    /// A bound is false, or cannot be evaluated, for the instance's values.
    BoundFailed,
    /// The window is empty (it ends before it begins) or ends after its parent's.
    WindowInvalid,
    /// The window has ended at the time of the check (only [`validate_instance`] looks: a decision on an instance
    /// whose window has ended is `mandate.expired`, as for any mandate).
    WindowEnded,
    /// The template is not proved to narrow its parent and this instance, within its bounds, does not: the
    /// narrowing proof on the concrete instance found a request it allows that its parent refuses (only the
    /// gateway looks, with the proof, when it grants unproved templates; never a decision's check).
    InstanceWidens,
}

impl GrantProblem {
    pub fn code(self) -> &'static str {
        match self {
            GrantProblem::TemplateMismatch => "template-mismatch",
            GrantProblem::ParentMissing => "parent-missing",
            GrantProblem::ParentMismatch => "parent-mismatch",
            GrantProblem::ParentAmbiguous => "parent-ambiguous",
            GrantProblem::TooDeep => "too-deep",
            GrantProblem::GrantedMalformed => "granted-malformed",
            GrantProblem::PrincipalNotAdmitted => "principal-not-admitted",
            GrantProblem::HolderNotAdmitted => "holder-not-admitted",
            GrantProblem::ParamMissing => "param-missing",
            GrantProblem::ParamUnknown => "param-unknown",
            GrantProblem::ParamMistyped => "param-mistyped",
            GrantProblem::BoundFailed => "bound-failed",
            GrantProblem::WindowInvalid => "window-invalid",
            GrantProblem::WindowEnded => "window-ended",
            GrantProblem::InstanceWidens => "instance-widens",
        }
    }
}

impl std::fmt::Display for GrantRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: `{}` fails `{}`", self.problem.code(), self.field, self.condition)?;
        if let Some(value) = &self.value {
            write!(f, " (value `{value}`)")?;
        }
        Ok(())
    }
}

/// Checks `instance` against `template` of `program` as a grant is checked: everything [`check`] looks at (what
/// every decision re-checks), and that its window has not ended at `now` (nanoseconds since the Unix epoch) and
/// ends no later than its parent mandate's. The first problem found is the refusal. An instance of a template under
/// a template needs its parent instance: [`validate_instance_under`].
pub fn validate_instance(
    program: &Program,
    template: &Template,
    instance: &GrantInstance,
    now: i128,
) -> Result<(), GrantRefusal> {
    validate_instance_under(program, template, instance, &[], now)
}

/// [`validate_instance`] for any instance, with `grants` the instances it may hang under (for an instance of a
/// template under a template: its parent instance, named by its `parent` as `TEMPLATE/ID`, and that one's
/// ancestors, each the current version, as a decision finds them in `context.grants`; other entries are passed over).
/// The parent must be there, an instance of the template's parent template, valid itself (recursively) and of the
/// same principal; the bounds read its parameters (`parent.NAME`); the window must end no later than the parent
/// instance's. A refusal about an ancestor names its field with one `parent.` per step up
/// (`parent.params.cap`: the parent's `cap` fails its own bound).
pub fn validate_instance_under(
    program: &Program,
    template: &Template,
    instance: &GrantInstance,
    grants: &[GrantInstance],
    now: i128,
) -> Result<(), GrantRefusal> {
    let Some(id) = program.templates.iter().position(|t| std::ptr::eq(t, template) || t.name == template.name) else {
        let value = Some(quoted(&instance.template));
        let condition = format!("template {}", template.name);
        return Err(refusal(GrantProblem::TemplateMismatch, "template", condition, value));
    };
    let lineage = lineage(program, id, instance, grants);
    let checked = check_lineage(program, &lineage).map_err(|(level, mut refusal)| {
        let up = lineage.links.len() - 1 - level;
        refusal.field = format!("{}{}", "parent.".repeat(up), refusal.field);
        refusal
    })?;
    let leaf = checked.last().expect("a checked lineage ends with the instance");
    let window = || GrantRefusal {
        problem: GrantProblem::WindowEnded,
        field: "valid".into(),
        condition: window_text(template),
        value: leaf.valid_until.map(|t| quoted(&format_instant(t))),
        witness: None,
        instance_narrows: None,
    };
    if let Some(until) = leaf.valid_until {
        if until <= now {
            return Err(window());
        }
        let parent = match template.parent {
            Parent::Mandate(parent) => program.expires_at(parent).map(|p| i128::from(p) * NANOS_PER_SECOND),
            // The parent instance's own window (its template's parent's ends no earlier: checked when it was granted).
            Parent::Template(_) => checked.len().checked_sub(2).and_then(|p| checked[p].valid_until),
        };
        if parent.is_some_and(|p| until > p) {
            return Err(GrantRefusal { problem: GrantProblem::WindowInvalid, ..window() });
        }
    }
    Ok(())
}

/// The instances an instance hangs under (sub-delegation), found in `context.grants`, and the instance itself, last:
/// `links` root first, each with its template. An instance of a template under a template names its parent as
/// `TEMPLATE/ID` (`parent`): the one entry of that template (its template's parent) with that id. The walk stops
/// at the first link it cannot follow (`broken`, about `links[0]`): a `parent` missing, naming no entry or another
/// template, or two entries; a `parent` on an instance of a template under a mandate; or a template nested more
/// than [`MAX_INSTANCE_DEPTH`] deep (then `links` is the instance alone). It cannot loop: each step goes one template
/// up, and templates form no cycle (the checker refuses one; the walk is bounded by the depth anyway).
pub(crate) struct Lineage<'g> {
    pub links: Vec<(TemplateId, &'g GrantInstance)>,
    pub broken: Option<GrantRefusal>,
}

/// How many templates deep `template` sits: 1 under a mandate, one more per template above it (at most
/// [`MAX_INSTANCE_DEPTH`] + 1 is counted).
fn depth(program: &Program, template: TemplateId) -> usize {
    let mut depth = 1;
    let mut current = template;
    while let Parent::Template(parent) = program.templates[current].parent {
        depth += 1;
        if depth > MAX_INSTANCE_DEPTH {
            break;
        }
        current = parent;
    }
    depth
}

/// `template NAME under PARENT`: the clause a refusal about the parent link names.
pub(crate) fn parent_clause(program: &Program, template: &Template) -> String {
    let parent = match template.parent {
        Parent::Mandate(m) => program.mandates.get(m).map_or("", |m| m.name.as_str()),
        Parent::Template(t) => program.templates.get(t).map_or("", |t| t.name.as_str()),
    };
    format!("template {} under {parent}", template.name)
}

fn refusal(problem: GrantProblem, field: &str, condition: String, value: Option<String>) -> GrantRefusal {
    GrantRefusal { problem, field: field.to_string(), condition, value, witness: None, instance_narrows: None }
}

pub(crate) fn lineage<'g>(
    program: &Program,
    template: TemplateId,
    grant: &'g GrantInstance,
    grants: &'g [GrantInstance],
) -> Lineage<'g> {
    let mut links = vec![(template, grant)];
    if depth(program, template) > MAX_INSTANCE_DEPTH {
        let condition = parent_clause(program, &program.templates[template]);
        let broken = refusal(GrantProblem::TooDeep, "template", condition, Some(quoted(&grant.template)));
        return Lineage { links, broken: Some(broken) };
    }
    for _ in 0..MAX_INSTANCE_DEPTH {
        let (t, g) = links[0];
        let clause = || parent_clause(program, &program.templates[t]);
        let link = |problem| Some(refusal(problem, "parent", clause(), g.parent.as_deref().map(quoted)));
        let broken = match (program.templates[t].parent, g.parent.as_deref()) {
            (Parent::Mandate(_), None) => None,
            (Parent::Mandate(_), Some(_)) => link(GrantProblem::ParentMismatch),
            (Parent::Template(_), None) => link(GrantProblem::ParentMissing),
            (Parent::Template(above), Some(reference)) => {
                let name = program.templates[above].name.as_str();
                match reference.strip_prefix(name).and_then(|rest| rest.strip_prefix('/')) {
                    None => link(GrantProblem::ParentMismatch),
                    Some(id) => {
                        let mut found = grants.iter().filter(|c| c.template == name && c.id == id);
                        match (found.next(), found.next()) {
                            (None, _) => link(GrantProblem::ParentMissing),
                            (Some(parent), None) => {
                                links.insert(0, (above, parent));
                                continue;
                            }
                            (Some(_), Some(_)) => link(GrantProblem::ParentAmbiguous),
                        }
                    }
                }
            }
        };
        return Lineage { links, broken };
    }
    // Never reached: the depth was checked above.
    let broken = refusal(GrantProblem::TooDeep, "template", parent_clause(program, &program.templates[template]), None);
    Lineage { links: vec![(template, grant)], broken: Some(broken) }
}

/// The check every decision runs on an instance, without the time of day: [`check_lineage`] on the instances it
/// hangs under found in `grants`, the refusal's field named as [`validate_instance_under`] names it.
pub(crate) fn check(
    program: &Program,
    template: &Template,
    instance: &GrantInstance,
    grants: &[GrantInstance],
) -> Result<Instance, GrantRefusal> {
    let Some(id) = program.templates.iter().position(|t| t.name == template.name) else {
        let value = Some(quoted(&instance.template));
        let condition = format!("template {}", template.name);
        return Err(refusal(GrantProblem::TemplateMismatch, "template", condition, value));
    };
    let lineage = lineage(program, id, instance, grants);
    check_lineage(program, &lineage).map(|mut all| all.pop().expect("the instance")).map_err(|(level, mut r)| {
        r.field = format!("{}{}", "parent.".repeat(lineage.links.len() - 1 - level), r.field);
        r
    })
}

/// The check every decision runs on the instance it is decided under and the instances it hangs under (and
/// [`validate_instance_under`] at grant time). The checked instances, root first, or the refusal with the index in
/// `links` of the instance it is about. In this order: each instance's own checks, from the instance up
/// ([`own`]: its template's name, `granted`, the principal and the holder, the parameters' types, no undeclared
/// one); the link of the topmost instance found ([`Lineage::broken`]); then from the top down, each instance's
/// principal is its parent instance's, its bounds hold (reading its parent's parameters as `parent.NAME`), its
/// window does not end before it begins.
pub(crate) fn check_lineage(program: &Program, lineage: &Lineage) -> Result<Vec<Instance>, (usize, GrantRefusal)> {
    let links = &lineage.links;
    let mut owns = Vec::with_capacity(links.len());
    for (level, &(t, grant)) in links.iter().enumerate().rev() {
        owns.push(own(program, &program.templates[t], grant).map_err(|r| (level, r))?);
    }
    owns.reverse();
    if let Some(broken) = &lineage.broken {
        return Err((0, broken.clone()));
    }
    let mut checked: Vec<Instance> = Vec::with_capacity(links.len());
    for (level, (&(t, grant), params)) in links.iter().zip(owns).enumerate() {
        let template = &program.templates[t];
        let parent = checked.last();
        if let Some(parent) = parent {
            if parent.params.get("principal") != Some(&Value::String(grant.principal.clone())) {
                let condition = parent_clause(program, template);
                let value = Some(quoted(&grant.principal));
                return Err((level, refusal(GrantProblem::PrincipalNotAdmitted, "principal", condition, value)));
            }
        }
        let instance = finish(program, template, grant, params, parent).map_err(|r| (level, r))?;
        checked.push(instance);
    }
    Ok(checked)
}

/// An instance's own checks, in this order: the template's name; `granted` is a timestamp; the principal (not
/// blank, admitted by `for`; anyone when `for` is not written, as under a template) and the holder (admitted by
/// `holder`); each declared parameter in declaration order has a value of its type; no value for an undeclared one
/// (the first by name). Its values decoded, the implicit `principal`, `holder` and `granted` included.
fn own(
    program: &Program,
    template: &Template,
    instance: &GrantInstance,
) -> Result<BTreeMap<String, Value>, GrantRefusal> {
    let refuse = |problem, field: &str, condition: String, value: Option<String>| GrantRefusal {
        problem,
        field: field.to_string(),
        condition,
        value,
        witness: None,
        instance_narrows: None,
    };
    if instance.template != template.name {
        let value = Some(quoted(&instance.template));
        return Err(refuse(GrantProblem::TemplateMismatch, "template", format!("template {}", template.name), value));
    }
    let Some(granted) = parse_instant(&instance.granted) else {
        let value = Some(quoted(&instance.granted));
        return Err(refuse(GrantProblem::GrantedMalformed, "granted", "granted: timestamp".into(), value));
    };
    let open = template.principals.is_empty() && template.principal_prefixes.is_empty();
    if crate::value::is_blank(&instance.principal)
        || !(open || super::holds(&template.principals, &template.principal_prefixes, &instance.principal))
    {
        let condition = patterns("for", &template.principals, &template.principal_prefixes);
        return Err(refuse(
            GrantProblem::PrincipalNotAdmitted,
            "principal",
            condition,
            Some(quoted(&instance.principal)),
        ));
    }
    if !super::holds(&template.holders, &template.holder_prefixes, &instance.holder) {
        let condition = patterns("holder", &template.holders, &template.holder_prefixes);
        return Err(refuse(GrantProblem::HolderNotAdmitted, "holder", condition, Some(quoted(&instance.holder))));
    }
    let mut params = BTreeMap::new();
    params.insert("principal".to_string(), Value::String(instance.principal.clone()));
    params.insert("holder".to_string(), Value::String(instance.holder.clone()));
    params.insert("granted".to_string(), Value::Timestamp(granted));
    for param in &template.params {
        let field = format!("params.{}", param.name);
        let declaration = format!("{}: {}", param.name, param.ty.display());
        let Some(json) = instance.params.get(&param.name) else {
            return Err(refuse(GrantProblem::ParamMissing, &field, declaration, None));
        };
        let decoded =
            cond::decode(json, &param.ty, program).ok().filter(|value| param.signed || !cond::negative(value));
        let Some(value) = decoded else {
            return Err(refuse(GrantProblem::ParamMistyped, &field, declaration, Some(canonical(json))));
        };
        params.insert(param.name.clone(), value);
    }
    if let Some(name) = instance.params.keys().filter(|k| template.param(k).is_none()).min() {
        let declared = template.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
        let condition = format!("{}({declared})", template.name);
        let value = instance.params.get(name).map(canonical);
        return Err(refuse(GrantProblem::ParamUnknown, &format!("params.{name}"), condition, value));
    }
    Ok(params)
}

/// An instance's bounds, each in declaration order (an error evaluating it fails it; `parent.NAME` reads the parent
/// instance's values), and its window (it must not end before it begins).
fn finish(
    program: &Program,
    template: &Template,
    instance: &GrantInstance,
    params: BTreeMap<String, Value>,
    parent: Option<&Instance>,
) -> Result<Instance, GrantRefusal> {
    let blank = Request::blank();
    let checked = Instance { name: instance.name(), params, valid_from: None, valid_until: None };
    let env =
        Env { program, request: &blank, tool: 0, listing: false, principal: "", instance: Some(&checked), parent };
    for param in &template.params {
        if cond::eval(&param.bound, &env) != Ok(true) {
            let field = format!("params.{}", param.name);
            let condition = param.bound_text.clone().unwrap_or_else(|| "true".into());
            let value = instance.params.get(&param.name).map(canonical);
            return Err(refusal(GrantProblem::BoundFailed, &field, condition, value));
        }
    }
    let instant = |bound: &Option<TimeBound>| match bound {
        None => None,
        Some(TimeBound::At(at)) => Some(i128::from(*at) * NANOS_PER_SECOND),
        Some(TimeBound::Param(name)) => match checked.params.get(name) {
            Some(Value::Timestamp(at)) => Some(*at),
            _ => None,
        },
    };
    let (valid_from, valid_until) = (instant(&template.valid_from), instant(&template.valid_until));
    if let (Some(from), Some(until)) = (valid_from, valid_until) {
        if until <= from {
            let value = Some(quoted(&format_instant(until)));
            return Err(refusal(GrantProblem::WindowInvalid, "valid", window_text(template), value));
        }
    }
    Ok(Instance { valid_from, valid_until, ..checked })
}

/// A template's window as written: `valid from 2026-01-01T00:00:00Z until until`.
pub(crate) fn window_text(template: &Template) -> String {
    let bound = |b: &TimeBound| match b {
        TimeBound::At(at) => format_timestamp(*at),
        TimeBound::Param(name) => name.clone(),
    };
    let mut text = String::from("valid");
    if let Some(from) = &template.valid_from {
        text.push_str(" from ");
        text.push_str(&bound(from));
    }
    if let Some(until) = &template.valid_until {
        text.push_str(" until ");
        text.push_str(&bound(until));
    }
    text
}

/// `holder "a", under "agent:"`: a pattern clause as written (ids, then prefixes).
pub(crate) fn patterns(keyword: &str, ids: &[String], prefixes: &[String]) -> String {
    let items: Vec<String> =
        ids.iter().map(|id| quoted(id)).chain(prefixes.iter().map(|p| format!("under {}", quoted(p)))).collect();
    if items.is_empty() {
        return format!("{keyword} nobody");
    }
    format!("{keyword} {}", items.join(", "))
}

fn quoted(text: &str) -> String {
    let mut out = String::new();
    super::digest::write_string(&mut out, text);
    out
}

fn canonical(json: &Json) -> String {
    let mut out = String::new();
    super::digest::write_canonical(&mut out, json);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const POLICY: &str = r#"
tool pay(merchant: string, amount: money) {
  side effects
}

mandate ceiling for "org:acme" {
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until 2030-01-01T00:00:00Z
  allow pay where args.amount <= 500 USD
}

template shopping(
  merchants: set<string> where merchants within ["acme", "globex"],
  cap: money where cap > 0 USD and cap <= 500 USD,
  until: timestamp where until - granted <= 30d,
) under ceiling {
  for under "user:"
  holder under "agent:"
  valid until until
  otherwise escalate
  allow pay where args.merchant in merchants and args.amount <= cap
}
"#;

    /// The policy checked without the narrowing proof: its template is not proved (its instances' windows may
    /// outlive the parent's, which is what the grant-time check refuses), and decisions must stay safe under the
    /// parent's chain whatever the proof says, as `remit test` decides.
    fn program() -> Program {
        let mut sources = crate::stdlib::sources();
        sources.add("p.remit", POLICY);
        let checked = crate::check::check_with(sources, crate::check::Options { narrowing: false });
        checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics))
    }

    fn instance(params: Json) -> GrantInstance {
        serde_json::from_value(json!({
            "id": "g-1", "version": 3, "template": "shopping", "principal": "user:dana", "holder": "agent:shopper",
            "params": params, "granted": "2026-11-30T12:00:00Z",
        }))
        .expect("an instance")
    }

    fn valid() -> Json {
        json!({"merchants": ["acme"], "cap": "40.00 USD", "until": "2026-12-10T00:00:00Z"})
    }

    const NOW: i128 = 1_796_126_400 * NANOS_PER_SECOND; // 2026-12-01T12:00:00Z

    fn refusal(program: &Program, instance: &GrantInstance) -> GrantRefusal {
        validate_instance(program, &program.templates[0], instance, NOW).expect_err("refused")
    }

    #[test]
    fn an_instance_within_its_bounds_is_valid_and_named_with_its_version() {
        let program = program();
        let inst = instance(valid());
        assert_eq!(validate_instance(&program, &program.templates[0], &inst, NOW), Ok(()));
        assert_eq!(inst.name(), "shopping/g-1@3");
        assert_eq!(inst.reference(), "shopping/g-1");
        let checked = check(&program, &program.templates[0], &inst, &[]).unwrap();
        assert_eq!(checked.params["cap"], Value::Money(crate::value::Money::parse("40.00 USD").unwrap()));
        assert_eq!(checked.valid_until, parse_instant("2026-12-10T00:00:00Z"));
        // The JSON shape round-trips.
        let text = serde_json::to_string(&inst).unwrap();
        assert_eq!(serde_json::from_str::<GrantInstance>(&text).unwrap(), inst);
        assert_eq!(GrantInstance::from_json(&serde_json::to_value(&inst).unwrap()), Some(inst));
    }

    #[test]
    fn a_bound_that_fails_is_named_with_the_value() {
        let program = program();
        let mut params = valid();
        params["cap"] = json!("600.00 USD");
        let r = refusal(&program, &instance(params));
        assert_eq!(r.problem, GrantProblem::BoundFailed);
        assert_eq!(r.field, "params.cap");
        assert_eq!(r.condition, "cap > 0 USD and cap <= 500 USD");
        assert_eq!(r.value.as_deref(), Some("\"600.00 USD\""));
        let mut params = valid();
        params["merchants"] = json!(["acme", "initech"]);
        let r = refusal(&program, &instance(params));
        assert_eq!((r.problem, r.field.as_str()), (GrantProblem::BoundFailed, "params.merchants"));
        assert_eq!(r.value.as_deref(), Some("[\"acme\",\"initech\"]"));
        // A bound over `granted`: 31 days after the grant is past `until - granted <= 30d`.
        let mut params = valid();
        params["until"] = json!("2026-12-31T12:00:01Z");
        let r = refusal(&program, &instance(params));
        assert_eq!((r.problem, r.condition.as_str()), (GrantProblem::BoundFailed, "until - granted <= 30d"));
        assert_eq!(
            r.to_string(),
            "bound-failed: `params.until` fails `until - granted <= 30d` (value `\"2026-12-31T12:00:01Z\"`)"
        );
    }

    #[test]
    fn types_missing_and_undeclared_parameters_are_refused() {
        let program = program();
        let mut params = valid();
        params["cap"] = json!(40);
        let r = refusal(&program, &instance(params));
        assert_eq!((r.problem, r.condition.as_str()), (GrantProblem::ParamMistyped, "cap: money"));
        let mut params = valid();
        params["cap"] = json!("-1.00 USD");
        assert_eq!(refusal(&program, &instance(params)).problem, GrantProblem::ParamMistyped);
        let mut params = valid();
        params.as_object_mut().unwrap().remove("until");
        let r = refusal(&program, &instance(params));
        assert_eq!((r.problem, r.field.as_str(), r.value), (GrantProblem::ParamMissing, "params.until", None));
        let mut params = valid();
        params["colour"] = json!("red");
        let r = refusal(&program, &instance(params));
        assert_eq!((r.problem, r.field.as_str()), (GrantProblem::ParamUnknown, "params.colour"));
        let mut inst = instance(valid());
        inst.granted = "yesterday".into();
        assert_eq!(refusal(&program, &inst).problem, GrantProblem::GrantedMalformed);
    }

    #[test]
    fn principal_and_holder_must_match_the_templates_patterns() {
        let program = program();
        let mut inst = instance(valid());
        inst.holder = "robot:x".into();
        let r = refusal(&program, &inst);
        assert_eq!((r.problem, r.condition.as_str()), (GrantProblem::HolderNotAdmitted, "holder under \"agent:\""));
        inst.holder = "agent:a/../x".into();
        assert_eq!(refusal(&program, &inst).problem, GrantProblem::HolderNotAdmitted);
        let mut inst = instance(valid());
        inst.principal = "org:acme".into();
        let r = refusal(&program, &inst);
        assert_eq!((r.problem, r.condition.as_str()), (GrantProblem::PrincipalNotAdmitted, "for under \"user:\""));
        let mut inst = instance(valid());
        inst.template = "other".into();
        assert_eq!(refusal(&program, &inst).problem, GrantProblem::TemplateMismatch);
    }

    #[test]
    fn a_window_that_has_ended_or_outlives_the_parent_is_refused_at_grant_time_only() {
        let program = program();
        let mut params = valid();
        params["until"] = json!("2026-12-01T00:00:00Z");
        let inst = instance(params);
        let r = refusal(&program, &inst);
        assert_eq!((r.problem, r.condition.as_str()), (GrantProblem::WindowEnded, "valid until until"));
        // A decision re-checks the rest, and decides the window as it decides any mandate's (`mandate.expired`).
        assert!(check(&program, &program.templates[0], &inst, &[]).is_ok());
        let later = 1_893_000_000 * NANOS_PER_SECOND; // 2029-12-26
        let mut inst = instance(json!({"merchants": [], "cap": "1.00 USD", "until": "2030-01-20T00:00:00Z"}));
        inst.granted = "2029-12-25T00:00:00Z".into();
        let r = validate_instance(&program, &program.templates[0], &inst, later).unwrap_err();
        assert_eq!(r.problem, GrantProblem::WindowInvalid);
    }

    /// Tool listings resolve and check instances as decisions do.
    #[test]
    fn tool_listings_under_an_instance() {
        let program = program();
        let listing = |params: Json, mandate: Option<&str>, copies: usize| {
            let grant = serde_json::to_value(instance(params)).unwrap();
            let mut context = json!({"now": "2026-12-01T12:00:00Z", "grants": vec![grant; copies]});
            if let Some(mandate) = mandate {
                context["mandate"] = json!(mandate);
            }
            let request = json!({"subject": {"id": "agent:shopper"}, "context": context});
            crate::eval::visible_tools(&program, request.to_string().as_bytes())
        };
        let shown = listing(valid(), None, 1);
        assert_eq!(shown.visible, ["pay"]);
        let mut params = valid();
        params["cap"] = json!("900.00 USD");
        let invalid = listing(params, Some("shopping/g-1"), 1);
        assert!(invalid.visible.is_empty() && invalid.hidden.iter().all(|h| h.reason == "grant.invalid"));
        let twice = listing(valid(), None, 2);
        assert!(twice.visible.is_empty() && twice.hidden.iter().all(|h| h.reason == "mandate.ambiguous"));
        // After the instance's window the listing hides what the decision would deny.
        let mut params = valid();
        params["until"] = json!("2026-12-01T00:00:00Z");
        let ended = listing(params, None, 1);
        let pay = ended.hidden.iter().find(|h| h.tool == "pay").expect("pay hidden");
        assert_eq!(pay.reason, "mandate.expired");
        assert_eq!(pay.rule.as_ref().map(|r| r.mandate.as_str()), Some("shopping/g-1@3"));
    }

    /// `context.grants` holds at most `MAX_GRANTS` instances (the runtime's bound): one more is malformed.
    #[test]
    fn a_request_carries_at_most_max_grants_instances() {
        let program = program();
        let grant = serde_json::to_value(instance(valid())).unwrap();
        for (copies, reasons) in [(MAX_GRANTS, ["mandate.ambiguous"]), (MAX_GRANTS + 1, ["request.malformed"])] {
            let request = json!({"subject": {"id": "agent:shopper"},
                "action": {"name": "pay", "arguments": {"merchant": "acme", "amount": "1.00 USD"}},
                "context": {"now": "2026-12-01T12:00:00Z", "grants": vec![grant.clone(); copies]}});
            let decision = crate::eval::decide(&program, request.to_string().as_bytes());
            assert_eq!(decision.reasons, reasons, "{copies}");
        }
    }

    #[test]
    fn entries_of_context_grants_are_read_strictly() {
        let good = serde_json::to_value(instance(valid())).unwrap();
        assert!(GrantInstance::from_json(&good).is_some());
        for (key, bad) in [
            ("version", json!(-1)),
            ("version", json!("3")),
            ("id", json!("")),
            ("id", json!("x".repeat(MAX_INSTANCE_ID + 1))),
            ("params", json!([])),
            ("holder", json!(null)),
        ] {
            let mut entry = good.clone();
            entry[key] = bad;
            assert_eq!(GrantInstance::from_json(&entry), None, "{key}");
        }
    }
}

/// Random instances and calls against one template: the decision's `grant.invalid` is exactly [`check`]'s refusal,
/// and an instance never allows a call its parent mandate (named instead) would not allow — the ceiling holds for
/// every instance, valid or not.
#[cfg(test)]
mod random {
    use serde_json::json;

    use super::*;
    use crate::eval::{decide, Outcome};

    const POLICY: &str = r#"
tool pay(merchant: string, amount: money) {
  side effects
}

approval terms {
  binds tool, arguments
  ttl 1h
}

mandate ceiling for "org:acme" {
  holder under "agent:"
  valid from 2026-01-01T00:00:00Z until 2027-06-01T00:00:00Z
  allow pay where args.amount <= 300 USD
  forbid pay where args.merchant in ["evil"]
  require approval terms for pay where args.amount > 200 USD
}

template shopping(
  merchants: set<string> where merchants within ["acme", "globex", "evil"],
  cap: money where cap > 0 USD and cap <= 400 USD,
  until: timestamp where until - granted <= 30d,
) under ceiling {
  for under "user:"
  holder under "agent:"
  valid until until
  otherwise escalate
  allow pay where args.merchant in merchants and args.amount <= cap
  require approval terms for pay where args.amount > 60 USD
}
"#;

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[(self.next() % items.len() as u64) as usize]
        }
    }

    /// One random case against [`POLICY`]'s template: an instance (mostly valid values, each kind of invalid one now
    /// and then), the subject (mostly its holder; now and then another agent or a subject under no pattern), a call,
    /// presented approvals, and `now`.
    struct Case {
        grant: Json,
        subject: &'static str,
        call: Json,
        approvals: Json,
        now: &'static str,
    }

    const MERCHANTS: [&str; 4] = ["acme", "globex", "evil", "initech"];
    const HOLDERS: [&str; 3] = ["agent:a", "agent:b", "robot:c"];

    fn case(rng: &mut Rng) -> Case {
        let amounts = ["0.00 USD", "30.00 USD", "61.00 USD", "150.00 USD", "250.00 USD", "350.00 USD", "450.00 USD"];
        let caps = [
            json!("50.00 USD"),
            json!("120.00 USD"),
            json!("400.00 USD"),
            json!("50.00 USD"),
            json!("120.00 USD"),
            json!("400.00 USD"),
            json!("401.00 USD"),
            json!("0.00 USD"),
            json!("-5.00 USD"),
            json!(50),
            json!("50.00 EUR"),
        ];
        let granted = ["2026-11-20T00:00:00Z", "2026-11-20T00:00:00Z", "2026-11-01T00:00:00Z", "2026-12-10T00:00:00Z"];
        let untils = [
            "2026-12-10T00:00:00Z",
            "2026-12-10T00:00:00Z",
            "2026-11-20T00:00:00Z",
            "2027-01-15T00:00:00Z",
            "later",
            "2026-12-09T23:59:59.25Z",
        ];
        const NOWS: [&str; 5] = [
            "2026-11-20T00:00:00Z",
            "2026-12-01T00:00:00Z",
            "2026-12-01T00:00:00Z",
            "2026-11-01T00:00:00Z",
            "2027-07-01T00:00:00Z",
        ];
        let principals = ["user:dana", "user:dana", "user:dana", "user:dana", "org:acme", ""];
        let mut chosen: Vec<Json> = Vec::new();
        for m in MERCHANTS {
            if rng.next().is_multiple_of(2) {
                chosen.push(json!(m));
            }
        }
        let mut params = json!({"merchants": chosen, "cap": rng.pick(&caps), "until": rng.pick(&untils)});
        if rng.next().is_multiple_of(10) {
            params.as_object_mut().unwrap().remove("until");
        }
        let grant = json!({
            "id": "g-1", "version": 1 + rng.next() % 3, "template": "shopping",
            "principal": rng.pick(&principals), "holder": rng.pick(&HOLDERS[..2]),
            "granted": rng.pick(&granted), "params": params,
        });
        let holder = grant["holder"].as_str().and_then(|h| HOLDERS.iter().find(|&&x| x == h)).copied().unwrap();
        let subject = if rng.next().is_multiple_of(5) { *rng.pick(&HOLDERS) } else { holder };
        let call = json!({"merchant": rng.pick(&MERCHANTS), "amount": rng.pick(&amounts)});
        let approvals = if rng.next().is_multiple_of(3) {
            let digest = crate::eval::argument_digest("pay", &call);
            json!([{"id": "ap", "kind": "terms", "mandate": "ceiling", "issued_at": "2026-11-01T00:00:00Z",
                "expires_at": "2028-01-01T00:00:00Z", "tool": "pay", "digest": digest}])
        } else {
            json!([])
        };
        let now = *rng.pick(&NOWS);
        Case { grant, subject, call, approvals, now }
    }

    #[test]
    fn instances_decide_within_their_parent_and_invalid_ones_fail_closed() {
        // Without the proof (as `remit test` decides): an instance must not allow what its parent would not, proved
        // or not.
        let mut sources = crate::stdlib::sources();
        sources.add("p.remit", POLICY);
        let checked = crate::check::check_with(sources, crate::check::Options { narrowing: false });
        let program = checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let template = &program.templates[0];
        let cases: usize = std::env::var("REMIT_GRANTS_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(4000);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut tally = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..cases {
            let Case { grant, subject, call, approvals, now } = case(&mut rng);
            let instance = GrantInstance::from_json(&grant).expect("well-formed");
            let request = |mandate: Option<&str>| {
                let mut context = json!({"now": now, "grants": [grant.clone()], "approvals": approvals.clone()});
                if let Some(mandate) = mandate {
                    context["mandate"] = json!(mandate);
                }
                json!({"subject": {"id": subject}, "action": {"name": "pay", "arguments": call.clone()},
                    "context": context})
                .to_string()
            };
            let under_instance = decide(&program, request(Some("shopping/g-1")).as_bytes());
            let under_parent = decide(&program, request(Some("ceiling")).as_bytes());
            let checked = check(&program, template, &instance, &[]);
            let invalid = under_instance.reasons == ["grant.invalid"];
            if subject == instance.holder {
                assert_eq!(invalid, checked.is_err(), "{}", request(None));
            } else {
                assert_eq!(under_instance.reasons, ["subject.not-holder"]);
            }
            if under_instance.outcome == Outcome::Allow {
                assert_eq!(under_parent.outcome, Outcome::Allow, "{}", request(None));
            }
            // Resolution by holder: the instance is the subject's only candidate, the parent its ceiling.
            let resolved = decide(&program, request(None).as_bytes());
            if subject == instance.holder {
                assert_eq!(resolved.to_json(), under_instance.to_json());
            } else if subject.starts_with("agent:") {
                assert_eq!(resolved.mandate_chain, ["ceiling"], "{}", request(None));
            } else {
                assert_eq!(resolved.reasons, ["request.missing-field"], "{}", request(None));
            }
            *tally.entry(format!("{} {:?}", under_instance.outcome.as_str(), under_instance.reasons)).or_default() += 1;
        }
        for wanted in
            ["allow", "escalate", "deny [\"grant.invalid\"]", "deny [\"mandate.expired\"]", "deny [\"rule.forbidden\"]"]
        {
            assert!(tally.keys().any(|k| k.starts_with(wanted)), "no {wanted} among {tally:?}");
        }
    }

    /// [`POLICY`] and more: a static mandate that agents may hold beside an instance, a template under a template
    /// (its instances are refused: `parent-template`), and one with a fixed window, its own patterns and a bound
    /// over an int.
    const MORE: &str = r#"
tool refund(amount: money)

mandate side for "org:other" {
  holder "agent:a"
  allow pay where args.amount <= 10 USD
}

template errands(
  budget: money where budget <= 50 USD,
) under shopping {
  holder under "agent:"
  allow pay where args.amount <= budget
}

template fixed(
  count: int where count >= 1 and count <= 3,
  kinds: set<string>,
) under side {
  for "user:dana", under "org:"
  holder "agent:b"
  valid from 2026-11-15T00:00:00Z until 2026-12-15T00:00:00Z
  allow pay where args.merchant in kinds
  allow refund
  require approval terms for pay where args.amount > 5 USD
}

// An instance acts for the principal it names, not its ceiling's: the `owner` gate (`approved by principal`),
// escalations and stops on a principal are hers; `principal.limit` (the ceiling's) reads the root's.
principal customer {
  limit: money
}

approval owner {
  binds tool
  ttl 1h
  approved by principal
}

tool gift(amount: money) {
  side effects
}

mandate gifting for "org:gifts" {
  holder under "agent:"
  otherwise escalate
  allow gift where args.amount <= principal.limit
  require approval owner for gift where args.amount > 5 USD
}

template gifts(most: money where most <= 100 USD) under gifting {
  for under "user:"
  holder under "agent:"
  otherwise escalate
  allow gift where args.amount <= most and principal != "user:eve"
}
"#;

    /// The runtime (`remit-rt`, natively over the policy image) decides every request with instances as the
    /// interpreter does, byte for byte, and lists tools alike: [`case`]'s instances and requests, with more around
    /// them (other templates, ids that need escaping, a second or a repeated instance, one of a template the policy
    /// lacks, a malformed entry, more than [`MAX_GRANTS`], every way of naming the mandate, stops and approvals
    /// naming the instance). `REMIT_GRANTS_DIFF_CASES` cases (two requests each: a decision and a listing; 3,000 by
    /// default), `REMIT_GRANTS_SEED` (hex) for others. The 10⁶ run (docs/grants-design.md, step 3):
    /// `REMIT_GRANTS_DIFF_CASES=500000 cargo test --release -p remit-lang --lib eval::grants::random::the_runtime --
    /// --nocapture`.
    #[test]
    fn the_runtime_decides_instances_as_the_interpreter() {
        let mut sources = crate::stdlib::sources();
        sources.add("p.remit", POLICY);
        sources.add("more.remit", MORE);
        let checked = crate::check::check_with(sources, crate::check::Options { narrowing: false });
        let program = checked.program.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        let mut native = crate::native::Native::new(&program).expect("an image");
        let cases: usize = std::env::var("REMIT_GRANTS_DIFF_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3000);
        let seed = std::env::var("REMIT_GRANTS_SEED").ok().and_then(|v| u64::from_str_radix(&v, 16).ok());
        let mut rng = Rng(seed.unwrap_or(0x51f1_5eed_0bad_cafe) | 1);
        let ids = ["g-1", "g-1", "g\"q", "\u{e9}/2", "g-2"];
        let levels = ["pause", "cancel", "revoke", "quarantine"];
        let mut tally = std::collections::BTreeMap::<String, usize>::new();
        let started = std::time::Instant::now();
        let mut requests = 0usize;
        for _ in 0..cases {
            let Case { mut grant, subject, mut call, mut approvals, now } = case(&mut rng);
            grant["id"] = json!(rng.pick(&ids));
            let mut tool = if rng.next().is_multiple_of(6) { "refund" } else { "pay" };
            match rng.next() % 8 {
                3 => {
                    grant["template"] = json!("gifts");
                    grant["principal"] = json!(rng.pick(&["user:dana", "user:dana", "user:eve", "org:gifts"]));
                    grant["params"] = json!({"most": rng.pick(&["40.00 USD", "100.00 USD", "150.00 USD"])});
                    tool = "gift";
                    call = json!({"amount": rng.pick(&["3.00 USD", "20.00 USD", "60.00 USD"])});
                    let by = rng.pick(&["user:dana", "user:eve", "org:gifts"]);
                    approvals = json!([{"id": "ap-o", "kind": "owner", "mandate": "gifting", "tool": "gift",
                        "approved_by": by, "issued_at": "2026-11-01T00:00:00Z", "expires_at": "2028-01-01T00:00:00Z"}]);
                }
                0 => {
                    grant["template"] = json!("errands");
                    grant["params"] = json!({"budget": rng.pick(&["20.00 USD", "60.00 USD"])});
                }
                1 => {
                    grant["template"] = json!("fixed");
                    grant["holder"] = json!(rng.pick(&["agent:b", "agent:a"]));
                    grant["principal"] = json!(rng.pick(&["user:dana", "org:acme", "user:eve"]));
                    let count = rng.pick(&[json!(2), json!(0), json!(2.5), json!("2")]).clone();
                    grant["params"] = json!({"count": count, "kinds": rng.pick(&[json!(["acme"]), json!("acme")])});
                }
                2 => grant["template"] = json!("nope"),
                _ => {}
            }
            let name = format!(
                "{}/{}@{}",
                grant["template"].as_str().unwrap(),
                grant["id"].as_str().unwrap(),
                grant["version"]
            );
            let reference = format!("{}/{}", grant["template"].as_str().unwrap(), grant["id"].as_str().unwrap());
            let mut grants = vec![grant.clone()];
            match rng.next() % 12 {
                0 => grants.push(grant.clone()),
                1 => {
                    let mut other = grant.clone();
                    other["id"] = json!("g-9");
                    grants.push(other);
                }
                2 => {
                    let mut other = grant.clone();
                    other["template"] = json!("unknown");
                    grants.insert(0, other);
                }
                3 => {
                    let mut other = grant.clone();
                    other["version"] = json!(rng.pick(&[json!(-1), json!("3"), json!(1.5)]));
                    grants.push(other);
                }
                4 if rng.next().is_multiple_of(8) => grants = vec![grant.clone(); MAX_GRANTS + 1],
                5 => grants = vec![grant.clone(); MAX_GRANTS],
                _ => {}
            }
            let mut context = json!({"now": now, "grants": grants});
            match rng.next() % 7 {
                0 => {}
                1 => context["mandate"] = json!(reference),
                2 => context["mandate"] = json!(name),
                3 => context["mandate"] = json!(format!("{reference}@99")),
                4 => context["mandate"] = json!(rng.pick(&["ceiling", "side", "nope"])),
                5 => context["mandate"] = json!(7),
                _ => context["mandate"] = json!(reference),
            }
            if rng.next().is_multiple_of(4) {
                if let Some(approval) = approvals.get_mut(0) {
                    approval["mandate"] = json!(name);
                }
            }
            if rng.next().is_multiple_of(2) {
                context["approvals"] = std::mem::take(&mut approvals);
            }
            match rng.next() % 6 {
                0 => context["stops"] = json!([name]),
                1 => {
                    context["stops"] =
                        json!([{"id": rng.pick(&["s-1", "s\"2"]), "level": rng.pick(&levels), "mandate": name}])
                }
                2 => context["stops"] = json!([{"id": "s-3", "level": "quarantine", "principal": "org:acme"}]),
                3 => {
                    let on = rng.pick(&["user:dana", "user:eve", "org:gifts"]);
                    context["stops"] = json!([{"id": "s-4", "level": rng.pick(&levels), "principal": on}]);
                }
                _ => {}
            }
            if !rng.next().is_multiple_of(3) {
                let limit = rng.pick(&[json!("50.00 USD"), json!("50.00 USD"), json!(7)]).clone();
                context["principals"] = json!({"user:dana": {"limit": limit}, "org:gifts": {"limit": "500.00 USD"},
                    "org:acme": {"limit": "1.00 USD"}});
            }
            let request = json!({"subject": {"id": subject}, "action": {"name": tool, "arguments": call},
                "context": context});
            let mut text = request.to_string();
            // The same principal written with an escape, everywhere it appears (the engines compare unescaped text).
            if rng.next().is_multiple_of(4) {
                text = text.replace("\"user:dana\"", "\"user:d\\u0061na\"");
            }
            let decision = decide(&program, text.as_bytes()).to_json();
            let got = native.decide(text.as_bytes());
            assert_eq!(String::from_utf8_lossy(&got), decision, "{text}");
            let mut listing = request;
            listing.as_object_mut().unwrap().remove("action");
            let listing = listing.to_string();
            let visible = crate::eval::visible_tools(&program, listing.as_bytes()).to_json();
            assert_eq!(String::from_utf8_lossy(&native.visible_tools(listing.as_bytes())), visible, "{listing}");
            requests += 2;
            let reasons = serde_json::from_str::<Json>(&decision).unwrap()["reasons"].to_string();
            *tally.entry(reasons).or_default() += 1;
        }
        eprintln!("{requests} requests with instances, interpreter and runtime alike, in {:.1?}", started.elapsed());
        for wanted in [
            "rule.allowed",
            "approval.missing",
            "grant.invalid",
            "mandate.expired",
            "mandate.ambiguous",
            "mandate.unknown",
            "request.malformed",
            "request.missing-field",
            "stop.active",
            "subject.not-holder",
            "rule.forbidden",
        ] {
            assert!(tally.keys().any(|k| k.contains(wanted)), "no {wanted} among {tally:?}");
        }
    }
}
