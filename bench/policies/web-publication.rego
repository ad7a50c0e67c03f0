# examples/web-publication/policy.remit in Rego, for the benchmark: `data.remit.result` holds remit's outcome
# ("allow" / "deny" / "escalate") and reason codes, computed from the same request JSON through the mandate chain.
package remit

import rego.v1

levels := {"research": 0, "draft": 1, "local_change": 2, "release_candidate": 3, "publish": 4}

tools := {
	"edit_page": {"classes": set(), "level": "draft", "side_effects": true},
	"edit_code": {"classes": set(), "level": "local_change", "side_effects": true},
	"run_checks": {"classes": {"read_only"}, "level": "research", "side_effects": false},
	"read_file": {"classes": {"read_only"}, "level": "research", "side_effects": false},
	"web_search": {"classes": {"read_only"}, "level": "research", "side_effects": false},
	"web_publish": {"classes": {"public_publication"}, "level": "publish", "side_effects": true},
	"ftp_upload": {"classes": {"public_publication"}, "level": "publish", "side_effects": true},
	"sftp_upload": {"classes": {"public_publication"}, "level": "publish", "side_effects": true},
	"social_post": {"classes": {"public_publication"}, "level": "publish", "side_effects": true},
	"search_engine_ping": {"classes": {"public_publication"}, "level": "publish", "side_effects": true},
	"send_email": {"classes": {"external_communication"}, "level": "publish", "side_effects": true},
	"social_dm": {"classes": {"external_communication"}, "level": "publish", "side_effects": true},
	"calendar_invite": {"classes": {"external_communication"}, "level": "publish", "side_effects": true},
}

# Each mandate: parent, holder, maximum level, and its grants as (tool or class, condition name).
mandates := {
	"web_root": {"parent": null, "holder": "agent:orchestrator", "max": "publish",
		"grants": [["read_only", ""], ["edit_page", ""], ["edit_code", ""], ["public_publication", ""]]},
	"web_research": {"parent": "web_root", "holder": "agent:research", "max": "research", "grants": [["read_only", ""]]},
	"web_content": {"parent": "web_root", "holder": "agent:content", "max": "draft",
		"grants": [["read_only", ""], ["edit_page", "lang_en"]]},
	"web_localization": {"parent": "web_root", "holder": "agent:localization", "max": "draft",
		"grants": [["read_only", ""], ["edit_page", "lang_other"]]},
	"web_code": {"parent": "web_root", "holder": "agent:code", "max": "local_change",
		"grants": [["read_only", ""], ["edit_code", ""]]},
	"web_qa": {"parent": "web_root", "holder": "agent:qa", "max": "research", "grants": [["read_only", ""]]},
	"web_release": {"parent": "web_root", "holder": "agent:release", "max": "publish",
		"grants": [["public_publication", ""]]},
	"web_indexing": {"parent": "web_root", "holder": "agent:indexing", "max": "research", "grants": [["read_only", ""]]},
	"announcements": {"parent": null, "holder": "agent:social", "max": "publish", "grants": [["social_post", ""]]},
}

tool := input.action.name

spec := tools[tool]

args := object.get(input.action, "arguments", {})

ctx := input.context

leaf := ctx.mandate

chain := [m | some m in [mandates[leaf].parent, leaf]; m != null]

covers(target) if target == tool

covers(target) if spec.classes[target]

holds("") := true

holds("lang_en") := true if args.lang == "en"

holds("lang_other") := true if args.lang in {"de", "fr", "es", "it", "nl"}

early contains "tool.undeclared" if not tools[tool]

early contains "mandate.unknown" if {
	tools[tool]
	not mandates[leaf]
}

early contains "subject.not-holder" if {
	tools[tool]
	mandates[leaf].holder != input.subject.id
}

in_root if chain[0] == "web_root"

deny contains "mandate.not-yet-valid" if ctx.now < "2026-11-01T00:00:00Z"

deny contains "mandate.expired" if ctx.now >= "2027-01-01T00:00:00Z"

deny contains "level.exceeded" if {
	some m in chain
	levels[spec.level] > levels[mandates[m].max]
}

prices := {"on request", "auf Anfrage", "sur demande", "a consultar", "su richiesta", "op aanvraag"}

deny contains "rule.forbidden" if {
	in_root
	tool == "edit_page"
	not prices[args.price_text]
}

deny contains "rule.forbidden" if {
	in_root
	tool == "edit_page"
	not args.claims_guarantee == false
}

deny contains "rule.forbidden" if {
	in_root
	spec.classes.external_communication
}

deny contains "rule.forbidden" if {
	in_root
	tool in {"social_post", "search_engine_ping"}
}

deny contains "scope.outside" if {
	in_root
	spec.side_effects
	not startswith(input.resource.id, "site/services/consulting/")
}

deny contains "operation.missing-id" if {
	spec.classes.public_publication
	object.get(ctx, "operation_id", "") == ""
}

deny contains "operation.missing-id" if {
	chain[0] == "announcements"
	spec.side_effects
	object.get(ctx, "operation_id", "") == ""
}

deny contains "fact.stale" if {
	in_root
	spec.classes.public_publication
	object.get(object.get(ctx, "facts", {}), "price_sheet", 0) != 12
}

# A mandate of the chain without a matching grant: `otherwise deny` (the default).
deny contains "rule.unmatched" if {
	some m in chain
	not granted(m)
}

granted(m) if {
	some g in mandates[m].grants
	covers(g[0])
	holds(g[1])
}

gate_kinds contains "human_publication" if spec.classes.public_publication

gate_kinds contains "technical_release" if {
	leaf == "web_release"
	spec.classes.public_publication
}

escalate contains "approval.missing" if {
	some kind in gate_kinds
	not approved(kind)
}

approved(kind) if {
	some a in ctx.approvals
	a.kind == kind
	not a.consumed
	a.manifest == args.manifest
	a.issued_at <= ctx.now
	ctx.now < a.expires_at
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
