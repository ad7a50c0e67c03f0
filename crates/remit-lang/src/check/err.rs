//! Wording of every checker diagnostic, in one place. Style: lowercase, no final period, user input in backticks.

use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::Type;
use crate::source::Span;

fn suggest(d: Diagnostic, name: &str, candidates: &[&str], fallback: &str) -> Diagnostic {
    match did_you_mean(name, candidates.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d.help(fallback.to_string()),
    }
}

pub fn shadows_library(name: &str, what: &str, span: Span, library_what: &str, library: Span) -> Diagnostic {
    let theirs = if what == library_what { String::new() } else { format!(" (a {library_what} there)") };
    Diagnostic::warning(
        "remit::shadows-library",
        format!("{what} `{name}` shadows the standard library's `{name}`{theirs}"),
    )
    .label(span, format!("this policy's `{name}`: every rule of the policy that names `{name}` means this one"))
    .label(library, "the standard library's, which this policy's rules no longer reach")
    .help(format!(
        "a policy's own definitions win, so that a policy keeps checking when the library adds a name it uses; \
         the library's tools stay out of this policy's `{name}`. Rename yours to reach the library's as well"
    ))
}

pub fn duplicate_definition(what: &str, name: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-definition", format!("`{name}` is defined more than once"))
        .label(span, format!("{what} `{name}` defined again here"))
        .label(first, "first defined here")
        .help(match what {
            "variant" => "the variants of an enum must be distinct",
            "level" => "each level appears once on the impact scale",
            "context attribute" => "declare each context attribute once, with one type",
            _ => "tools, effect classes, kinds, enums, approval kinds, mandates and templates share one namespace (a policy's own definition shadows the standard library's)",
        })
}

pub fn mandate_expired(name: &str, until: i64, now: i64, span: Span) -> Diagnostic {
    let ago = crate::value::duration_in_words(now.abs_diff(until));
    let until = crate::value::format_timestamp(until);
    Diagnostic::warning("remit::mandate-expiring", format!("mandate `{name}` expired on {until}, {ago} ago"))
        .label(span, format!("valid until {until}"))
        .help(format!(
            "every call under it and its sub-mandates is denied `mandate.expired`; extend its window or remove it \
         (checked at {}: `--now`, `SOURCE_DATE_EPOCH` or the system clock)",
            crate::value::format_timestamp(now)
        ))
}

pub fn mandate_expiring(name: &str, until: i64, now: i64, horizon: u64, span: Span) -> Diagnostic {
    let left = crate::value::duration_in_words(until.abs_diff(now));
    let until = crate::value::format_timestamp(until);
    Diagnostic::warning("remit::mandate-expiring", format!("mandate `{name}` expires on {until}, in {left}"))
        .label(span, format!("valid until {until}"))
        .help(format!(
            "from then on every call under it and its sub-mandates is denied `mandate.expired`; extend its window \
             before then (warned within `--expiry-horizon` {} of {}: `--now`, `SOURCE_DATE_EPOCH` or the system \
             clock)",
            crate::value::duration_in_words(horizon),
            crate::value::format_timestamp(now)
        ))
}

pub fn duplicate_parameter(name: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-parameter", format!("parameter `{name}` is declared twice"))
        .label(span, "declared again here")
        .label(first, "first declared here")
        .help("rename or remove one of the parameters")
}

/// `what`: "parameter" or "context attribute".
pub fn signed_not_money(what: &str, name: &str, ty: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::signed-not-money", format!("{what} `{name}` is `{ty}`, which cannot be `signed`"))
        .label(span, "only money may be signed")
        .help("`signed` lets money be negative; other types keep their own range: remove `signed`")
}

pub fn unknown_target_argument(name: &str, tool: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-target-argument", format!("tool `{tool}` has no parameter `{name}`"))
        .label(span, "the target must be one of the tool's parameters");
    suggest(d, name, candidates, "declare the parameter in the tool's `(…)`, or name one that is declared")
}

pub fn target_not_string(name: &str, ty: &str, span: Span, declared: Span) -> Diagnostic {
    Diagnostic::error("remit::target-not-string", format!("parameter `{name}` is `{ty}`, so it cannot be a target"))
        .label(span, "named as the target here")
        .label(declared, format!("declared `{ty}` here"))
        .help("a target is an identifier (`resource.id` is a string): name a `string` parameter (or one of a `kind`)")
}

pub fn duplicate_target(tool: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-target", format!("tool `{tool}` names its target twice"))
        .label(span, "named again here")
        .label(first, "first named here")
        .help("a call has one target: keep one `target args.NAME`")
}

/// `other`: what `name` is when it is declared, but not as a resource type (`a subject type`).
pub fn unknown_resource_type(
    name: &str,
    tool: &str,
    span: Span,
    other: Option<&str>,
    candidates: &[&str],
) -> Diagnostic {
    let d = Diagnostic::error(
        "remit::unknown-resource-type",
        format!("tool `{tool}` acts on `{name}`, which is not a declared resource type"),
    );
    let d = match other {
        Some(other) => d.label(span, format!("`{name}` is {other}: a tool acts on resources")),
        None => d.label(span, "no `resource` declaration has this name"),
    };
    suggest(
        d,
        name,
        candidates,
        &format!("declare the type's attributes with `resource {name} {{ … }}`, or name one that is declared"),
    )
}

pub fn duplicate_resource_type(tool: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-resource-type", format!("tool `{tool}` names its resource type twice"))
        .label(span, "named again here")
        .label(first, "first named here")
        .help("a tool acts on resources of one type (its target is one resource): keep one `resource TYPE`")
}

pub fn duplicate_levels(span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-levels", "the impact scale is declared more than once")
        .label(span, "second scale")
        .label(first, "first scale")
        .help("a policy set has one ordered scale of impact levels; the standard library declares it")
}

pub fn unknown_effect(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-effect", format!("unknown effect class `{name}`"))
        .label(span, "no effect class has this name");
    suggest(d, name, candidates, "declare it with `effect NAME` or use a class of the standard library")
}

pub fn not_an_effect(name: &str, found: &str, span: Span, decl: Span) -> Diagnostic {
    Diagnostic::error("remit::not-an-effect", format!("`{name}` is {found}, not an effect class"))
        .label(span, "an effect class is expected here")
        .label(decl, format!("`{name}` is declared as {found} here"))
        .help("`effects` lists equivalent-action classes; a tool cannot be a member of another tool")
}

pub fn unknown_target(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-tool", format!("unknown tool or effect class `{name}`"))
        .label(span, "not declared in the catalog or the standard library");
    suggest(d, name, candidates, "declare the tool with `tool NAME(…)` or name an effect class")
}

/// A `classify` declaration names something that is not a declared tool.
pub fn unknown_tool(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-tool", format!("unknown tool `{name}`"))
        .label(span, "not declared in the catalog or the standard library");
    suggest(d, name, candidates, "`classify` puts tools (the policy's or the standard library's) into classes")
}

pub fn not_a_tool(name: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::not-a-tool", format!("`{name}` is {found}, not a tool"))
        .label(span, "a tool is expected here")
        .help("`classify TOOL, … as CLASS, …` puts tools into classes; a class cannot be a member of another class")
}

pub fn unnamed_library_tools(class: &str, tools: &[&str], span: Span) -> Diagnostic {
    let quoted: Vec<String> = tools.iter().map(|t| format!("`{t}`")).collect();
    Diagnostic::warning(
        "remit::class-grant-unnamed-tools",
        format!(
            "`allow {class}` also grants {} from the standard library, which this policy never names",
            quoted.join(", ")
        ),
    )
    .label(span, format!("grants every member of `{class}`"))
    .help(format!(
        "a class grant covers every member, the standard library's included: grant the tools you mean by name, forbid \
         the others, or acknowledge them with `classify {} as {class}`",
        tools.join(", ")
    ))
}

pub fn invalid_tool_name(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::invalid-tool-name", format!("`{name}` cannot be a tool name"))
        .label(span, "not a tool name")
        .help(
            "a tool name is what requests carry in `action.name`: 1 to 128 ASCII letters, digits and `_ - . / :`; \
             quote it when it is not an identifier (`tool \"github/create_issue\"(…)`)",
        )
}

pub fn invalid_fact_version(version: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::invalid-fact-version", format!("`{version:?}` cannot be a fact version"))
        .label(span, "this fact's version")
        .help(
            "a version is a whole number (`at version 7`) or a string compared exactly (`at version \"v3.2\"`); \
             a blank string names no version, and digits alone are written as a number, as gateways publish them",
        )
}

pub fn not_a_target(name: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::not-a-tool", format!("`{name}` is {found}, not a tool or an effect class"))
        .label(span, "a tool or an effect class is expected here")
        .help("rules apply to a tool, an effect class, `any tool` or `side effects`")
}

pub fn unknown_level(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-level", format!("`{name}` is not a level of the impact scale"))
        .label(span, "not on the scale");
    let scale = candidates.join(" < ");
    suggest(d, name, candidates, &format!("the scale is {scale}"))
}

pub fn unknown_type(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-type", format!("unknown type `{name}`")).label(span, "not a type");
    suggest(
        d,
        name,
        candidates,
        "types are string, int, decimal, money, bool, timestamp, duration, set<T>, or a declared kind or enum",
    )
}

pub fn not_a_type(name: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::not-a-type", format!("`{name}` is {found}, not a type"))
        .label(span, "a type is expected here")
        .help("types are string, int, decimal, money, bool, timestamp, duration, set<T>, or a declared kind or enum")
}

pub fn quoted_level(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::type-mismatch",
        format!("`level` is compared with levels, not with the string `\"{name}\"`"),
    )
    .label(span, "a level name is expected here")
    .help(format!("write the level without quotes: `level <= {name}`"))
}

pub fn nested_set(span: Span) -> Diagnostic {
    Diagnostic::error("remit::nested-set", "sets of sets are not supported")
        .label(span, "nested set type")
        .help("use a set of scalar values, e.g. `set<string>`")
}

pub fn too_many_rules(mandate: &str, tool: &str, room: usize, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::too-many-rules",
        format!("`{mandate}` and its parents have more than {room} rules for `{tool}`"),
    )
    .label(span, format!("rule {} for `{tool}` along the chain of `{mandate}`", room + 1))
    .help(
        "a decision collects every rule of the called tool along the mandate chain: at most 4,096 entries, four of \
         them per mandate of the chain (validity, stop, level, `otherwise`); merge rules (`forbid t where a or b`) \
         or split the mandate",
    )
}

pub fn policy_too_large(what: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::policy-too-large", format!("the policy has {what}: a module cannot hold it"))
        .label(span, "past the limit here")
        .help("split the policy into several modules (by principal, for example); docs/language.md lists the limits")
}

pub fn unknown_approval(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-approval", format!("unknown approval kind `{name}`"))
        .label(span, "no approval kind has this name");
    suggest(d, name, candidates, "declare it with `approval NAME { binds …; ttl … }`")
}

pub fn not_an_approval(name: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::not-an-approval", format!("`{name}` is {found}, not an approval kind"))
        .label(span, "an approval kind is expected here")
        .help("a gate names the kind of approval it needs, e.g. `require approval human_publication for …`")
}

pub fn unknown_binding(name: &str, span: Span) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-binding", format!("an approval cannot be bound to `{name}`"))
        .label(span, "unknown binding");
    suggest(d, name, &["tool", "target", "arguments", "manifest"], "bindings are tool, target, arguments and manifest")
}

pub fn unbound_approval(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::unbound-approval", format!("approval kind `{name}` is bound to nothing"))
        .label(span, "no `binds` clause")
        .help("an unbound approval could be replayed for any call; add `binds tool, target, arguments` or `binds manifest`")
}

pub fn missing_ttl(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::missing-ttl", format!("approval kind `{name}` has no time-to-live"))
        .label(span, "no `ttl` clause")
        .help("approvals expire; add e.g. `ttl 900s`")
}

pub fn zero_ttl(name: &str, span: Span, gates: Vec<Span>) -> Diagnostic {
    // Also reported without gates: a kind nobody can use is a mistake waiting for its first gate.
    let mut d = Diagnostic::error(
        "remit::unsatisfiable-gate",
        format!("approval kind `{name}` expires the moment it is issued"),
    )
    .label(span, "a time-to-live of zero")
    .help("no approval of this kind can ever be valid, so every gate on it escalates forever; give it a positive ttl");
    for g in gates {
        d = d.label(g, "this gate can never be satisfied");
    }
    d
}

pub fn gate_without_manifest(approval: &str, tool: &str, span: Span, binds: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::unsatisfiable-gate",
        format!("gate `{approval}` can never be satisfied for tool `{tool}`"),
    )
    .label(span, format!("`{tool}` has no `manifest: string` parameter"))
    .label(binds, "the approval kind is bound to a manifest")
    .help("approvals bound to a manifest compare it with the call's `manifest` argument; gate tools that publish a manifest, or bind the approval to `arguments`")
}

pub fn missing_class_parameter(tool: &str, class: &str, param: &str, span: Span, class_span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::missing-class-parameter",
        format!("tool `{tool}` is in class `{class}` but has no parameter `{param}`"),
    )
    .label(span, format!("add `{param}` to this tool"))
    .label(class_span, format!("`{class}` declares `{param}`"))
    .help("rules on a class constrain the class's parameters, so every member must have them")
}

pub fn class_parameter_type(
    tool: &str,
    param: &str,
    found: &str,
    expected: &str,
    span: Span,
    class_span: Span,
) -> Diagnostic {
    Diagnostic::error(
        "remit::class-parameter-type",
        format!("parameter `{param}` of tool `{tool}` is `{found}`, but its class declares `{expected}`"),
    )
    .label(span, format!("expected `{expected}`"))
    .label(class_span, "declared here")
    .help("a member tool's parameter must have the class parameter's type")
}

pub fn unknown_attribute(name: &str, span: Span) -> Diagnostic {
    if name == "args" || name == "context" {
        return Diagnostic::error("remit::unknown-attribute", format!("`{name}` needs a field"))
            .label(span, "which one?")
            .help(format!("name the field: `{name}.NAME`"));
    }
    let candidates = ["args", "resource.id", "subject.id", "subject.scopes", "context", "now", "attempt", "level"];
    let d = Diagnostic::error("remit::unknown-attribute", format!("unknown attribute `{name}`"))
        .label(span, "not an attribute of a request");
    suggest(
        d,
        name,
        &candidates,
        "attributes are args.NAME, resource.id, subject.id, subject.scopes, context.NAME, now, attempt and level",
    )
}

pub fn unknown_parameter(param: &str, target: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-parameter", format!("`{target}` has no parameter `{param}`"))
        .label(span, "no such parameter");
    let fallback = if candidates.is_empty() {
        format!("`{target}` declares no parameters")
    } else {
        format!("the parameters of `{target}` are: {}", list_or_none(candidates))
    };
    suggest(d, param, candidates, &fallback)
}

pub fn arguments_on_broad_target(attr: &str, target: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::arguments-without-tool", format!("`{attr}` cannot be used on `{target}`"))
        .label(span, "arguments depend on the tool")
        .help("constrain arguments on a tool, or on an effect class that declares the parameter")
}

pub fn unknown_context(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-context", format!("context attribute `{name}` is not declared"))
        .label(span, "undeclared context attribute");
    suggest(d, name, candidates, &format!("declare it with `context {name}: TYPE`"))
}

pub fn type_mismatch(attr: &str, expected: &str, found: &str, span: Span, attr_span: Span) -> Diagnostic {
    Diagnostic::error("remit::type-mismatch", format!("`{attr}` is `{expected}`, but the value is {found}"))
        .label(span, format!("expected a value of type `{expected}`"))
        .label(attr_span, format!("of type `{expected}`"))
        .help(format!("compare `{attr}` with a value of type `{expected}`"))
}

pub fn unknown_variant(value: &str, enum_name: &str, span: Span, variants: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-variant", format!("`{value}` is not a variant of enum `{enum_name}`"))
        .label(span, "unknown variant");
    suggest(d, value, variants, &format!("the variants are: {}", variants.join(", ")))
}

pub fn invalid_operator(op: &str, ty: &str, span: Span, help: &str) -> Diagnostic {
    Diagnostic::error("remit::invalid-operator", format!("`{op}` cannot be applied to a `{ty}` value"))
        .label(span, format!("`{op}` on `{ty}`"))
        .help(help.to_string())
}

pub fn not_a_condition(attr: &str, ty: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::not-a-condition", format!("`{attr}` is `{ty}`, not a condition"))
        .label(span, "a bool is expected here")
        .help(format!("compare it with a value, e.g. `{attr} == …`"))
}

pub fn unsatisfiable(what: &str, denies_everything: bool, span: Span) -> Diagnostic {
    Diagnostic::error("remit::unsatisfiable-condition", format!("this {what} condition can never be true"))
        .label(span, "no request satisfies this")
        .help(if denies_everything {
            "two of its comparisons contradict each other, so every call it covers would be denied"
        } else {
            "two of its comparisons contradict each other; the rule would never apply"
        })
}

pub fn lint_incomplete(what: &str, question: &str, span: Span) -> Diagnostic {
    Diagnostic::warning("remit::lint-incomplete", format!("this {what} is too large to check {question}"))
        .label(span, "not fully checked")
        .help(
            "the check expands a condition into alternatives (`a and (b or c)` has two) and stops past 4,096, so a \
             contradiction here could go unnoticed: split the rule into several rules with smaller conditions",
        )
}

pub fn dead_grant(target: &str, span: Span, forbid: Span) -> Diagnostic {
    Diagnostic::warning("remit::dead-grant", format!("this grant of `{target}` is cancelled by a prohibition"))
        .label(span, "every call this allows …")
        .label(forbid, "… is forbidden here")
        .help("prohibitions always win; remove the grant or narrow the prohibition")
}

/// `tools`: every tool the grant reaches that administers mandates (at least one); `tool_span` is the first one's.
pub fn ungrantable(tools: &[&str], span: Span, tool_span: Span) -> Diagnostic {
    let quoted: Vec<String> = tools.iter().map(|t| format!("`{t}`")).collect();
    let (through, label) = match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => (
            format!("{} and {last}", rest.join(", ")),
            format!("grants {} tools that administer mandates", tools.len()),
        ),
        _ => (quoted.concat(), "grants a tool that administers mandates".to_string()),
    };
    Diagnostic::error(
        "remit::ungrantable-mandate-change",
        format!("this grant would let an agent change mandates through {through}"),
    )
    .label(span, label)
    .label(tool_span, "declared `administers mandates` here")
    .help(
        "no agent may hold the right to widen its own terms; mandates are changed by their owners, not through grants",
    )
}

pub fn unknown_parent(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-mandate", format!("unknown parent mandate `{name}`"))
        .label(span, "no mandate has this name");
    suggest(d, name, candidates, "a delegated mandate names an existing mandate after `under`")
}

pub fn delegation_cycle(names: &[String], span: Span) -> Diagnostic {
    Diagnostic::error("remit::delegation-cycle", format!("mandates delegate in a cycle: {}", names.join(" → ")))
        .label(span, "this mandate is its own ancestor")
        .help("every delegation chain must end at a root mandate declared with `for \"PRINCIPAL\"`")
}

pub fn holder_outside_parent(
    name: &str,
    parent: &str,
    outside: &[String],
    span: Span,
    parent_span: Span,
) -> Diagnostic {
    Diagnostic::error(
        "remit::holder-outside-parent",
        format!(
            "`{name}` is held by {} outside `{parent}`'s holders",
            outside.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ")
        ),
    )
    .label(span, "held by agents its parent's namespace does not contain")
    .label(parent_span, "held by `holder under` patterns")
    .help(
        "a parent held by `holder under \"…\"` is a namespace of agents: give its sub-mandates holders inside it (an \
         id under one of its prefixes, or a prefix that extends one)",
    )
}

pub fn delegation_too_deep(name: &str, ancestor: &str, depth: u32, span: Span, depth_span: Span) -> Diagnostic {
    Diagnostic::error("remit::delegation-too-deep", format!("`{name}` is delegated deeper than `{ancestor}` allows"))
        .label(span, "this mandate is too far below it")
        .label(
            depth_span,
            match depth {
                1 => "allows one level of delegation below it".to_string(),
                n => format!("allows {n} levels of delegation below it"),
            },
        )
        .help("shorten the chain or raise the ancestor's `delegation depth`")
}

pub fn missing_principal(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::missing-principal", format!("root mandate `{name}` does not say on whose behalf it acts"))
        .label(span, "no principal")
        .help(format!("write `mandate {name} for \"PRINCIPAL\" {{ … }}`, or derive it with `under PARENT`"))
}

pub fn sub_mandate_principal(name: &str, parent: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::sub-mandate-principal",
        format!("sub-mandate `{name}` acts for its parent's principal: `for` is not allowed with `under {parent}`"),
    )
    .label(span, format!("`{name}` acts for the principal of `{parent}`"))
    .help(format!(
        "remove the `for`: a sub-mandate inherits its principal from the root of its chain; to act for another \
         principal, declare a root mandate `mandate {name} for \"PRINCIPAL\" {{ … }}`"
    ))
}

pub fn missing_holder(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::missing-holder", format!("mandate `{name}` has no holder"))
        .label(span, "nobody holds this mandate")
        .help("add `holder \"agent:…\"`: the agent that acts under it")
}

pub fn holder_pattern_empty(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::holder-pattern-empty", format!("`holder under \"\"` lets every subject hold `{name}`"))
        .label(span, "every id starts with the empty prefix")
        .help("name the agents' namespace, e.g. `holder under \"agent:club/\"`, or list them with `holder \"agent:…\"`")
}

pub fn approver_pattern_empty(kind: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::approver-pattern-empty", format!("`approved by under \"\"` lets anyone grant `{kind}`"))
        .label(span, "every identity starts with the empty prefix")
        .help("name the approvers' namespace, e.g. `approved by under \"role:finance/\"`, or leave `approved by` out")
}

pub fn holder_pattern_open(prefix: &str, span: Span) -> Diagnostic {
    Diagnostic::warning(
        "remit::holder-pattern-open",
        format!("the holder pattern `{prefix}` also matches ids that only begin like it (`{prefix}x`)"),
    )
    .label(span, "does not end with `/` or `:`")
    .help(format!("end the prefix with a separator: `holder under \"{prefix}/\"`"))
}

pub fn duplicate_clause(clause: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::duplicate-clause", format!("`{clause}` is stated twice in one mandate"))
        .label(span, "stated again here")
        .label(first, "first stated here")
        .help("keep one; a mandate has one value for it")
}

pub fn empty_window(span: Span) -> Diagnostic {
    Diagnostic::error("remit::empty-validity-window", "the validity window is empty")
        .label(span, "`from` is not before `until`")
        .help("a mandate is valid from its `from` instant (included) until its `until` instant (excluded)")
}

pub fn conflicting_fact(name: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::conflicting-fact-version", format!("fact `{name}` is required at two different versions"))
        .label(span, "this version …")
        .label(first, "… contradicts this one")
        .help("a request carries one version of a fact, so one of the two requirements always fails")
}

pub fn empty_list(span: Span) -> Diagnostic {
    Diagnostic::error("remit::empty-list", "a list of values must not be empty")
        .label(span, "empty list")
        .help("`in []` is never true and `within []` only holds for the empty set; say what you mean with values")
}

pub fn currency_mismatch(attr: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error("remit::currency-mismatch", format!("`{attr}` is compared with amounts in two currencies"))
        .label(span, "this currency …")
        .label(first, "… differs from this one")
        .help("remit never converts currencies; write one rule per currency")
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
    }
}

pub fn reserved_attribute(role: &str, name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::reserved-attribute", format!("`{role}.{name}` is a field of every request"))
        .label(span, "reserved name")
        .help("`id`, `scopes`, `type` and `properties` are the request's own fields: choose another name")
}

pub fn conflicting_attribute_type(
    role: &str,
    name: &str,
    ty: &Type,
    span: Span,
    other: &Type,
    other_span: Span,
) -> Diagnostic {
    Diagnostic::error(
        "remit::conflicting-attribute-type",
        format!("`{role}.{name}` is declared as `{}` and as `{}`", ty.display(), other.display()),
    )
    .label(span, format!("`{}` here", ty.display()))
    .label(other_span, format!("`{}` here", other.display()))
    .help(format!(
        "a condition reads `{role}.{name}` whatever the {role}'s type, so every type must declare it alike: rename one"
    ))
}

pub fn second_principal_type(name: &str, span: Span, first: &str, first_span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::second-principal-type",
        format!("principal type `{name}` is declared beside `{first}`"),
    )
    .label(span, "a second principal type")
    .label(first_span, format!("`{first}` declared here"))
    .help(format!(
        "a policy's mandates have principals of one type: declare every principal attribute in `principal {first} {{ … }}`"
    ))
}

pub fn principal_from_properties(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::principal-from-properties", format!("`principal.{name}` cannot come from `properties`"))
        .label(span, "principal attributes come from the gateway's data")
        .help(format!(
            "the enforcement point does not know the mandate's principal and the agent is never a source: drop `from \
         properties` (a principal attribute is always `from data`) and load `{name}` as data of the principal type"
        ))
}

pub fn relation_parameter(relation: &str, ty: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::relation-parameter", format!("relation `{relation}` cannot relate `{ty}` values"))
        .label(span, "not an identifier type")
        .help("a relation relates identifiers: `string` or a declared `kind`")
}

pub fn unknown_entity_attribute(role: &str, name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-attribute", format!("`{role}.{name}` is not declared"))
        .label(span, format!("no {role} type declares `{name}`"));
    let full: Vec<String> = candidates.iter().map(|c| format!("{role}.{c}")).collect();
    let full: Vec<&str> = full.iter().map(String::as_str).collect();
    suggest(d, &format!("{role}.{name}"), &full, &format!("declare it: `{role} TYPE {{ {name}: TYPE }}`"))
}

pub fn unknown_relation(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-relation", format!("relation `{name}` is not declared"))
        .label(span, "undeclared relation");
    suggest(d, name, candidates, &format!("declare it: `relation {name}(string, string)`"))
}

pub fn relation_arity(name: &str, expected: usize, found: usize, span: Span, declared: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::relation-arity",
        format!("relation `{name}` relates {expected} values, but {found} are given"),
    )
    .label(span, format!("{found} given"))
    .label(declared, "declared here")
    .help("give one term per parameter of the relation")
}

pub fn attribute_types_differ(left: &str, left_ty: &Type, right: &str, right_ty: &Type, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::type-mismatch",
        format!("`{left}` is `{}`, but `{right}` is `{}`", left_ty.display(), right_ty.display()),
    )
    .label(span, "values of different types")
    .help("compare attributes of one type (money with money, timestamps with timestamps, identifiers with identifiers)")
}

pub fn unknown_term(name: &str, span: Span) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-term", format!("`{name}` is not a value here")).label(span, "not a term");
    suggest(
        d,
        name,
        &["principal", "subject", "resource"],
        "write `principal`, `subject`, `resource`, an attribute (`resource.owner`) or a string",
    )
}

pub fn principal_unknown(span: Span) -> Diagnostic {
    Diagnostic::error("remit::principal-unknown", "this mandate has no principal to compare with")
        .label(span, "`principal` of a mandate without `for \"…\"`")
        .help("give the root mandate a principal: `mandate NAME for \"user:…\" { … }`")
}

pub fn attribute_not_allowed(attr: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::attribute-not-allowed", format!("`{attr}` cannot be used here"))
        .label(span, "a literal is needed here")
        .help("`contains` and `within` take literals; compare two attributes with `==`, `<`, … or `in`")
}

pub fn unknown_zone(message: &str, help: Option<String>, span: Span) -> Diagnostic {
    Diagnostic::error("remit::unknown-zone", message.to_string())
        .label(span, "not a zone of the IANA time zone database")
        .help(
            help.unwrap_or_else(|| "name the zone as the tz database does: `Europe/Berlin`, `America/New_York`".into()),
        )
}

pub fn calendar_hours(message: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::calendar-hours", message.to_string())
        .label(span, "not a range of the day")
        .help("hours are `HH:MM-HH:MM` from 00:00 to 24:00; an end before the start runs past midnight")
}

pub fn calendar_date(message: &str, label: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::calendar-date", message.to_string()).label(span, label.to_string()).help(
        "dates are local dates in the calendar's zone, `YYYY-MM-DD` (`2026-12-24`); a range `FIRST..LAST` includes \
         both and does not end before it starts",
    )
}

pub fn unknown_calendar(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-calendar", format!("calendar `{name}` is not declared"))
        .label(span, "undeclared calendar");
    suggest(
        d,
        name,
        candidates,
        &format!("declare it: `calendar {name} in \"Europe/Berlin\" {{ mon..fri 09:00-17:00 }}`"),
    )
}

pub fn not_a_timestamp(attr: &str, ty: &Type, span: Span) -> Diagnostic {
    Diagnostic::error("remit::type-mismatch", format!("`{attr}` is `{}`, not a timestamp", ty.display()))
        .label(span, "a timestamp is needed here")
        .help("calendars and the time between two instants apply to timestamps (`now`, a `timestamp` argument)")
}

// Templates (docs/language.md, "Templates").

pub fn template_narrowing_unproved(name: &str, parent: &str, why: &str, span: Span) -> Diagnostic {
    let help = format!(
        "the proof could not decide whether every instance within the bounds stays within `{parent}` \
         (docs/narrowing.md, \"Templates\"), so the template is not marked proved; restate `{parent}`'s terms in \
         it, or bound its parameters by `{parent}`'s literals (or, under a template, by `parent.NAME`)"
    );
    Diagnostic::warning(
        "remit::template-narrowing-unproved",
        format!("template `{name}` is not proved to narrow `{parent}`"),
    )
    .label(span, format!("not decided: {why}"))
    .help(help)
}

/// A template some instance of which widens its parent: the sub-mandate report of the instance (`finding`),
/// worded for the template and naming the instance's parameters.
pub fn template_widens(finding: Diagnostic, name: &str, parent: &str, instance: &str) -> Diagnostic {
    let mut d = finding;
    d.code = "remit::template-widens";
    d.message = format!("template `{name}` may widen `{parent}`: {}, with {instance}", d.message);
    let help = d.help.take().unwrap_or_default().replace("the sub-mandate's", "the template's").replace(
        &format!("allowed by `{name}` on its own"),
        &format!("allowed by the instance of `{name}` with these parameters on its own"),
    );
    d.help = Some(format!("{help}; or bound the parameters so that no instance goes past `{parent}`"));
    d
}

pub fn template_depth(name: &str, parent: &str, depth: Option<u32>, span: Span, parent_span: Span) -> Diagnostic {
    let depth = depth.unwrap_or(0);
    Diagnostic::error(
        "remit::template-widens",
        format!("template `{name}` may widen `{parent}`: its instances may delegate as deep as `{parent}`"),
    )
    .label(span, format!("instances of `{name}` sit one level below `{parent}`"))
    .label(parent_span, format!("`{parent}` allows delegation {depth} deep"))
    .help(format!("restate `delegation depth {}` (or less) in `{name}`", depth.saturating_sub(1)))
}

pub fn unknown_template_parameter(name: &str, template: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error(
        "remit::unknown-template-parameter",
        format!("template `{template}` has no parameter `{name}`"),
    )
    .label(span, "not a parameter of the template, nor an attribute of a request");
    suggest(d, name, candidates, "declare it in the template's parameter list: `NAME: TYPE where …`")
}

pub fn bound_not_parameter(attr: &str, param: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::bound-not-parameter",
        format!("the bound of `{param}` reads `{attr}`, which is not a parameter"),
    )
    .label(span, "a bound is checked when an instance is granted, when there is no request")
    .help(
        "a bound may read the template's parameters and `granted` (the instant of the grant); \
         conditions on requests belong in the template's rules",
    )
}

pub fn parent_parameter_not_allowed(attr: &str, within: Option<&str>, span: Span) -> Diagnostic {
    let message = match within {
        Some(template) => format!("template `{template}` reads `{attr}`, but its parent is not a template"),
        None => format!("`{attr}` is read outside a template"),
    };
    Diagnostic::error("remit::parent-parameter-not-allowed", message)
        .label(span, "there is no parent instance to read it from")
        .help(
            "`parent.NAME` reads a declared parameter of the parent instance, in a template under a template \
             (`template errand(…) under personal_shopping`); a mandate, or a template under a mandate, has no \
             parent instance: write the value",
        )
}

pub fn unknown_parent_parameter(name: &str, parent: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error(
        "remit::unknown-parent-parameter",
        format!("the parent template `{parent}` has no parameter `{name}`"),
    )
    .label(span, "not a declared parameter of the parent template");
    let fallback = if candidates.is_empty() {
        format!("`{parent}` declares no parameter; `parent.NAME` reads one of its declared parameters")
    } else {
        format!("`parent.NAME` reads one of `{parent}`'s declared parameters: {}", candidates.join(", "))
    };
    let qualified: Vec<String> = candidates.iter().map(|c| format!("parent.{c}")).collect();
    suggest(d, &format!("parent.{name}"), &qualified.iter().map(String::as_str).collect::<Vec<_>>(), &fallback)
}

pub fn reserved_parameter(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::reserved-parameter", format!("`{name}` cannot name a template parameter"))
        .label(span, "a reserved name")
        .help(
            "`principal`, `holder` and `granted` are every instance's own (its principal, its holder, when it was \
             granted); `now`, `attempt`, `level`, `args`, `context`, `subject` and `resource` are a request's",
        )
}

pub fn template_as_mandate(name: &str, what: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::template-as-mandate", format!("`{name}` is a template, not a mandate"))
        .label(span, format!("{what} must be a mandate"))
        .help(format!(
            "a template decides nothing until an instance is granted; to delegate from its instances, declare a \
             template under it: `template NAME(…) under {name} {{ … }}`"
        ))
}

pub fn unknown_template_parent(name: &str, span: Span, candidates: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("remit::unknown-mandate", format!("unknown parent `{name}` of a template"))
        .label(span, "no mandate or template has this name");
    suggest(d, name, candidates, "a template names the mandate (or template) it narrows after `under`")
}

pub fn template_pattern_empty(clause: &str, template: &str, span: Span) -> Diagnostic {
    let who = if clause == "for" { "be an instance's principal" } else { "grant an instance" };
    Diagnostic::error(
        "remit::template-pattern-empty",
        format!("`{clause} under \"\"` lets every identity {who} of `{template}`"),
    )
    .label(span, "every identity starts with the empty prefix")
    .help(format!("name a namespace, e.g. `{clause} under \"user:\"`, or list identities: `{clause} \"user:…\"`"))
}

pub fn template_principal_inherited(name: &str, parent: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        "remit::sub-mandate-principal",
        format!(
            "template `{name}` is under template `{parent}`: its instances act for their parent instance's principal"
        ),
    )
    .label(span, "`for` is not allowed under a template")
    .help("remove the `for`: an instance of a template under a template is granted from an instance of the parent")
}

pub fn principal_attribute_in_template(attr: &str, template: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::template-principal-attribute", format!("template `{template}` cannot read `{attr}` yet"))
        .label(span, "an instance's principal is chosen when it is granted")
        .help(
            "the principal's attributes are filled for the mandates that may decide a request; for an instance's \
         principal they come with run-time grants (docs/grants-design.md). Compare with `principal` (the \
         instance's principal's id), or make the value a parameter with a bound",
        )
}

pub fn parameter_outside_template(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::parameter-outside-template", format!("`{name}` is not a timestamp"))
        .label(span, "a mandate's window is written with timestamps")
        .help("only a template's window may name a parameter (`valid until until`); write `2026-12-31T00:00:00Z`")
}

pub fn template_missing_holder(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("remit::missing-holder", format!("template `{name}` says nobody may hold an instance"))
        .label(span, "no `holder` clause")
        .help("add `holder under \"agent:\"` (or ids): the agents an instance may be granted to")
}

pub fn window_param_not_timestamp(param: &str, ty: &Type, span: Span) -> Diagnostic {
    Diagnostic::error("remit::type-mismatch", format!("`{param}` is `{}`, not a timestamp", ty.display()))
        .label(span, "a window's bound is an instant")
        .help(format!("declare `{param}: timestamp`, or bound the window with a timestamp parameter"))
}
