//! Instances of templates (`context.grants`), the twin of `crates/remit-lang/src/eval/grants.rs` and of the
//! resolution in `eval/mod.rs` (`resolve`, `Chain::of`): which mandate or instance a request is decided under, the
//! check every decision runs again on the instance it is given, and how a decision names an instance
//! (`TEMPLATE/ID@VERSION`, a name the image cannot hold: it is written from the template's name and the request's
//! id and version). Nothing allocates: the request's grants are walked again where they are needed.

use crate::cond::{self, Env, Truth};
use crate::digest::write_canonical;
use crate::err;
use crate::image::{self, Image, Mandate, MAX_INSTANCE_DEPTH};
use crate::json::{Doc, STRING};
use crate::out::{escaped, write_escaped, write_string_tok};
use crate::request::{self, elements, Grant, Request};
use crate::value::NANOS_PER_SECOND;
use crate::Sink;

pub use crate::request::Instance;

/// The version's decimal digits: a buffer and where they start.
fn digits(mut n: u64) -> ([u8; 20], usize) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        if let Some(slot) = buf.get_mut(at) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    (buf, at)
}

impl Instance {
    fn template_name<'a>(&self, image: &Image<'a>) -> &'a [u8] {
        let t = image.template(self.template);
        image.str(t.name_off, t.name_len)
    }

    /// Whether the string token `tok` is the instance's name `TEMPLATE/ID@VERSION`.
    pub fn is_named(&self, image: &Image<'_>, doc: &Doc<'_>, tok: u32) -> bool {
        named(doc, tok, self.template_name(image), &self.grant, true)
    }

    /// Writes the instance's name as a JSON string, as `eval::write_json_string` writes `GrantInstance::name`.
    pub fn write_name(&self, image: &Image<'_>, doc: &Doc<'_>, out: &mut impl Sink) {
        out.byte(b'"');
        write_escaped(out, self.template_name(image));
        out.byte(b'/');
        for b in escaped(doc, self.grant.id) {
            out.byte(b);
        }
        out.byte(b'@');
        let (buf, at) = digits(self.grant.version);
        out.write(buf.get(at..).unwrap_or(&[]));
        out.byte(b'"');
    }

    /// Writes the instance's window as a decision names it: `valid from INSTANT until INSTANT` (each when set).
    pub fn write_window(&self, out: &mut impl Sink) {
        out.write(b"valid");
        if let Some(from) = self.valid_from {
            out.write(b" from ");
            write_instant(out, from);
        }
        if let Some(until) = self.valid_until {
            out.write(b" until ");
            write_instant(out, until);
        }
    }
}

/// Whether `tok`'s text is `TEMPLATE/ID@VERSION` (`versioned`) or `TEMPLATE/ID`.
fn named(doc: &Doc<'_>, tok: u32, template: &[u8], grant: &Grant, versioned: bool) -> bool {
    let (buf, at) = digits(grant.version);
    let version = buf.get(at..).unwrap_or(&[]);
    let head = template.iter().copied().chain(core::iter::once(b'/')).chain(doc.text(grant.id));
    if versioned {
        doc.text(tok).eq(head.chain(core::iter::once(b'@')).chain(version.iter().copied()))
    } else {
        doc.text(tok).eq(head)
    }
}

/// `value::format_instant`: RFC 3339 UTC, a fraction only when there is one (trailing zeros dropped).
pub fn write_instant(out: &mut impl Sink, nanos: i128) {
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    let fraction = nanos.rem_euclid(NANOS_PER_SECOND) as u32;
    let seconds = i64::try_from(seconds).unwrap_or(if seconds < 0 { i64::MIN } else { i64::MAX });
    let days = seconds.div_euclid(86_400);
    let rem = seconds.rem_euclid(86_400) as u32;
    let (year, month, day) = crate::time::civil_from_days(days).unwrap_or((0, 1, 1));
    write_year(out, i64::from(year));
    for (sep, n) in [
        (b'-', u32::from(month)),
        (b'-', u32::from(day)),
        (b'T', rem / 3600),
        (b':', rem % 3600 / 60),
        (b':', rem % 60),
    ] {
        out.byte(sep);
        out.byte(b'0' + (n / 10 % 10) as u8);
        out.byte(b'0' + (n % 10) as u8);
    }
    if fraction != 0 {
        out.byte(b'.');
        let mut digits = [0u8; 9];
        let mut f = fraction;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (f % 10) as u8;
            f /= 10;
        }
        let len = 9 - digits.iter().rev().take_while(|&&d| d == b'0').count();
        out.write(digits.get(..len).unwrap_or(&[]));
    }
    out.byte(b'Z');
}

/// A year as `format!("{y:04}")` writes it: at least four digits, a minus sign before a negative one.
fn write_year(out: &mut impl Sink, year: i64) {
    if year < 0 {
        out.byte(b'-');
    }
    let (buf, at) = digits(year.unsigned_abs());
    let width = 20 - at;
    for _ in width..4 {
        out.byte(b'0');
    }
    out.write(buf.get(at..).unwrap_or(&[]));
}

/// What a request is decided under: a mandate of the policy (its index), or an instance of a template (the
/// template's index and the instance).
#[derive(Clone, Copy, Debug)]
pub enum Under {
    Mandate(u32),
    Instance(u32, Grant),
}

/// Why no mandate: a reason code; `true` with `request.missing-field` when the request names none and its subject
/// holds none (`context.mandate` is then the field named missing).
pub type Unresolved = (u32, bool);

/// The grants of the request of templates the policy has, with their template's index.
fn known<'d>(image: &'d Image<'_>, doc: &'d Doc<'_>, req: &Request) -> impl Iterator<Item = (u32, Grant)> + 'd {
    let items = req.grants;
    items
        .into_iter()
        .flat_map(move |items| elements(doc, items))
        .filter_map(move |item| request::grant(doc, item))
        .filter_map(move |g| image.find_template(doc, g.template).map(|t| (t, g)))
}

/// `eval::resolve`: `context.mandate` names a mandate, or an instance as `TEMPLATE/ID` or `TEMPLATE/ID@VERSION`
/// among `context.grants` (another name is `mandate.unknown`, two instances with the name `mandate.ambiguous`).
/// Without it, the one mandate the subject holds or the one instance naming it as holder; the mandates an instance
/// hangs under are its ceiling and are not counted beside it.
pub fn resolve(image: &Image<'_>, doc: &Doc<'_>, req: &Request, mandate: Option<u32>) -> Result<Under, Unresolved> {
    let h = image.header;
    if let Some(name) = req.mandate {
        if let Some(m) = mandate {
            return Ok(Under::Mandate(m));
        }
        let mut found = None;
        let mut count = 0;
        for (t, g) in known(image, doc, req) {
            let template = image.template(t);
            let tname = image.str(template.name_off, template.name_len);
            if named(doc, name, tname, &g, false) || named(doc, name, tname, &g, true) {
                count += 1;
                found = Some(Under::Instance(t, g));
            }
        }
        return match (count, found) {
            (1, Some(under)) => Ok(under),
            (0, _) => Err((err::MANDATE_UNKNOWN, false)),
            _ => Err((err::MANDATE_AMBIGUOUS, false)),
        };
    }
    let subject = req.subject_id;
    let held = |g: &Grant| doc.text_eq(g.holder, subject);
    // Whether mandate `m` is in the chain of an instance's template's parent (a ceiling, not a mandate held).
    let shadowed = |m: u32| {
        known(image, doc, req).filter(|(_, g)| held(g)).any(|(t, _)| {
            let pseudo = image.mandate(image.template(t).mandate);
            (0..pseudo.chain_count).any(|p| image.word(pseudo.chain_off.wrapping_add(4 * p)) == m)
        })
    };
    let mut found = None;
    let mut count = 0u32;
    for m in 0..h.mandates_count {
        if count > 1 {
            break;
        }
        let record = image.mandate(m);
        if cond::is_holder(image, doc, &record, subject) && !shadowed(m) {
            count += 1;
            found = Some(Under::Mandate(m));
        }
    }
    for (t, g) in known(image, doc, req) {
        if count > 1 {
            break;
        }
        if held(&g) {
            count += 1;
            found = Some(Under::Instance(t, g));
        }
    }
    match (count, found) {
        (1, Some(under)) => Ok(under),
        (0, _) => Err((err::REQUEST_MISSING_FIELD, true)),
        _ => Err((err::MANDATE_AMBIGUOUS, false)),
    }
}

/// Why an instance is not within its template (`eval::grants::GrantRefusal`), as the parts of the rule a
/// `grant.invalid` decision names: the clause (a JSON string of the image), the field (`params.` and a parameter's
/// name when `param` is set), the location (a JSON string of the image), and the instance's value.
#[derive(Clone, Copy, Debug)]
pub struct Refusal {
    pub condition: (u32, u32),
    pub field: Field,
    pub at: (u32, u32),
    pub value: Value,
}

#[derive(Clone, Copy, Debug)]
pub enum Field {
    Template,
    /// `parent`: the link to the parent instance.
    Parent,
    Granted,
    Principal,
    Holder,
    Valid,
    /// `params.NAME`, the name an image string or a request key token.
    ParamImage(u32, u32),
    ParamToken(u32),
}

#[derive(Clone, Copy, Debug)]
pub enum Value {
    None,
    /// A string of the image, written as a JSON string.
    ImageString(u32, u32),
    /// A token of the request written as canonical JSON.
    Canonical(u32),
    /// An instant, written as a JSON string.
    Instant(i128),
}

/// The instances of a chain, root first (`eval::Chain`'s instances): the instance a request is decided under last,
/// the instances it hangs under (sub-delegation) before it. A fixed array: at most [`MAX_INSTANCE_DEPTH`].
#[derive(Clone, Copy, Debug)]
pub struct Instances {
    items: [Instance; MAX_INSTANCE_DEPTH],
    len: usize,
}

impl Instances {
    pub const NONE: Instances = Instances { items: [Instance::EMPTY; MAX_INSTANCE_DEPTH], len: 0 };

    /// The instances, root first.
    pub fn as_slice(&self) -> &[Instance] {
        self.items.get(..self.len).unwrap_or(&[])
    }

    /// The instance the request is decided under.
    pub fn leaf(&self) -> Option<&Instance> {
        self.as_slice().last()
    }

    /// The instance that decides as mandate record `m` (a [`image::MANDATE_TEMPLATE`] record), if the chain has one.
    pub fn of_mandate(&self, m: u32) -> Option<&Instance> {
        self.as_slice().iter().find(|i| i.mandate == m)
    }

    /// The instance of template `t` in the chain, if any.
    pub fn of_template(&self, t: u32) -> Option<&Instance> {
        self.as_slice().iter().find(|i| i.template == t)
    }

    /// The instance above the one of mandate record `m` (its parent instance), if any.
    pub fn parent_of(&self, m: u32) -> Option<&Instance> {
        let at = self.as_slice().iter().position(|i| i.mandate == m)?;
        self.as_slice().get(at.checked_sub(1)?)
    }

    fn push(&mut self, instance: Instance) -> bool {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = instance;
                self.len += 1;
                true
            }
            None => false,
        }
    }
}

/// How many templates deep template `t` sits (`eval::grants::depth`): 1 under a mandate, one more per template above
/// it, counted up to [`MAX_INSTANCE_DEPTH`] + 1.
fn depth(image: &Image<'_>, t: u32) -> usize {
    let mut depth = 1;
    let mut current = image.template(t);
    while current.parent_template != 0 && depth <= MAX_INSTANCE_DEPTH {
        depth += 1;
        current = image.template(current.parent_template - 1);
    }
    depth
}

/// `eval::grants::lineage`: the instances `grant` (of template `t`) hangs under, found in `context.grants` by their
/// `parent` references, and `grant` last (root first, each unchecked: `granted` and the window unset); and why the
/// first of them cannot be followed to its parent (a `parent` missing, naming no entry or another template, or two;
/// a `parent` under a mandate; a template nested too deep: then the instance alone). Each step goes one template up,
/// so the walk ends within [`MAX_INSTANCE_DEPTH`] steps.
pub fn lineage(image: &Image<'_>, doc: &Doc<'_>, req: &Request, t: u32, grant: Grant) -> (Instances, Option<Refusal>) {
    let shape = |t: u32, grant: Grant| Instance {
        template: t,
        mandate: image.template(t).mandate,
        grant,
        granted: 0,
        valid_from: None,
        valid_until: None,
    };
    // Leaf first while walking, reversed at the end.
    let mut found = Instances::NONE;
    found.push(shape(t, grant));
    let link = |t: u32, value: Value| {
        let template = image.template(t);
        Some(Refusal {
            condition: (template.parent_json_off, template.parent_json_len),
            field: Field::Parent,
            at: (template.at_json_off, template.at_json_len),
            value,
        })
    };
    let mut broken = None;
    if depth(image, t) > MAX_INSTANCE_DEPTH {
        let template = image.template(t);
        broken = Some(Refusal {
            condition: (template.parent_json_off, template.parent_json_len),
            field: Field::Template,
            at: (template.at_json_off, template.at_json_len),
            value: Value::Canonical(grant.template),
        });
    }
    while broken.is_none() {
        let top = match found.as_slice().last() {
            Some(top) => *top,
            None => break,
        };
        let template = image.template(top.template);
        let reference = top.grant.parent;
        let value = reference.map_or(Value::None, Value::Canonical);
        let (above, reference) = match (template.parent_template, reference) {
            (0, None) => break,
            (0, Some(_)) => {
                broken = link(top.template, value);
                break;
            }
            (_, None) => {
                broken = link(top.template, value);
                break;
            }
            (above, Some(reference)) => (above - 1, reference),
        };
        let record = image.template(above);
        let name = image.str(record.name_off, record.name_len);
        let mut text = doc.text(reference);
        let prefixed = name.iter().all(|&b| text.next() == Some(b)) && text.next() == Some(b'/');
        if !prefixed {
            broken = link(top.template, value);
            break;
        }
        let id_of = |g: &Grant| doc.text(reference).skip(name.len() + 1).eq(doc.text(g.id));
        let mut parent = None;
        let mut count = 0;
        for item in req.grants.into_iter().flat_map(|items| elements(doc, items)) {
            if let Some(g) = request::grant(doc, item) {
                if doc.text_is(g.template, name) && id_of(&g) {
                    count += 1;
                    parent = Some(g);
                }
            }
        }
        match (count, parent) {
            (1, Some(parent)) => {
                if !found.push(shape(above, parent)) {
                    break;
                }
            }
            // None: missing (revoked or never granted); several: ambiguous.
            _ => {
                broken = link(top.template, value);
                break;
            }
        }
    }
    let len = found.len;
    if let Some(items) = found.items.get_mut(..len) {
        items.reverse();
    }
    (found, broken)
}

/// `eval::grants::check_lineage` on the instances of `lineage` (root first; `broken` why the first cannot be followed
/// up): each instance's own checks from the leaf up ([`own`]), then the broken link, then from the root down each
/// instance's principal is its parent's, its bounds hold (`parent.NAME` reading the parent's values) and its window
/// does not end before it begins. The refusal comes with the index of the instance it is about; on success the
/// instances carry their `granted` and window.
pub fn check(
    image: &Image<'_>,
    env: &Env<'_>,
    instances: &mut Instances,
    broken: Option<Refusal>,
) -> Result<(), (usize, Refusal)> {
    let len = instances.len;
    let items = instances.items.get_mut(..len).unwrap_or(&mut []);
    for i in (0..items.len()).rev() {
        if let Some(instance) = items.get_mut(i) {
            instance.granted = own(image, env.doc, instance).map_err(|r| (i, r))?;
        }
    }
    if let Some(broken) = broken {
        return Err((0, broken));
    }
    for i in 0..items.len() {
        let parent = i.checked_sub(1).and_then(|p| items.get(p)).copied();
        let instance = match items.get_mut(i) {
            Some(instance) => instance,
            None => break,
        };
        let template = image.template(instance.template);
        if let Some(parent) = parent {
            if !env.doc.text_eq(instance.grant.principal, parent.grant.principal) {
                return Err((
                    i,
                    Refusal {
                        condition: (template.parent_json_off, template.parent_json_len),
                        field: Field::Principal,
                        at: (template.at_json_off, template.at_json_len),
                        value: Value::Canonical(instance.grant.principal),
                    },
                ));
            }
        }
        finish(image, env, instance, parent).map_err(|r| (i, r))?;
    }
    Ok(())
}

/// An instance's own checks (`eval::grants::own`): its template's name (found by it), `granted` is a timestamp, the
/// principal (not blank, admitted by `for`) and the holder (admitted by `holder`), each declared parameter has a
/// value of its type, no value for an undeclared one (the first by name). Its `granted`, in nanoseconds.
fn own(image: &Image<'_>, doc: &Doc<'_>, instance: &Instance) -> Result<i128, Refusal> {
    let grant = instance.grant;
    let template = image.template(instance.template);
    let at = (template.at_json_off, template.at_json_len);
    let refuse = |condition: (u32, u32), field: Field, value: Value| Refusal { condition, field, at, value };
    let granted = match request::timestamp_of(doc, grant.granted) {
        Some(granted) => granted,
        None => return Err(refuse((0, 0), Field::Granted, Value::Canonical(grant.granted))),
    };
    let open = template.principals_count == 0 && template.principal_prefixes_count == 0;
    let principals = (template.principals_off, template.principals_count);
    let principal_prefixes = (template.principal_prefixes_off, template.principal_prefixes_count);
    if request::is_blank(doc, grant.principal)
        || !(open || cond::holds_identity(image, doc, principals, principal_prefixes, grant.principal))
    {
        let condition = (template.for_json_off, template.for_json_len);
        return Err(refuse(condition, Field::Principal, Value::Canonical(grant.principal)));
    }
    let holders = (template.holders_off, template.holders_count);
    let holder_prefixes = (template.holder_prefixes_off, template.holder_prefixes_count);
    if !cond::holds_identity(image, doc, holders, holder_prefixes, grant.holder) {
        let condition = (template.holder_json_off, template.holder_json_len);
        return Err(refuse(condition, Field::Holder, Value::Canonical(grant.holder)));
    }
    for p in 0..template.params_count {
        let param = image.template_param(&template, p);
        let name = image.str(param.name_off, param.name_len);
        let field = Field::ParamImage(param.name_off, param.name_len);
        let declaration = (param.declaration_json_off, param.declaration_json_len);
        let at = (param.at_json_off, param.at_json_len);
        let json = match doc.get(grant.params, name) {
            Some(json) => json,
            None => return Err(Refusal { condition: declaration, field, at, value: Value::None }),
        };
        if !cond::param_ok(image, doc, json, param.ty, param.signed != 0) {
            return Err(Refusal { condition: declaration, field, at, value: Value::Canonical(json) });
        }
    }
    // The first undeclared key by name.
    let mut undeclared: Option<u32> = None;
    for key in request::elements_of_object(doc, grant.params) {
        let declared = (0..template.params_count).any(|p| {
            let param = image.template_param(&template, p);
            doc.text_is(key, image.str(param.name_off, param.name_len))
        });
        if !declared && undeclared.map_or(true, |u| doc.text_cmp(key, u) == core::cmp::Ordering::Less) {
            undeclared = Some(key);
        }
    }
    if let Some(key) = undeclared {
        let condition = (template.declared_json_off, template.declared_json_len);
        let value = doc.token(key).next;
        return Err(refuse(condition, Field::ParamToken(key), Value::Canonical(value)));
    }
    Ok(granted)
}

/// An instance's bounds, in declaration order (`parent.NAME` reads `parent`'s values), and its window: sets the
/// instance's window.
fn finish(image: &Image<'_>, env: &Env<'_>, instance: &mut Instance, parent: Option<Instance>) -> Result<(), Refusal> {
    let doc = env.doc;
    let grant = instance.grant;
    let template = image.template(instance.template);
    let bound_env = Env { instance: Some(*instance), parent, ..*env };
    for p in 0..template.params_count {
        let param = image.template_param(&template, p);
        if cond::eval(image, param.cond_off, param.cond_count, &bound_env) != Truth::True {
            let name = image.str(param.name_off, param.name_len);
            let value = doc.get(grant.params, name).map_or(Value::None, Value::Canonical);
            let condition = (param.bound_json_off, param.bound_json_len);
            let at = (param.at_json_off, param.at_json_len);
            return Err(Refusal { condition, field: Field::ParamImage(param.name_off, param.name_len), at, value });
        }
    }
    let instant = |kind: u32, lo: u32, hi: u32| match kind {
        image::BOUND_AT => Some(i128::from(image::join64(lo, hi)) * NANOS_PER_SECOND),
        image::BOUND_PARAM if lo < template.params_count => {
            let param = image.template_param(&template, lo);
            let json = doc.get(grant.params, image.str(param.name_off, param.name_len))?;
            if doc.token(json).kind() != STRING {
                return None;
            }
            request::timestamp_of(doc, json)
        }
        _ => None,
    };
    instance.valid_from = instant(template.from_kind, template.from_lo, template.from_hi);
    instance.valid_until = instant(template.until_kind, template.until_lo, template.until_hi);
    if let (Some(from), Some(until)) = (instance.valid_from, instance.valid_until) {
        if until <= from {
            let condition = (template.window_json_off, template.window_json_len);
            let at = (template.window_at_json_off, template.window_at_json_len);
            return Err(Refusal { condition, field: Field::Valid, at, value: Value::Instant(until) });
        }
    }
    Ok(())
}

/// Writes the `grant.invalid` rule: `{"mandate":INSTANCE,"rule":C,"at":…,"failed":{"condition":C,"attribute":F,
/// "value":V}}`.
pub fn write_refusal(
    image: &Image<'_>,
    doc: &Doc<'_>,
    instance: &Instance,
    refusal: &Refusal,
    keys: &mut [u32],
    out: &mut impl Sink,
) {
    let condition = |out: &mut dyn FnMut(&[u8])| match refusal.field {
        Field::Granted => out(b"\"granted: timestamp\""),
        _ => out(image.str(refusal.condition.0, refusal.condition.1)),
    };
    out.write(b"{\"mandate\":");
    instance.write_name(image, doc, out);
    out.write(b",\"rule\":");
    condition(&mut |b| out.write(b));
    out.write(b",\"at\":");
    out.write(image.str(refusal.at.0, refusal.at.1));
    out.write(b",\"failed\":{\"condition\":");
    condition(&mut |b| out.write(b));
    out.write(b",\"attribute\":");
    match refusal.field {
        Field::Template => out.write(b"\"template\""),
        Field::Parent => out.write(b"\"parent\""),
        Field::Granted => out.write(b"\"granted\""),
        Field::Principal => out.write(b"\"principal\""),
        Field::Holder => out.write(b"\"holder\""),
        Field::Valid => out.write(b"\"valid\""),
        Field::ParamImage(off, len) => {
            out.write(b"\"params.");
            write_escaped(out, image.str(off, len));
            out.byte(b'"');
        }
        Field::ParamToken(key) => {
            out.write(b"\"params.");
            for b in escaped(doc, key) {
                out.byte(b);
            }
            out.byte(b'"');
        }
    }
    match refusal.value {
        Value::None => {}
        Value::ImageString(off, len) => {
            out.write(b",\"value\":");
            crate::out::write_string(out, image.str(off, len));
        }
        Value::Canonical(tok) => {
            out.write(b",\"value\":");
            if doc.token(tok).kind() == STRING {
                write_string_tok(out, doc, tok);
            } else {
                write_canonical(out, doc, tok, keys, 0);
            }
        }
        Value::Instant(at) => {
            out.write(b",\"value\":\"");
            write_instant(out, at);
            out.byte(b'"');
        }
    }
    out.write(b"}}");
}

/// Whether `mandate` is the record a template's instances decide as ([`image::MANDATE_TEMPLATE`]).
pub fn is_template(mandate: &Mandate) -> bool {
    mandate.flags & image::MANDATE_TEMPLATE != 0
}
