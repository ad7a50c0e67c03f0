# examples/wallet/policy.remit in Rego, for the benchmark: `data.remit.decision` is remit's outcome
# ("allow" / "deny" / "escalate") and `data.remit.reasons` its reason codes, computed from the same request JSON.
package remit

import rego.v1

tools := {
	"view_orders": {"classes": {"read_only"}, "scopes": {"orders.read", "wallet.all"}},
	"add_to_cart": {"classes": set(), "scopes": {"cart.write", "wallet.all"}},
	"subscribe": {"classes": {"financial_operation", "commercial_commitment"}, "scopes": {"subscriptions.write", "wallet.all"}},
	"export_purchase_history": {"classes": {"data_disclosure"}, "scopes": {"orders.read", "wallet.all"}},
	"make_payment": {"classes": {"financial_operation", "commercial_commitment"}, "scopes": set()},
}

merchants := {"acme-grocer", "globex-pharmacy", "initech-hardware"}

tool := input.action.name

args := object.get(input.action, "arguments", {})

ctx := input.context

spec := tools[tool]

held := {s | some s in input.subject.credential.scopes}

# Resolution: tool, mandate, holder.
early contains "tool.undeclared" if not tools[tool]

early contains "mandate.unknown" if {
	tools[tool]
	ctx.mandate != "wallet"
}

early contains "subject.not-holder" if {
	tools[tool]
	ctx.mandate == "wallet"
	input.subject.id != "agent:shopper"
}

deny contains "credential.scope-missing" if {
	count(spec.scopes) > 0
	count(spec.scopes & held) == 0
}

deny contains "mandate.not-yet-valid" if ctx.now < "2026-11-01T00:00:00Z"

deny contains "mandate.expired" if ctx.now >= "2027-01-01T00:00:00Z"

deny contains "rule.forbidden" if spec.classes.data_disclosure

amount_usd := to_number(parts[0]) if {
	parts := split(args.amount, " ")
	count(parts) == 2
	parts[1] == "USD"
}

deny contains "limit.exceeded" if {
	spec.classes.financial_operation
	not amount_usd <= 100
}

deny contains "operation.missing-id" if {
	spec.classes.financial_operation
	object.get(ctx, "operation_id", "") == ""
}

deny contains "budget.exhausted" if {
	tool == "make_payment"
	not object.get(object.get(ctx, "counters", {}), "payment_per_op", 1) < 1
}

granted if {
	tool in {"make_payment", "add_to_cart"}
	merchants[args.merchant]
}

granted if spec.classes.read_only

escalate contains "rule.unmatched" if not granted

escalate contains "approval.missing" if {
	tool == "make_payment"
	not amount_usd <= 60
	not approved
}

approved if {
	some a in ctx.approvals
	a.kind == "commercial_terms"
	not a.consumed
}

decision := "deny" if {
	count(early) > 0
} else := "deny" if {
	count(deny) > 0
} else := "escalate" if {
	count(escalate) > 0
} else := "allow"

reasons := early if {
	count(early) > 0
} else := deny if {
	count(deny) > 0
} else := escalate if {
	count(escalate) > 0
} else := {"rule.allowed"}

result := {"decision": decision, "reasons": reasons}
