//! Decisions on `tools/call`: who the agent is ([`Identity`]) and remit's request for a call, the call decided by the
//! gateway's core ([`decide`]: a deny or an escalation answered with a tool result whose text says why, an allow to
//! forward), the decision spliced into the upstream's result on the way back ([`Forward::answer`]) and the outcome
//! entry logged after it, and the rounds of a multi round-trip call (revision 2026-07-28) kept between them
//! ([`round_of`]).
//!
//! Depends on `protocol` and `upstream` (a forwarded call names the upstream it goes to).

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value as Json};

use crate::protocol::{
    is_error, line, not_relayed, response, stateless_result, RawResult, ResultHead, RpcError, INPUT_REQUIRED,
    META_DECISION,
};
use crate::upstream::Upstream;
use remit_gateway::core::{Decided, Gateway};

/// Who the agent is: over stdio fixed when the proxy starts; over HTTP the bearer token's.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub subject: String,
    pub credential: Option<String>,
    pub scopes: Vec<String>,
    /// The mandate to act under; `None`: the one mandate the subject holds (the gateway picks it).
    pub mandate: Option<String>,
}

impl Identity {
    /// remit's request for a call of `tool` with `arguments` (docs/requests.md); the gateway fills the rest.
    pub(crate) fn request(&self, tool: Option<(&str, &Json)>) -> Map<String, Json> {
        let mut subject = Map::with_capacity(2);
        subject.insert("id".into(), Json::from(self.subject.as_str()));
        if self.credential.is_some() || !self.scopes.is_empty() {
            let mut credential = Map::with_capacity(2);
            let scopes = self.scopes.iter().map(|s| Json::from(s.as_str())).collect();
            credential.insert("scopes".into(), Json::Array(scopes));
            if let Some(id) = &self.credential {
                credential.insert("id".into(), Json::from(id.as_str()));
            }
            subject.insert("credential".into(), Json::Object(credential));
        }
        let mut context = Map::new();
        if let Some(mandate) = &self.mandate {
            context.insert("mandate".into(), Json::from(mandate.as_str()));
        }
        let mut request = Map::with_capacity(3);
        request.insert("subject".into(), Json::Object(subject));
        request.insert("context".into(), Json::Object(context));
        if let Some((name, arguments)) = tool {
            let mut action = Map::with_capacity(2);
            action.insert("name".into(), Json::from(name));
            action.insert("arguments".into(), arguments.clone());
            request.insert("action".into(), Json::Object(action));
        }
        request
    }
}

/// The rounds of multi round-trip calls (revision 2026-07-28): when the proxy allowed and forwarded a call and its
/// upstream answered `input_required`, what the call's obligations carried out is kept in the store
/// ([`Gateway::keep_round`]) under the call (who called, which tool, which arguments) and the `requestState` the
/// upstream answered with ([`round_key`]). The agent's next round, the same call with that `requestState`, is decided
/// without it ([`Gateway::decide_continuing`]): a single-use approval the first round consumed still covers the
/// call, and its budget count is not counted twice. Each round is taken by the first call that continues it, and kept
/// again when the upstream refuses that call with an error (the round did not run; the agent may try it again). A
/// timeout or a lost connection leaves it taken: the round may have run upstream, and a single-use approval covers
/// one run.
///
/// This is the call a round belongs to: the caller (subject, credential, scopes, mandate), the tool and the digest
/// of its arguments, as one hash.
pub(crate) fn round_of(identity: &Identity, name: &str, arguments: &Json) -> String {
    use sha2::{Digest, Sha256};
    let digest = remit_lang::eval::argument_digest(name, arguments);
    let call = json!([identity.subject, identity.credential, identity.scopes, identity.mandate, name, digest]);
    remit_gateway::audit::hex(&Sha256::digest(call.to_string().as_bytes()))
}

/// The key of the round of `call` ([`round_of`]) that the upstream answered with `state` (its `requestState`).
pub(crate) fn round_key(call: &str, state: &Json) -> String {
    use sha2::{Digest, Sha256};
    remit_gateway::audit::hex(&Sha256::digest(json!([call, state]).to_string().as_bytes()))
}

/// Decides a `tools/call` of the tool `name` with `arguments` (its `params`) offered by `upstream`: the agent's answer
/// when it is not forwarded (a deny, an escalation), else what to forward.
pub(crate) fn decide(gateway: &Gateway, identity: &Identity, params: Json, upstream: Arc<Upstream>) -> Call {
    let name = params.get("name").and_then(Json::as_str).unwrap_or_default();
    let empty = json!({});
    let arguments = params.get("arguments").unwrap_or(&empty);
    let request = identity.request(Some((name, arguments)));
    // Maybe a later round of a call the proxy allowed, whose upstream asked for input first (see `round_of`).
    let decided = match params.get("requestState") {
        Some(state) => gateway.decide_continuing(request, &round_key(&round_of(identity, name, arguments), state)),
        // The decision's entry may wait for the writer thread when it changes nothing else (see
        // `Gateway::decide_deferring`): the proxy flushes the queue within moments and at exit.
        None => gateway.decide_request_deferring(request),
    };
    if !decided.allowed() {
        let decision: Json = serde_json::from_str(&decided.decision).unwrap_or(Json::Null);
        let text = refusal_text(&decided, &decision);
        let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
        let mut meta = Map::with_capacity(1);
        meta.insert(META_DECISION.into(), decision_meta(&decided, decision));
        result["_meta"] = Json::Object(meta);
        return Call::Answered(result);
    }
    let tool = name.to_string();
    let meta = Default::default();
    Call::Forward(Box::new(Forward { upstream, params, decided, tool, meta, stateless: false, caller: None }))
}

/// A decided `tools/call`.
pub(crate) enum Call {
    /// Not forwarded: its result.
    Answered(Json),
    /// Allowed: to be forwarded.
    Forward(Box<Forward>),
}

/// An allowed call on its way to the upstream: the message's params, and what its outcome entry and result carry.
pub(crate) struct Forward {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) params: Json,
    pub(crate) decided: Decided,
    pub(crate) tool: String,
    /// The decision as the result's `_meta` carries it ([`decision_meta`]), serialized: made once, by whichever
    /// comes first, the thread that forwarded the call (while the upstream works) or the upstream's answer.
    meta: std::sync::OnceLock<String>,
    /// A request of the stateless revision: the result says `resultType: complete` (see [`Forward::answer`]).
    stateless: bool,
    /// For a request of the stateless revision, the call its rounds belong to.
    pub(crate) caller: Option<Box<Caller>>,
}

/// Who made a call of the stateless revision, with which arguments ([`round_of`], worked out only when a round is
/// kept), and the `requestState` of the round it continues, if any.
pub(crate) struct Caller {
    pub(crate) identity: Identity,
    pub(crate) arguments: Json,
    continued: Option<Json>,
}

/// The agent's answer to a forwarded call ([`Forward::answer`]).
pub(crate) struct Answer {
    /// The response, one line.
    pub(crate) line: Vec<u8>,
    /// The call's outcome entry.
    pub(crate) entry: Json,
    /// The `requestState` the agent's next round will carry: that of an `input_required` result relayed to it, or,
    /// when the upstream refused a continued round ([`RpcError::refused_upstream`]: it did not run), the state that
    /// round came with (the agent may send it again, and it is still the same round: the round taken to decide it is
    /// kept again).
    pub(crate) asked: Option<Json>,
}

impl Forward {
    /// Marks a call that came in the stateless revision from `identity` (its upstream's `input_required` results are
    /// relayed, and their rounds kept).
    pub(crate) fn in_stateless_revision(&mut self, identity: &Identity) {
        self.stateless = true;
        let arguments = self.params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let continued = self.params.get("requestState").cloned();
        self.caller = Some(Box::new(Caller { identity: identity.clone(), arguments, continued }));
    }

    /// When the upstream refused this call with `error` ([`RpcError::refused_upstream`]: it did not run), the
    /// `requestState` of the round it continues, which the agent may send again: the round is kept again. Not after
    /// an error of the proxy's own, after which the call may have run.
    pub(crate) fn retried_after(&self, error: &RpcError) -> Option<Json> {
        let caller = self.caller.as_ref().filter(|_| error.refused_upstream)?;
        caller.continued.clone()
    }

    pub(crate) fn meta(&self) -> &str {
        self.meta.get_or_init(|| {
            let decided = &self.decided;
            // The decision goes in as the gateway wrote it (the module's output, or the gateway's own deny): checked
            // to be one JSON value, not parsed into a tree and serialized again.
            let meta = Meta {
                id: &decided.id,
                outcome: &decided.outcome,
                decision: serde_json::from_str(&decided.decision).ok(),
                access_request: decided.access_request.as_ref().map(|access| {
                    json!({"id": access.id, "url": access.url,
                           "expires_at": remit_lang::value::format_timestamp(access.expires_at)})
                }),
            };
            serde_json::to_string(&meta).expect("the decision's meta serializes")
        })
    }

    /// The `outcome` entry of the call: whether the tool failed (and the result's type when it is not a final one:
    /// `input_required`, the tool has not run yet), or the JSON-RPC error the upstream answered.
    pub(crate) fn outcome_entry(&self, outcome: Result<(bool, Option<&str>), &RpcError>) -> Json {
        let (decision, tool) = (&self.decided.id, &self.tool);
        match outcome {
            Ok((is_error, Some(result_type))) if result_type != "complete" => {
                json!({"decision": decision, "tool": tool, "is_error": is_error, "result_type": result_type})
            }
            Ok((is_error, _)) => json!({"decision": decision, "tool": tool, "is_error": is_error}),
            Err(e) => json!({"decision": decision, "tool": tool, "error": e.to_json()}),
        }
    }

    /// The agent's answer (one line) to request `id` from the upstream's `outcome`, and the call's outcome entry.
    /// The decision is spliced into the result's text as the upstream wrote it: `"_meta":{"remit.dev/decision":…}`
    /// added as its last member. A result that has `_meta` already (or is not an object) is parsed and serialized
    /// again, as the proxy does for a call it waited on.
    pub(crate) fn answer(&self, id: &Json, outcome: Result<RawResult, RpcError>) -> Answer {
        let result = match outcome {
            Err(e) => {
                let entry = self.outcome_entry(Err(&e));
                let asked = self.retried_after(&e);
                return Answer { line: line(&response(id, Err(e))), entry, asked };
            }
            Ok(RawResult(result)) => result,
        };
        let members = serde_json::from_str::<ResultHead>(&result);
        let declared = members.as_ref().ok().and_then(|head| head.result_type);
        let declared = declared.and_then(|t| serde_json::from_str::<String>(t.get()).ok());
        let input_required = declared.as_deref() == Some(INPUT_REQUIRED);
        if input_required && !self.stateless {
            // Logged as the upstream answered (the tool has not run), refused to the agent.
            let entry = self.outcome_entry(Ok((false, Some(INPUT_REQUIRED))));
            return Answer { line: line(&response(id, Err(not_relayed(INPUT_REQUIRED)))), entry, asked: None };
        }
        let state = members.as_ref().ok().and_then(|head| head.request_state);
        let asked = state.filter(|_| input_required).and_then(|state| serde_json::from_str(state.get()).ok());
        let result_type = declared.as_deref();
        // Over the stateless revision a result that says nothing of its type says `resultType: complete` (added as
        // `stateless_result` adds it).
        let typed = |result_type: &Option<&RawValue>| result_type.is_none() && self.stateless;
        let spliced = match members {
            Ok(ResultHead { is_error, meta: None, result_type, .. }) if result.trim_start().starts_with('{') => {
                let add_type = typed(&result_type);
                let end = result.trim_end();
                let body = end[..end.len() - 1].trim_end();
                let comma = if body.trim_start().len() > 1 { "," } else { "" };
                let is_error = is_error.as_ref().and_then(|e| e.get().parse::<bool>().ok()).unwrap_or(false);
                Some((is_error, body, comma, add_type))
            }
            _ => None,
        };
        let Some((is_error, body, comma, add_type)) = spliced else {
            let parsed: Json = serde_json::from_str(&result).unwrap_or(Json::Null);
            let entry = self.outcome_entry(Ok((self::is_error(&parsed), result_type)));
            let mut parsed = parsed;
            if let Some(members) = parsed.as_object_mut() {
                let slot = members.entry("_meta").or_insert_with(|| json!({}));
                if let Some(slot) = slot.as_object_mut() {
                    slot.insert(META_DECISION.into(), serde_json::from_str(self.meta()).unwrap_or(Json::Null));
                }
            }
            if self.stateless {
                parsed = stateless_result("tools/call", parsed);
            }
            return Answer { line: line(&response(id, Ok(parsed))), entry, asked };
        };
        let meta = self.meta();
        let mut out = Vec::with_capacity(result.len() + meta.len() + 96);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id).expect("an id serializes");
        out.extend_from_slice(br#","result":"#);
        out.extend_from_slice(body.as_bytes());
        out.extend_from_slice(comma.as_bytes());
        if add_type {
            out.extend_from_slice(br#""resultType":"complete","#);
        }
        out.extend_from_slice(br#""_meta":{""#);
        out.extend_from_slice(META_DECISION.as_bytes());
        out.extend_from_slice(br#"":"#);
        out.extend_from_slice(meta.as_bytes());
        out.extend_from_slice(b"}}}\n");
        Answer { line: out, entry: self.outcome_entry(Ok((is_error, result_type))), asked }
    }
}

/// [`decision_meta`] with the decision's text as the gateway made it.
#[derive(serde::Serialize)]
struct Meta<'a> {
    id: &'a str,
    outcome: &'a str,
    decision: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    access_request: Option<Json>,
}

/// The decision as a result's `_meta` carries it: its id, outcome, remit's decision JSON and the access request.
fn decision_meta(decided: &Decided, decision: Json) -> Json {
    let mut meta = Map::with_capacity(4);
    meta.insert("id".into(), Json::from(decided.id.as_str()));
    meta.insert("outcome".into(), Json::from(decided.outcome.as_str()));
    meta.insert("decision".into(), decision);
    if let Some(access) = &decided.access_request {
        meta.insert(
            "access_request".into(),
            json!({"id": access.id, "url": access.url,
                   "expires_at": remit_lang::value::format_timestamp(access.expires_at)}),
        );
    }
    Json::Object(meta)
}

/// What the agent reads when a call is denied or escalated.
fn refusal_text(decided: &Decided, decision: &Json) -> String {
    let strings = |key: &str| -> Vec<String> {
        decision
            .get(key)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .map(str::to_string)
            .collect()
    };
    let rules: Vec<String> =
        decision.get("rules").and_then(Json::as_array).into_iter().flatten().map(rule_text).collect();
    // What kept each mandate's closest grant from granting (`rule.unmatched`): what the agent could change.
    let closest: Vec<String> = decision
        .get("rules")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("closest"))
        .map(|grant| {
            let failed = grant.get("failed").map(|failed| {
                let text = |k: &str| failed.get(k).and_then(Json::as_str).unwrap_or("");
                match failed.get("value") {
                    Some(value) => {
                        format!(": `{}` is {value}, and the grant needs `{}`", text("attribute"), text("condition"))
                    }
                    None => format!(": the grant needs `{}`", text("condition")),
                }
            });
            format!("closest grant: {}{}", rule_text(grant), failed.unwrap_or_default())
        })
        .collect();
    let mut lines = Vec::new();
    match &decided.access_request {
        Some(access) => {
            let to = decision.get("escalate_to").and_then(Json::as_str).unwrap_or("the principal");
            lines.push(format!(
                "remit escalated this call: it waits for {to} as access request {} ({}, open until {}). \
                 Once it is approved, make the same call again; a call with other arguments needs its own approval.",
                access.id,
                access.url,
                remit_lang::value::format_timestamp(access.expires_at)
            ));
            let missing: Vec<String> = decision
                .get("missing_approvals")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("kind").and_then(Json::as_str))
                .map(str::to_string)
                .collect();
            if !missing.is_empty() {
                lines.push(format!("missing approvals: {}", missing.join(", ")));
            }
        }
        None => lines.push("remit denied this call.".to_string()),
    }
    lines.push(format!("reasons: {}", strings("reasons").join(", ")));
    if !rules.is_empty() {
        lines.push(format!("rules: {}", rules.join("; ")));
    }
    lines.extend(closest);
    lines.push(format!("decision {} under policy {}", decided.id, decided.policy));
    lines.join("\n")
}

/// A rule of a decision in words: `mandate: `rule` (at)`, and the attribute a fail-closed rule could not read.
fn rule_text(rule: &Json) -> String {
    let text = |k: &str| rule.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    let mut said = format!("{}: `{}` ({})", text("mandate"), text("rule"), text("at"));
    if let Some(unevaluable) = rule.get("unevaluable") {
        let attribute = unevaluable.get("attribute").and_then(Json::as_str).unwrap_or("");
        let problem = match unevaluable.get("problem").and_then(Json::as_str).unwrap_or("") {
            "missing" => "is missing",
            "mistyped" => "is not of its type",
            "incomparable" => "is in another currency than the policy's",
            "unsafe-path" => "is not a path that stays under its prefix",
            _ => "could not be read",
        };
        said.push_str(&format!(", which fails closed: `{attribute}` {problem}"));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{result_type, INTERNAL_ERROR};
    use std::time::Duration;

    fn forward(decision: &str) -> Forward {
        let decided = remit_gateway::core::Decided {
            id: "dec-1".into(),
            decision: decision.into(),
            outcome: "allow".into(),
            reasons: Vec::new(),
            access_request: None,
            logged: None,
            policy: "p".into(),
            shadowed: None,
            carried: Default::default(),
        };
        let upstream = Upstream::new(None, None, None, Duration::from_secs(1));
        Forward {
            upstream,
            params: Json::Null,
            decided,
            tool: "t".into(),
            meta: Default::default(),
            stateless: false,
            caller: None,
        }
    }

    /// The agent's answer spliced from the upstream's text is the answer the proxy would make by parsing the result
    /// and adding the decision to it: same JSON, same outcome entry, whatever the result's shape.
    #[test]
    fn a_spliced_answer_is_the_parsed_and_rebuilt_one() {
        let decision = r#"{"decision":"allow","reasons":["rule.allowed"],"obligations":[],"n":1.50}"#;
        let results = [
            r#"{"content":[{"type":"text","text":"hello\n"}]}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{"isError":false,"content":[]}"#,
            "{}",
            " { \n } ",
            r#" {"a": [1, 2.0, "\u00e9"], "b": {"c": null}} "#,
            r#"{"_meta":{"x":1},"content":[]}"#,
            r#"{"_meta":null}"#,
            r#"{"isError":"yes"}"#,
            r#"{"content":[],"resultType":"incomplete"}"#,
            r#"{"inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"s","resultType":"input_required"}"#,
            r#"{"resultType":"input_required","requestState":"s","_meta":{"x":1}}"#,
            "[1,2]",
            "null",
            "\"text\"",
        ];
        for (result, stateless) in results.iter().flat_map(|r| [(*r, false), (*r, true)]) {
            let mut forward = forward(decision);
            forward.stateless = stateless;
            let id = json!(7);
            let Answer { line, entry, asked } = forward.answer(&id, Ok(RawResult(result.to_string())));
            assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'), "one line for {result}");
            let answer: Json = serde_json::from_slice(&line).unwrap_or_else(|e| panic!("{e}: {result}"));
            let asks = result.contains(r#""resultType":"input_required""#);
            let expected = if asks && !stateless {
                // Not for an agent of the earlier revisions: refused, logged as the upstream answered.
                let entry = json!({"decision": "dec-1", "tool": "t", "is_error": false, "result_type": INPUT_REQUIRED});
                (response(&id, Err(not_relayed(INPUT_REQUIRED))), entry)
            } else {
                let mut result: Json = serde_json::from_str(result).unwrap();
                let rebuilt = forward.outcome_entry(Ok((is_error(&result), result_type(&result))));
                if let Some(members) = result.as_object_mut() {
                    let slot = members.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(slot) = slot.as_object_mut() {
                        let meta = json!({"id": "dec-1", "outcome": "allow",
                                          "decision": serde_json::from_str::<Json>(decision).unwrap()});
                        slot.insert(META_DECISION.into(), meta);
                    }
                }
                if stateless {
                    result = stateless_result("tools/call", result);
                }
                (response(&id, Ok(result)), rebuilt)
            };
            assert_eq!((answer, entry), expected, "for {result} (stateless: {stateless})");
            if asks && stateless {
                assert_eq!(expected.0["result"]["resultType"], INPUT_REQUIRED, "relayed as it came");
                assert_eq!(expected.1["result_type"], INPUT_REQUIRED, "logged as asking");
                assert_eq!(asked, Some(json!("s")), "its request state, for the next round: {result}");
            } else {
                assert_eq!(asked, None, "only a relayed question has a next round: {result}");
            }
        }
        // An upstream's error is passed on, and logged as the outcome.
        let forward = forward(decision);
        let Answer { line, entry, .. } = forward.answer(&json!("a"), Err(RpcError::new(-32000, "broken")));
        let answer: Json = serde_json::from_slice(&line).unwrap();
        assert_eq!(answer, json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32000, "message": "broken"}}));
        assert_eq!(entry["error"]["message"], "broken");
    }

    /// A continued round's error leaves the round for the next try only when the upstream refused the call (it did
    /// not run): not after an error of the proxy's own, a timeout say, after which the call may have run upstream.
    #[test]
    fn only_a_refused_round_is_there_for_the_next_try() {
        let mut forward = forward(r#"{"decision":"allow"}"#);
        forward.params = json!({"name": "t", "arguments": {"a": 1}, "requestState": "s1"});
        let identity = Identity { subject: "agent:a".into(), credential: None, scopes: Vec::new(), mandate: None };
        forward.in_stateless_revision(&identity);
        let refused = RpcError::from_json(&json!({"code": -32602, "message": "bad answer"}));
        let timed_out = RpcError::new(INTERNAL_ERROR, "the upstream did not answer in time");
        assert!(refused.refused_upstream && !timed_out.refused_upstream);
        assert_eq!(forward.answer(&json!(1), Err(refused)).asked, Some(json!("s1")));
        assert_eq!(forward.answer(&json!(2), Err(timed_out)).asked, None);
        // A first round (no `requestState`) has no round to keep again.
        let mut first = self::forward(r#"{"decision":"allow"}"#);
        first.params = json!({"name": "t", "arguments": {}});
        first.in_stateless_revision(&identity);
        let refused = RpcError::from_json(&json!({"code": -32602, "message": "bad"}));
        assert_eq!(first.answer(&json!(3), Err(refused)).asked, None);
    }

    /// A decision text that is not one JSON value (never made by the gateway) is carried as `null`, not spliced.
    #[test]
    fn a_broken_decision_text_is_not_spliced() {
        let forward = forward(r#"{"decision":"allow"} trailing"#);
        let meta: Json = serde_json::from_str(forward.meta()).unwrap();
        assert_eq!(meta, json!({"id": "dec-1", "outcome": "allow", "decision": null}));
    }
}
