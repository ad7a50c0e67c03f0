//! The decision (docs/requests.md) and its JSON. The JSON is written by hand so its bytes are fixed: keys in the
//! documented order, no whitespace, strings escaped as in the argument digest.

use super::digest::write_string;
use super::err;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Allow,
    Deny,
    Escalate,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Deny => "deny",
            Outcome::Escalate => "escalate",
        }
    }
}

/// A rule (or mandate clause) that contributed to a decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DecidingRule {
    pub mandate: String,
    pub rule: String,
    /// `file:line:column` of the clause.
    pub at: String,
    /// Why the rule's condition could not be evaluated, when that is why it is listed (fail closed: a prohibition,
    /// limit or scope counted as violated, a gate that applies).
    pub unevaluable: Option<Unevaluable>,
    /// A grant named as the closest (`closest` of an `otherwise`): the first atom of its condition that is false,
    /// following the condition down (an `and` to its first false child, an `or` to its first child).
    pub failed: Option<Failed>,
    /// An `otherwise` listed for `rule.unmatched`: the grant of the called tool that came closest.
    pub closest: Option<Box<DecidingRule>>,
}

/// The atom of a grant's condition that is false: its attribute, and the request's value of it as canonical JSON
/// (for `args.*`, `context.*`, `resource.id` and `subject.id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Failed {
    /// The atom in the language's words (`args.amount <= 100 USD`).
    pub condition: String,
    pub attribute: String,
    pub value: Option<String>,
}

/// The first atom of a condition (in prefix order: as written, left to right) whose evaluation failed: its
/// attribute as the policy writes it (`args.amount`) and the problem.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unevaluable {
    pub attribute: String,
    /// `missing`, `mistyped`, `incomparable` or `unsafe-path` ([`super::err::EvalError::code`]).
    pub problem: &'static str,
}

impl DecidingRule {
    /// The order of `rules` in a decision, and so which rule a listing names when several hide a tool: by mandate
    /// name, then the rule's text — never by where it is written, so moving clauses or files changes nothing but
    /// `at` — and only then by file, line and column (two identical clauses of one mandate).
    pub(crate) fn sort_key(&self) -> (&str, &str, &str, u64, u64) {
        let mut parts = self.at.rsplitn(3, ':');
        let column = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
        let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        let file = parts.next().unwrap_or(&self.at);
        (&self.mandate, &self.rule, file, line, column)
    }

    fn write(&self, out: &mut String) {
        out.push_str("{\"mandate\":");
        write_string(out, &self.mandate);
        out.push_str(",\"rule\":");
        write_string(out, &self.rule);
        out.push_str(",\"at\":");
        write_string(out, &self.at);
        if let Some(u) = &self.unevaluable {
            out.push_str(",\"unevaluable\":{\"attribute\":");
            write_string(out, &u.attribute);
            out.push_str(",\"problem\":");
            write_string(out, u.problem);
            out.push('}');
        }
        if let Some(f) = &self.failed {
            out.push_str(",\"failed\":{\"condition\":");
            write_string(out, &f.condition);
            out.push_str(",\"attribute\":");
            write_string(out, &f.attribute);
            if let Some(value) = &f.value {
                out.push_str(",\"value\":");
                out.push_str(value);
            }
            out.push('}');
        }
        if let Some(closest) = &self.closest {
            out.push_str(",\"closest\":");
            closest.write(out);
        }
        out.push('}');
    }
}

/// An approval the call's gates need and no presented approval satisfied: one per kind and binding, however many
/// mandates of the chain gate the call on it. Only the fields the kind binds are set, with the values of this call,
/// so the principal's queue knows exactly what to approve.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MissingApproval {
    pub kind: String,
    /// The mandate to issue it under: of the mandates it serves, the one nearest the root, whose approvals count
    /// for its own gates and every sub-mandate's.
    pub mandate: String,
    /// Every mandate of the chain whose gate it satisfies, by name.
    pub mandates: Vec<String>,
    pub tool: Option<String>,
    pub target: Option<String>,
    pub digest: Option<String>,
    pub manifest: Option<String>,
    /// The presented approvals of this kind that did not satisfy it, by id, each with why.
    pub refused: Vec<RefusedApproval>,
}

/// A presented approval of a gate's kind that does not satisfy the gate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefusedApproval {
    pub id: String,
    pub refusal: Refusal,
}

/// Why a presented approval of a gate's kind does not satisfy it: the first check it fails, in this order (the
/// issuing mandate last, so every gate of one kind that a call misses refuses an approval for the same reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Refusal {
    Consumed,
    NotYetValid,
    Expired,
    TtlPassed,
    /// The first binding (tool, target, arguments, manifest) whose value differs from the call's.
    BindingMismatch(crate::ir::Binding),
    /// Granted by no one the kind's `approved by` admits (or by no one named).
    WrongApprover,
    /// Issued under a mandate that is not the gate's or an ancestor of it.
    WrongMandate,
}

impl Refusal {
    /// `why` in the decision.
    pub fn why(self) -> &'static str {
        match self {
            Refusal::Consumed => "consumed",
            Refusal::NotYetValid => "not-yet-valid",
            Refusal::Expired => "expired",
            Refusal::TtlPassed => "ttl-passed",
            Refusal::BindingMismatch(_) => "binding-mismatch",
            Refusal::WrongApprover => "wrong-approver",
            Refusal::WrongMandate => "wrong-mandate",
        }
    }

    /// The reason code a decision lists next to `approval.missing`.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::Consumed => err::APPROVAL_CONSUMED,
            Refusal::NotYetValid => err::APPROVAL_NOT_YET_VALID,
            Refusal::Expired => err::APPROVAL_EXPIRED,
            Refusal::TtlPassed => err::APPROVAL_TTL_PASSED,
            Refusal::BindingMismatch(_) => err::APPROVAL_BINDING_MISMATCH,
            Refusal::WrongApprover => err::APPROVAL_WRONG_APPROVER,
            Refusal::WrongMandate => err::APPROVAL_WRONG_MANDATE,
        }
    }
}

impl MissingApproval {
    fn write(&self, out: &mut String) {
        out.push_str("{\"kind\":");
        write_string(out, &self.kind);
        out.push_str(",\"mandate\":");
        write_string(out, &self.mandate);
        out.push_str(",\"mandates\":");
        write_strings(out, &self.mandates);
        let optional =
            [("tool", &self.tool), ("target", &self.target), ("digest", &self.digest), ("manifest", &self.manifest)];
        for (key, value) in optional {
            if let Some(value) = value {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                write_string(out, value);
            }
        }
        out.push_str(",\"refused\":");
        write_list(out, &self.refused, |r, out| {
            out.push_str("{\"id\":");
            write_string(out, &r.id);
            out.push_str(",\"why\":\"");
            out.push_str(r.refusal.why());
            out.push('"');
            if let Refusal::BindingMismatch(binding) = r.refusal {
                out.push_str(",\"binding\":\"");
                out.push_str(binding.name());
                out.push('"');
            }
            out.push('}');
        });
        out.push('}');
    }
}

/// A presented approval that satisfied a gate of an allowed call: who authorised it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsedApproval {
    pub id: String,
    pub kind: String,
    /// The approval's `approved_by`, when it has one.
    pub approved_by: Option<String>,
}

impl UsedApproval {
    fn write(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_string(out, &self.id);
        out.push_str(",\"kind\":");
        write_string(out, &self.kind);
        if let Some(by) = &self.approved_by {
            out.push_str(",\"approved_by\":");
            write_string(out, by);
        }
        out.push('}');
    }
}

/// What the gateway must do when it carries out an allowed call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Obligation {
    ConsumeApproval(String),
    RecordOperation(String),
    IncrementCounter(String),
}

impl Obligation {
    pub fn to_json(&self) -> String {
        let (kind, key, value) = match self {
            Obligation::ConsumeApproval(id) => ("consume-approval", "id", id),
            Obligation::RecordOperation(id) => ("record-operation", "id", id),
            Obligation::IncrementCounter(counter) => ("increment-counter", "counter", counter),
        };
        let mut out = format!("{{\"kind\":\"{kind}\",\"{key}\":");
        write_string(&mut out, value);
        out.push('}');
        out
    }
}

/// A field of a request that could not be read (`request.malformed`, `request.missing-field`): its path
/// (`context.now`) and the problem, `malformed` or `missing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestField {
    pub field: &'static str,
    pub problem: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub reasons: Vec<String>,
    /// On a request that could not be read, the fields that are wrong (in byte order of their paths); written only
    /// when there are some.
    pub fields: Vec<RequestField>,
    pub rules: Vec<DecidingRule>,
    pub missing_approvals: Vec<MissingApproval>,
    /// On an allow, the presented approvals that satisfied its gates (by id): who approved.
    pub approvals: Vec<UsedApproval>,
    pub obligations: Vec<Obligation>,
    /// Mandate names, root first; empty when the decision came before the mandate was resolved.
    pub mandate_chain: Vec<String>,
    /// `subject.credential.id` of the request (who authorised the call); `None` without one, or when the request
    /// could not be read.
    pub credential: Option<String>,
    /// The principal the chain acts for (its root's, or the principal an instance names), on escalations.
    pub escalate_to: Option<String>,
    /// The module hash of the policy that decided.
    pub policy: String,
}

impl Decision {
    /// A deny with the given reasons and nothing else: the shape of every decision made before the mandate is
    /// resolved.
    pub fn deny(reasons: Vec<String>, policy: impl Into<String>) -> Decision {
        Decision {
            outcome: Outcome::Deny,
            reasons,
            fields: Vec::new(),
            rules: Vec::new(),
            missing_approvals: Vec::new(),
            approvals: Vec::new(),
            obligations: Vec::new(),
            mandate_chain: Vec::new(),
            credential: None,
            escalate_to: None,
            policy: policy.into(),
        }
    }

    /// The decision on a request that is not JSON or has a field of the wrong type (also for a request that
    /// cannot even be read).
    pub fn malformed(policy: impl Into<String>) -> Decision {
        Decision::deny(vec![err::REQUEST_MALFORMED.to_string()], policy)
    }

    /// Compact JSON on one line, keys in the documented order.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"decision\":\"");
        out.push_str(self.outcome.as_str());
        out.push_str("\",\"reasons\":");
        write_strings(&mut out, &self.reasons);
        if !self.fields.is_empty() {
            out.push_str(",\"fields\":");
            write_list(&mut out, &self.fields, |f, out| {
                out.push_str("{\"field\":\"");
                out.push_str(f.field);
                out.push_str("\",\"problem\":\"");
                out.push_str(f.problem);
                out.push_str("\"}");
            });
        }
        out.push_str(",\"rules\":");
        write_list(&mut out, &self.rules, DecidingRule::write);
        out.push_str(",\"missing_approvals\":");
        write_list(&mut out, &self.missing_approvals, MissingApproval::write);
        out.push_str(",\"approvals\":");
        write_list(&mut out, &self.approvals, UsedApproval::write);
        out.push_str(",\"obligations\":");
        write_list(&mut out, &self.obligations, |o, out| out.push_str(&o.to_json()));
        out.push_str(",\"mandate_chain\":");
        write_strings(&mut out, &self.mandate_chain);
        for (key, value) in [("credential", &self.credential), ("escalate_to", &self.escalate_to)] {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":");
            match value {
                Some(text) => write_string(&mut out, text),
                None => out.push_str("null"),
            }
        }
        out.push_str(",\"policy\":");
        write_string(&mut out, &self.policy);
        out.push('}');
        out
    }
}

pub(crate) fn write_strings(out: &mut String, items: &[String]) {
    write_list(out, items, |s, out| write_string(out, s));
}

pub(crate) fn write_list<T>(out: &mut String, items: &[T], write: impl Fn(&T, &mut String)) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write(item, out);
    }
    out.push(']');
}

/// Writes a deciding rule (shared with the tool listing's JSON).
pub(crate) fn write_rule(rule: &DecidingRule, out: &mut String) {
    rule.write(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_follow_the_documented_order() {
        let decision = Decision {
            outcome: Outcome::Escalate,
            reasons: vec!["approval.missing".into()],
            fields: Vec::new(),
            rules: vec![DecidingRule {
                mandate: "wallet".into(),
                rule: "require approval commercial_terms".into(),
                at: "wallet/policy.remit:14:3".into(),
                unevaluable: None,
                failed: None,
                closest: None,
            }],
            missing_approvals: vec![MissingApproval {
                kind: "commercial_terms".into(),
                mandate: "wallet".into(),
                mandates: vec!["wallet".into()],
                tool: Some("pay".into()),
                target: None,
                digest: Some("sha256:00".into()),
                manifest: None,
                refused: vec![RefusedApproval { id: "apr-1".into(), refusal: Refusal::Expired }],
            }],
            approvals: vec![],
            obligations: vec![],
            mandate_chain: vec!["wallet".into()],
            credential: Some("cred-7".into()),
            escalate_to: Some("user:alice".into()),
            policy: "sha256:ff".into(),
        };
        assert_eq!(
            decision.to_json(),
            concat!(
                r#"{"decision":"escalate","reasons":["approval.missing"],"#,
                r#""rules":[{"mandate":"wallet","rule":"require approval commercial_terms","at":"wallet/policy.remit:14:3"}],"#,
                r#""missing_approvals":[{"kind":"commercial_terms","mandate":"wallet","mandates":["wallet"],"tool":"pay","digest":"sha256:00","refused":[{"id":"apr-1","why":"expired"}]}],"approvals":[],"#,
                r#""obligations":[],"mandate_chain":["wallet"],"credential":"cred-7","escalate_to":"user:alice","policy":"sha256:ff"}"#
            )
        );
    }

    #[test]
    fn malformed_decision_and_obligations() {
        assert_eq!(
            Decision::malformed("sha256:1").to_json(),
            r#"{"decision":"deny","reasons":["request.malformed"],"rules":[],"missing_approvals":[],"approvals":[],"obligations":[],"mandate_chain":[],"credential":null,"escalate_to":null,"policy":"sha256:1"}"#
        );
        let obligations = [
            Obligation::ConsumeApproval("apr-\"1".into()),
            Obligation::RecordOperation("op-1".into()),
            Obligation::IncrementCounter("pay_per_op".into()),
        ];
        let json: Vec<String> = obligations.iter().map(Obligation::to_json).collect();
        assert_eq!(
            json,
            [
                r#"{"kind":"consume-approval","id":"apr-\"1"}"#,
                r#"{"kind":"record-operation","id":"op-1"}"#,
                r#"{"kind":"increment-counter","counter":"pay_per_op"}"#
            ]
        );
    }

    #[test]
    fn decision_json_is_valid_json() {
        let mut decision = Decision::deny(vec!["rule.forbidden".into()], "p");
        decision.mandate_chain = vec!["a\nb".into(), "é\u{1}".into()];
        let parsed: serde_json::Value = serde_json::from_str(&decision.to_json()).expect("valid JSON");
        assert_eq!(parsed["mandate_chain"][1], "é\u{1}");
    }
}
