//! Deciding a request against a policy image, the twin of `src/eval/mod.rs` (and `decision.rs` for the JSON), and
//! the module's two other answers: the tool listing (`visible.rs`) and the policy info. Every entry point reads a
//! parsed request (or the parse's error), writes its JSON into an [`Out`], and uses only the fixed lists of a
//! [`Work`]: no allocation, so the same code runs natively and in the wasm32 artifact.
//!
//! Status (issue 12): the entry points' signatures are fixed (wasm.rs and the native engine call them); the
//! decision algorithm is being written.

use crate::image::{Image, MAX_DECIDING};
use crate::json::{Doc, JsonError};
use crate::out::Out;
use crate::Sink;

/// The lists one decision collects, each of at most [`MAX_DECIDING`] items (the checker's bound on the rules a
/// decision examines). Reused from call to call.
#[derive(Clone, Debug)]
pub struct Work {
    /// Entry indices of the deny findings, the escalate findings, and the grants and satisfied gates.
    pub deny: [u32; MAX_DECIDING],
    pub escalate: [u32; MAX_DECIDING],
    pub granted: [u32; MAX_DECIDING],
    /// Missing approvals: `(kind index << 16 | mandate index)`-like keys, see `decide`.
    pub missing: [u32; MAX_DECIDING],
    /// Tokens of the approvals a decision consumes.
    pub consumed: [u32; MAX_DECIDING],
    /// Counter ranks of the budgets that apply.
    pub counters: [u32; MAX_DECIDING],
}

impl Work {
    pub const EMPTY: Work = Work {
        deny: [0; MAX_DECIDING],
        escalate: [0; MAX_DECIDING],
        granted: [0; MAX_DECIDING],
        missing: [0; MAX_DECIDING],
        consumed: [0; MAX_DECIDING],
        counters: [0; MAX_DECIDING],
    };
}

/// Writes the decision on the parsed request (docs/requests.md), exactly `remit::eval::decide(…).to_json()`.
pub fn decide(image: &Image<'_>, parsed: Result<(Doc<'_>, &mut [u32]), JsonError>, work: &mut Work, out: &mut Out<'_>) {
    let _ = (image, parsed, work, out);
}

/// Writes the tool listing of the parsed request's subject and context, exactly
/// `remit::eval::visible_tools(…).to_json()`.
pub fn visible_tools(
    image: &Image<'_>,
    parsed: Result<(Doc<'_>, &mut [u32]), JsonError>,
    work: &mut Work,
    out: &mut Out<'_>,
) {
    let _ = (image, parsed, work, out);
}

/// Writes the JSON of `remit_policy_info` (docs/abi.md), which the compiler stored whole.
pub fn policy_info(image: &Image<'_>, out: &mut Out<'_>) {
    out.write(image.str(image.header.info_off, image.header.info_len));
}
