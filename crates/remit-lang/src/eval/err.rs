//! Reason codes (the stable vocabulary of decisions, docs/requests.md) and the error a condition raises when it
//! cannot be evaluated. Codes live here so every part of the interpreter spells them the same way.

pub const REQUEST_MALFORMED: &str = "request.malformed";
pub const DECISION_OVERSIZE: &str = "decision.oversize";
pub const REQUEST_MISSING_FIELD: &str = "request.missing-field";
pub const REQUEST_OVERSIZE: &str = "request.oversize";
pub const UNDECLARED_ARGUMENT: &str = "request.undeclared-argument";
pub const TOOL_UNDECLARED: &str = "tool.undeclared";
pub const MANDATE_UNKNOWN: &str = "mandate.unknown";
/// The request names no mandate and its subject holds several (mandates or instances), or names an instance twice.
pub const MANDATE_AMBIGUOUS: &str = "mandate.ambiguous";
/// The instance of a template the request is decided under is not within its template (`eval::grants::check`).
pub const GRANT_INVALID: &str = "grant.invalid";
pub const SUBJECT_NOT_HOLDER: &str = "subject.not-holder";
pub const SELF_MODIFICATION: &str = "mandate.self-modification";
pub const SCOPE_MISSING: &str = "credential.scope-missing";
pub const NOT_YET_VALID: &str = "mandate.not-yet-valid";
pub const EXPIRED: &str = "mandate.expired";
pub const STOP_ACTIVE: &str = "stop.active";
pub const FORBIDDEN: &str = "rule.forbidden";
pub const LIMIT_EXCEEDED: &str = "limit.exceeded";
pub const SCOPE_OUTSIDE: &str = "scope.outside";
pub const LEVEL_EXCEEDED: &str = "level.exceeded";
pub const OPERATION_MISSING_ID: &str = "operation.missing-id";
pub const FACT_STALE: &str = "fact.stale";
pub const BUDGET_EXHAUSTED: &str = "budget.exhausted";
pub const UNMATCHED: &str = "rule.unmatched";
pub const APPROVAL_MISSING: &str = "approval.missing";
// Why a presented approval of a gate's kind did not satisfy it (next to `approval.missing`; `Refusal::code`).
pub const APPROVAL_CONSUMED: &str = "approval.consumed";
pub const APPROVAL_NOT_YET_VALID: &str = "approval.not-yet-valid";
pub const APPROVAL_EXPIRED: &str = "approval.expired";
pub const APPROVAL_TTL_PASSED: &str = "approval.ttl-passed";
pub const APPROVAL_BINDING_MISMATCH: &str = "approval.binding-mismatch";
pub const APPROVAL_WRONG_APPROVER: &str = "approval.wrong-approver";
pub const APPROVAL_WRONG_MANDATE: &str = "approval.wrong-mandate";
pub const ALLOWED: &str = "rule.allowed";

/// Why a condition could not be evaluated. Callers never look inside: any error fails closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalError {
    /// The attribute is absent from the request.
    Missing,
    /// The attribute is present but does not decode as the type the checker gave it.
    WrongType,
    /// The values cannot be compared (different kinds, or money in different currencies).
    Incomparable,
    /// A value tested with `under` has a `.`/`..`/empty segment, a backslash, a NUL or a percent-encoded
    /// separator: it is never under anything.
    UnsafePath,
}

impl EvalError {
    /// How a decision names the problem (`unevaluable` of a rule, docs/requests.md).
    pub fn code(self) -> &'static str {
        match self {
            EvalError::Missing => "missing",
            EvalError::WrongType => "mistyped",
            EvalError::Incomparable => "incomparable",
            EvalError::UnsafePath => "unsafe-path",
        }
    }
}
