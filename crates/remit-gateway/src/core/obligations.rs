//! Carrying out an allowed decision's obligations — consuming single-use approvals, counting budgets in their
//! windows, recording operations — all or none, and what a call carried out kept for its next round. Depends on
//! nothing else of the core.

use serde_json::{json, Value as Json};

use super::Gateway;
use crate::store::{OperationRecord, StoreError, StoreResult, Tx};
use remit_lang::value::format_timestamp;
use remit_lang::wasm::meta::{BudgetMeta, PolicyMeta};

/// How long a round of a call is kept for the next one ([`Gateway::keep_round`]): the user may take a while to answer
/// what a tool asked.
pub const ROUND_TTL_SECONDS: i64 = 3600;

/// The single-use approvals an allowed call consumed and the budget counts it added (counter and window), for a later
/// round of the same call to be decided without them ([`Gateway::decide_continuing`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Carried {
    pub approvals: Vec<String>,
    pub counts: Vec<(String, String)>,
}

impl Carried {
    pub(super) fn has_approval(&self, id: &str) -> bool {
        self.approvals.iter().any(|a| a == id)
    }

    pub(super) fn has_count(&self, counter: &str, window: &str) -> bool {
        self.counts.iter().any(|(c, w)| c == counter && w == window)
    }
}

impl Gateway {
    /// Keeps what an allowed call carried out ([`Decided::carried`]) under `round` for [`ROUND_TTL_SECONDS`], for
    /// its next round ([`Gateway::decide_continuing`]), in the store, so that another gateway of the same store, or
    /// this one started again, continues it too.
    pub fn keep_round(&self, round: &str, carried: &Carried) -> StoreResult<()> {
        let now = self.clock.now();
        let text = serde_json::to_string(carried).expect("a round serializes");
        let mut tx = self.store.begin()?;
        tx.keep_round(round, &text, now + ROUND_TTL_SECONDS, now)?;
        tx.commit()
    }

    /// Carries out an allow's obligations; `Ok(Err(problem))` when one of them cannot be, and then nothing was
    /// written (every obligation is checked before any is carried out). Those the rounds the call `continues` carried
    /// out already are not carried out again. The approvals used (as the log lists them), and what the call has
    /// carried out with its earlier rounds.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn carry_out(
        &self,
        tx: &mut dyn Tx,
        decision: &Json,
        sent: &Json,
        meta: &PolicyMeta,
        chain: &[String],
        id: &str,
        now: i64,
        continues: Option<&Carried>,
    ) -> StoreResult<Result<(Vec<Json>, Carried), String>> {
        let none = Carried::default();
        let earlier = continues.unwrap_or(&none);
        let mut carried = earlier.clone();
        let obligations = decision.get("obligations").and_then(Json::as_array).cloned().unwrap_or_default();
        let operation = sent.pointer("/context/operation_id").and_then(Json::as_str).filter(|o| !o.is_empty());
        let tool = sent.pointer("/action/name").and_then(Json::as_str).unwrap_or("");
        enum Step {
            Consume(String),
            Count(String, String),
            Record(String),
        }
        let mut steps = Vec::new();
        let mut used = Vec::new();
        for obligation in &obligations {
            let kind = obligation.get("kind").and_then(Json::as_str).unwrap_or("");
            let field = |name: &str| obligation.get(name).and_then(Json::as_str).map(str::to_string);
            match (kind, field("id"), field("counter")) {
                ("consume-approval", Some(approval), _) => match tx.approval(&approval)? {
                    // Consumed by an earlier round of this call (and presented again, see `Gateway::fill`).
                    Some(a) if earlier.has_approval(&approval) && a.expires_at > now => {
                        used.push(json!({"id": a.id, "kind": a.kind, "approver": a.approver,
                                         "access_request": a.access_request, "earlier_round": true}));
                    }
                    Some(a) if !a.consumed && a.expires_at > now => {
                        used.push(json!({"id": a.id, "kind": a.kind, "approver": a.approver,
                                         "access_request": a.access_request}));
                        carried.approvals.push(approval.clone());
                        steps.push(Step::Consume(approval));
                    }
                    Some(_) => return Ok(Err(format!("approval `{approval}` is already consumed or expired"))),
                    None => return Ok(Err(format!("approval `{approval}` is not in the store"))),
                },
                ("increment-counter", _, Some(counter)) => {
                    // The module names the counter as it read it (`context.counters.NAME`); the store keeps a
                    // template's budget per instance (`counter_key`).
                    let budget = meta.budget_of(chain, &counter);
                    let window =
                        budget.and_then(|b| Some((counter_key(b, chain), window_key(&b.window, operation, now)?)));
                    match window {
                        // Counted by an earlier round of this call.
                        Some((key, window)) if earlier.has_count(&key, &window) => {}
                        Some((key, window)) => {
                            carried.counts.push((key.clone(), window.clone()));
                            steps.push(Step::Count(key, window));
                        }
                        None => return Ok(Err(format!("counter `{counter}` has no window the gateway can keep"))),
                    }
                }
                ("record-operation", Some(op), _) => steps.push(Step::Record(op)),
                _ => return Ok(Err(format!("unknown obligation {obligation}"))),
            }
        }
        for step in steps {
            match step {
                Step::Consume(approval) => {
                    if !tx.consume_approval(&approval, id, now)? {
                        // Read live, then consumed before this transaction could: by another gateway on a shared
                        // store (no lock keeps two replicas' batches apart). A conflict: the decision runs again,
                        // and then finds the approval consumed.
                        return Err(StoreError::conflict(format!(
                            "approval `{approval}` was consumed by another transaction meanwhile"
                        )));
                    }
                }
                Step::Count(counter, window) => {
                    tx.count(&counter, &window)?;
                }
                Step::Record(operation) => {
                    let record =
                        OperationRecord { operation, decision_id: id.to_string(), tool: tool.to_string(), time: now };
                    tx.record_operation(&record)?;
                }
            }
        }
        Ok(Ok((used, carried)))
    }
}

/// The store's name of the counter of `budget` in a decision under `chain`: a mandate's budget is its name, shared
/// by every decision of a chain that declares it; a template's budget is counted per instance, as
/// `TEMPLATE/ID/NAME` with the reference of the chain's instance of its template (`TEMPLATE/ID`: not its version,
/// so narrowing an instance keeps its count). A mandate's counter name is an identifier, which has no `/`, so the
/// two never meet; and NAME, an identifier too, is what follows the last `/`, so two instances or two budgets never
/// share a key. A template's budget whose name a mandate of the chain declares is that mandate's
/// ([`PolicyMeta::budgets_of`]), as the module reads one `context.counters.NAME` for both.
pub fn counter_key(budget: &BudgetMeta, chain: &[String]) -> String {
    if !budget.template {
        return budget.name.clone();
    }
    // `budgets_of` gives a template's budgets only under one of its instances (under sub-delegation, the chain's
    // instance of that template: a parent instance's budget is counted once for it and every instance below it);
    // without one (never so), its own key still meets no mandate's (one `/`, where an instance's has two).
    let reference = chain
        .iter()
        .filter_map(|step| PolicyMeta::instance_in(step))
        .find(|(template, _)| *template == budget.mandate)
        .map_or(budget.mandate.as_str(), |(_, reference)| reference);
    format!("{reference}/{}", budget.name)
}

/// The window a budget counts in at `now`: `operation:ID`, `hour:YYYY-MM-DDTHH`, `day:YYYY-MM-DD`, `total`.
/// `None` for a per-operation budget of a call without an operation id (the counter stays absent: the module
/// denies, `budget.exhausted`).
pub fn window_key(window: &str, operation: Option<&str>, now: i64) -> Option<String> {
    let time = format_timestamp(now);
    match window {
        "operation" => operation.map(|op| format!("operation:{op}")),
        "hour" => Some(format!("hour:{}", &time[..13])),
        "day" => Some(format!("day:{}", &time[..10])),
        "total" => Some("total".to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{counter_key, window_key};
    use remit_lang::wasm::meta::BudgetMeta;

    #[test]
    fn a_templates_budget_is_keyed_by_its_instances_reference_and_a_mandates_by_its_name() {
        let budget = |mandate: &str, template| BudgetMeta {
            mandate: mandate.into(),
            name: "purchases".into(),
            max: 2,
            window: "day".into(),
            template,
        };
        let chain = |last: &str| vec!["ceiling".to_string(), last.to_string()];
        let templates = budget("shop", true);
        assert_eq!(counter_key(&templates, &chain("shop/g-1@1")), "shop/g-1/purchases");
        // Any version of the instance: one count.
        assert_eq!(counter_key(&templates, &chain("shop/g-1@7")), "shop/g-1/purchases");
        assert_eq!(counter_key(&templates, &chain("shop/g-2@1")), "shop/g-2/purchases");
        assert_eq!(counter_key(&budget("ceiling", false), &chain("shop/g-1@1")), "purchases");
        assert_eq!(counter_key(&budget("ceiling", false), &chain("child")), "purchases");
    }

    #[test]
    fn budget_windows_are_keyed_by_operation_utc_hour_day_or_nothing() {
        let now = remit_lang::value::parse_timestamp("2026-12-03T15:30:00Z").unwrap();
        assert_eq!(window_key("operation", Some("op-1"), now).as_deref(), Some("operation:op-1"));
        assert_eq!(window_key("operation", None, now), None);
        assert_eq!(window_key("hour", None, now).as_deref(), Some("hour:2026-12-03T15"));
        assert_eq!(window_key("day", None, now).as_deref(), Some("day:2026-12-03"));
        assert_eq!(window_key("total", Some("op"), now).as_deref(), Some("total"));
        assert_eq!(window_key("fortnight", None, now), None);
    }
}
