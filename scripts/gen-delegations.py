#!/usr/bin/env python3
"""Generates a policy set with many delegated mandates of realistic size, for timing the narrowing check and
`remit diff` (docs/narrowing.md, "Speed"). Nothing it writes is committed.

    scripts/gen-delegations.py OUT_DIR [--mandates 1000] [--version a|b] [--widening PERCENT] [--seed N] [--world]

Version `a` is the base. Version `b` is the same policy with its files renamed, its mandates and rules in
another order, five sub-mandates widened, five edited to narrow (an edit that changes nothing, on a grandchild
already capped lower, is reported unchanged), one added and one removed; it prints the names it changed. Every sub-mandate restates its parent's terms, so version `a` checks clean (unless
`--widening` makes that percentage of sub-mandates drop the restated data scope). `--world` adds the world's
conditions (docs/language.md): every root forbids spending above the resource's budget or on a resource it does
not own, messages from agents outside its team (a relation), publishing outside Berlin office hours (a calendar)
and tickets due more than 30 days after `now`; sub-mandates restate them, and half their payment grants compare the
resource's team with the agent's.
"""

import argparse
import os
import random

ROOTS = 10
CLASSES = ["spend", "message", "publish", "records", "tickets", "admin_ops"]
CLASS_PARAMS = {
    "spend": "amount: money, merchant: string",
    "message": "recipient: string",
    "tickets": "count: int, tags: set<string>",
    "publish": "tier: tier",
}
MERCHANTS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"]
TIERS = ["basic", "pro", "max"]
LEVELS = ["research", "draft", "local_change", "release_candidate", "publish"]


WORLD = False


def catalog():
    out = ["// Generated catalog: tools in six classes.", "enum tier { basic, pro, max }", "context region: string", ""]
    if WORLD:
        out += [
            "resource doc {\n  owner: string\n  team: string\n  budget: money\n}",
            "subject agent {\n  team: string\n}",
            "relation member_of(string, string)",
            'calendar office_hours in "Europe/Berlin" {\n  mon..fri 08:00-18:00\n  closed on holidays\n}',
            "",
        ]
    for c in CLASSES:
        params = f"({CLASS_PARAMS[c]})" if c in CLASS_PARAMS else ""
        if WORLD and c == "tickets":
            params = params[:-1] + ", due: timestamp)"
        out.append(f'effect {c}{params} "generated class {c}"')
    out.append("")
    tools = []
    for i in range(42):
        c = CLASSES[i % len(CLASSES)]
        name = f"{c}_{i}"
        params = ["path: string", "tier: tier", "count: int", "tags: set<string>", "manifest: string"]
        if WORLD:
            params.append("due: timestamp")
        if c == "spend":
            params = ["amount: money", "merchant: string"] + params
        if c == "message":
            params = ["recipient: string"] + params
        level = LEVELS[i % len(LEVELS)]
        side = "" if c == "records" else "\n  side effects"
        out.append(f"tool {name}({', '.join(params)}) {{\n  effects {c}\n  level {level}{side}\n}}\n")
        tools.append((name, c))
    return "\n".join(out), tools


def root_rules(r, rng):
    """The terms of a root: grants on classes and tools, prohibitions, a limit, a scope, gates, operation id,
    fact and budget."""
    merchants = rng.sample(MERCHANTS, 6)
    grants = [
        f'allow spend where args.amount <= {rng.choice([500, 1000, 2000])} USD and args.merchant in [{", ".join(chr(34) + m + chr(34) for m in merchants)}]',
        'allow message where args.recipient under "team@" or args.recipient under "partners@"',
        "allow records",
        "allow tickets where args.count <= 50",
        "allow publish where args.tier in [\"basic\", \"pro\"]",
    ]
    terms = [
        'forbid message where args.recipient under "press@"',
        'forbid spend where args.merchant == "casino"',
        "forbid admin_ops",
        'forbid tickets where args.tags contains "legal"',
        f"limit spend: args.amount <= {rng.choice([300, 800, 1500])} USD",
        f'scope side effects: resource.id under "dept{r}/"',
        "require approval commercial_terms for spend where args.amount > 100 USD",
        "require approval human_publication for publish",
        "require operation id for spend",
        f"fact price_sheet_{r} at version {rng.randint(1, 9)} for spend",
        f"budget tickets_{r}: at most 20 calls to tickets per day",
    ]
    if WORLD:
        terms += [
            "forbid spend where args.amount > resource.budget or resource.owner != principal",
            f'forbid message where not member_of(subject, "team:dept{r}")',
            "forbid publish where now not in office_hours",
            "forbid tickets where args.due - now > 30d",
        ]
    return merchants, grants, terms


def child_grants(merchants, rng, tools):
    """Narrower grants: fewer merchants, lower amounts, single tools of the root's classes."""
    picked = rng.sample(merchants, 3)
    grants = [
        f'allow spend where args.amount <= {rng.choice([50, 100, 200])} USD and args.merchant in [{", ".join(chr(34) + m + chr(34) for m in picked)}]',
        f'allow {rng.choice([t for t, c in tools if c == "records"])}',
        f'allow {rng.choice([t for t, c in tools if c == "tickets"])} where args.count <= {rng.choice([5, 10, 20])} and args.tier != "max"',
    ]
    if WORLD and rng.random() < 0.5:
        grants[0] += " and resource.team == subject.team"
    if rng.random() < 0.5:
        grants.append('allow message where args.recipient under "team@"')
    if rng.random() < 0.5:
        grants.append(f'allow {rng.choice([t for t, c in tools if c == "publish"])} where args.tier == "basic"')
    return grants


def mandate(name, parent, holder, purpose, props, rules):
    head = f"mandate {name} under {parent} {{" if parent else f'mandate {name} for "owner:dept" {{'
    body = [f'  holder "{holder}"', f'  purpose "{purpose}"'] + [f"  {p}" for p in props] + [""] + [f"  {r}" for r in rules]
    return "\n".join([head] + body + ["}", ""])


def generate(n, version, widening, seed):
    rng = random.Random(seed)
    text, tools = catalog()
    files = {"catalog.remit": text}
    per_root = n // ROOTS
    mandates = []  # (file, name, text, rules)
    changed = {"widened": [], "narrowed": []}
    for r in range(ROOTS):
        merchants, grants, terms = root_rules(r, rng)
        root = f"dept{r}"
        props = ["valid from 2026-01-01T00:00:00Z until 2027-01-01T00:00:00Z", "max level publish", "delegation depth 2"]
        mandates.append((r, root, props, grants + terms))
        teams = []
        for k in range(per_root):
            grandchild = k >= per_root * 4 // 5 and teams
            parent = rng.choice(teams) if grandchild else (root, terms, props, grants)
            pname, pterms = parent[0], parent[1]
            name = f"{root}_agent{k}"
            month = rng.randint(1, 6)
            cprops = [
                f"valid from 2026-{month:02d}-01T00:00:00Z until 2026-{month + 6:02d}-01T00:00:00Z",
                f"max level {rng.choice(LEVELS[2:])}",
                "delegation depth 0" if grandchild else "delegation depth 1",
            ]
            if grandchild:
                # Inside the team's window, whatever it is: restate the team's.
                cprops[0] = parent[2][0]
                cprops[1] = parent[2][1]
            if grandchild:
                # Within the team's grants: some of them, the payment one lowered further.
                own = [g + " and args.amount <= 10 USD" if g.startswith("allow spend") else g for g in parent[3]]
                own = own[: max(2, len(own) - 1)]
            else:
                own = child_grants(merchants, rng, tools)
            cterms = list(pterms)
            if rng.random() < widening / 100.0:
                cterms = [t for t in cterms if not t.startswith("scope")]
            extra = [f'forbid message where args.recipient under "team@{k}"']
            rules = own + cterms + extra
            mandates.append((r, name, cprops, rules, pname))
            if not grandchild:
                teams.append((name, cterms + extra, cprops, own))
    if version == "b":
        # Widen five, narrow five, add one, remove one; rename files and reorder everything else.
        subs = [m for m in mandates if len(m) == 5]
        rng2 = random.Random(seed + 1)
        targets = rng2.sample(subs, 11)
        for m in targets[:5]:
            m[3][0] = m[3][0].replace("args.amount <= ", "args.amount <= 9")  # 50 -> 950 etc.: wider
            changed["widened"].append(m[1])
        for m in targets[5:10]:
            m[3].append("forbid spend where args.amount > 20 USD")
            changed["narrowed"].append(m[1])
        removed = targets[10]
        # The removed mandate must have no sub-mandates: pick a grandchild-free one by construction below.
        if not any(len(m) == 5 and m[4] == removed[1] for m in mandates):
            mandates.remove(removed)
            changed["removed"] = [removed[1]]
        first = subs[0]
        mandates.append((first[0], "dept0_newcomer", first[2], list(first[3]), first[4]))
        changed["added"] = ["dept0_newcomer"]
        rng2.shuffle(mandates)
        for m in mandates:
            rng2.shuffle(m[3])
        files = {"tools.remit": text}
    for m in mandates:
        r = m[0]
        fname = f"dept{r}.remit" if version == "a" else f"policies/department-{r}.remit"
        parent = m[4] if len(m) == 5 else None
        block = mandate(m[1], parent, f"agent:{m[1]}", f"generated mandate {m[1]}", m[2], m[3])
        files[fname] = files.get(fname, "") + block + "\n"
    return files, changed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mandates", type=int, default=1000)
    ap.add_argument("--version", choices=["a", "b"], default="a")
    ap.add_argument("--widening", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--world", action="store_true")
    args = ap.parse_args()
    global WORLD
    WORLD = args.world
    files, changed = generate(args.mandates, args.version, args.widening, args.seed)
    for name, text in files.items():
        path = os.path.join(args.out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    if args.version == "b":
        for k, v in sorted(changed.items()):
            print(f"{k}: {' '.join(sorted(v))}")


if __name__ == "__main__":
    main()
