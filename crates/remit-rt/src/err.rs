//! Reason codes, the twin of `crates/remit-lang/src/eval/err.rs`: the stable vocabulary of decisions (docs/requests.md). A decision
//! lists its codes sorted, so each code is a bit whose position is the code's place in byte order ([`CODES`]); a set
//! of codes is a `u32`, written in order by [`write_codes`].

use crate::Sink;

/// Every code, in byte order: bit `i` of a code set is `CODES[i]`.
pub const CODES: [&str; 32] = [
    "approval.binding-mismatch",
    "approval.consumed",
    "approval.expired",
    "approval.missing",
    "approval.not-yet-valid",
    "approval.ttl-passed",
    "approval.wrong-approver",
    "approval.wrong-mandate",
    "budget.exhausted",
    "credential.scope-missing",
    "decision.oversize",
    "fact.stale",
    "grant.invalid",
    "level.exceeded",
    "limit.exceeded",
    "mandate.ambiguous",
    "mandate.expired",
    "mandate.not-yet-valid",
    "mandate.self-modification",
    "mandate.unknown",
    "operation.missing-id",
    "request.malformed",
    "request.missing-field",
    "request.oversize",
    "request.undeclared-argument",
    "rule.allowed",
    "rule.forbidden",
    "rule.unmatched",
    "scope.outside",
    "stop.active",
    "subject.not-holder",
    "tool.undeclared",
];

pub const APPROVAL_BINDING_MISMATCH: u32 = 1 << 0;
pub const APPROVAL_CONSUMED: u32 = 1 << 1;
pub const APPROVAL_EXPIRED: u32 = 1 << 2;
pub const APPROVAL_MISSING: u32 = 1 << 3;
pub const APPROVAL_NOT_YET_VALID: u32 = 1 << 4;
pub const APPROVAL_TTL_PASSED: u32 = 1 << 5;
pub const APPROVAL_WRONG_APPROVER: u32 = 1 << 6;
pub const APPROVAL_WRONG_MANDATE: u32 = 1 << 7;
pub const BUDGET_EXHAUSTED: u32 = 1 << 8;
pub const SCOPE_MISSING: u32 = 1 << 9;
pub const DECISION_OVERSIZE: u32 = 1 << 10;
pub const FACT_STALE: u32 = 1 << 11;
pub const GRANT_INVALID: u32 = 1 << 12;
pub const LEVEL_EXCEEDED: u32 = 1 << 13;
pub const LIMIT_EXCEEDED: u32 = 1 << 14;
pub const MANDATE_AMBIGUOUS: u32 = 1 << 15;
pub const EXPIRED: u32 = 1 << 16;
pub const NOT_YET_VALID: u32 = 1 << 17;
pub const SELF_MODIFICATION: u32 = 1 << 18;
pub const MANDATE_UNKNOWN: u32 = 1 << 19;
pub const OPERATION_MISSING_ID: u32 = 1 << 20;
pub const REQUEST_MALFORMED: u32 = 1 << 21;
pub const REQUEST_MISSING_FIELD: u32 = 1 << 22;
pub const REQUEST_OVERSIZE: u32 = 1 << 23;
pub const UNDECLARED_ARGUMENT: u32 = 1 << 24;
pub const ALLOWED: u32 = 1 << 25;
pub const FORBIDDEN: u32 = 1 << 26;
pub const UNMATCHED: u32 = 1 << 27;
pub const SCOPE_OUTSIDE: u32 = 1 << 28;
pub const STOP_ACTIVE: u32 = 1 << 29;
pub const SUBJECT_NOT_HOLDER: u32 = 1 << 30;
pub const TOOL_UNDECLARED: u32 = 1 << 31;

/// The request error's codes as a set.
pub fn of_request(e: crate::request::RequestError) -> u32 {
    let mut codes = 0;
    if e.malformed {
        codes |= REQUEST_MALFORMED;
    }
    if e.missing {
        codes |= REQUEST_MISSING_FIELD;
    }
    if e.oversize {
        codes |= REQUEST_OVERSIZE;
    }
    codes
}

/// The code of a one-bit set (the lowest bit of any set).
pub fn name(code: u32) -> &'static str {
    CODES.get(code.trailing_zeros() as usize).copied().unwrap_or("")
}

/// Writes the set as a JSON array of strings, in byte order.
pub fn write_codes(out: &mut impl Sink, codes: u32) {
    out.byte(b'[');
    // The set bits, lowest first: the codes are numbered in byte order.
    let mut rest = codes;
    while rest != 0 {
        let code = CODES.get(rest.trailing_zeros() as usize).copied().unwrap_or("");
        out.write(if rest == codes { b"\"" } else { b",\"" });
        out.write(code.as_bytes());
        out.byte(b'"');
        rest &= rest - 1;
    }
    out.byte(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_sorted_and_distinct() {
        assert!(CODES.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(name(STOP_ACTIVE), "stop.active");
        assert_eq!(name(TOOL_UNDECLARED), "tool.undeclared");
        assert_eq!(name(APPROVAL_MISSING), "approval.missing");
    }
}
