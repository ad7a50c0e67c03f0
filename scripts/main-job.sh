#!/usr/bin/env bash
# The main job on one example: check it, compile it to a WebAssembly decision module, evaluate each request of its
# `requests/` folder through the module (and confirm the interpreter gives the same bytes), run its policy tests.
# Usage: scripts/main-job.sh [examples/NAME [--serve]]   (default: examples/wallet)
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-examples/wallet}"
# Building is not part of the demo: under faketime (scripts/any-date.sh runs this a year ahead) cargo runs without
# libfaketime's preload, on the real clock (under it, rustc's `-vV` probe hangs on a lock).
if [ -n "${FAKETIME:-}" ]; then env -u LD_PRELOAD cargo build --release --quiet; else cargo build --release --quiet; fi
remit="${CARGO_TARGET_DIR:-target}/release/remit"
out="$(mktemp -d)"
module="$out/$(basename "$example").wasm"

# The demo's instant. The examples' requests are of early December 2026 and their mandates are valid then, so the
# check and the gateway below run at that instant (`remit check --now`, `remit serve --clock`, whose clock starts
# there and advances in real time): the main job gives the same decisions on any date. Without them both use the
# system clock, and a mandate past its `valid … until` denies `mandate.expired` (`remit check` warns beforehand).
demo_now=2026-12-03T15:30:00Z

echo "== remit check $example --now $demo_now"
"$remit" check "$example" --now "$demo_now"

echo "== remit build $example -o $module"
"$remit" build "$example" -o "$module"

for request in "$example"/requests/*.json; do
  echo "== remit eval $module --request $request"
  "$remit" eval "$module" --request "$request" | tee "$out/wasm.json"
  "$remit" eval "$example" --engine interpreter --request "$request" > "$out/interpreter.json"
  cmp -s "$out/wasm.json" "$out/interpreter.json" || { echo "the module and the interpreter disagree" >&2; exit 1; }
done

echo "== remit test $example"
"$remit" test "$example"

# The gateway, on the wallet (the example whose principal, agent and approval the steps below name): serve it on a
# free loopback port, let Alice grant her shopping agent her mandate from the wallet's template (`remit grants
# grant`: her three merchants, 100 USD a payment, until the ceiling ends), send the agent's 80 USD payment (escalates
# to Alice's inbox: the instance acts for her), approve it as Alice, retry
# (allowed, the single-use approval consumed), send it again in another operation (escalates again: the approval is
# used up) and in the same one (denied: one payment per operation), then verify the decision log's hash chain and
# print the operation's receipt. `--serve` keeps the gateway running afterwards, until Ctrl-C.
[ "$(basename "$example")" = wallet ] || exit 0
echo "== remit serve $example --clock $demo_now (gateway on 127.0.0.1, a free port)"
store="$out/wallet.db"
"$remit" serve "$example" --store "sqlite:$store" --listen 127.0.0.1:0 --clock "$demo_now" \
  --inbox-token user:alice=alice-demo-token --admin-token ops=ops-demo-token > "$out/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "listening on" "$out/serve.log" 2>/dev/null && break; sleep 0.1; done
url="$(sed -n 's/^remit gateway listening on //p' "$out/serve.log")"
[ -n "$url" ] || { cat "$out/serve.log" >&2; echo "the gateway did not start" >&2; exit 1; }
cat "$out/serve.log"

# One AuthZEN evaluation; prints `decision` and, when there is one, the access request's id. In Node (its built-in
# `fetch`), which every machine this runs on has, as it has the Rust toolchain.
evaluate() {
  node - "$url" "${1:-op-main-job}" <<'JS'
const [url, operation] = process.argv.slice(2);
const body = {
  subject: { type: "agent", id: "agent:shopper",
             properties: { credential: { id: "cred-alice-shopper-3", scopes: ["payments.write"] } } },
  action: { name: "make_payment", properties: { merchant: "acme-grocer", amount: "80.00 USD" } },
  resource: { type: "order", id: "order:acme-20261203-118" },
  context: { operation_id: operation },
};
(async () => {
  const response = await fetch(url + "/access/v1/evaluation",
                               { method: "POST", headers: { "content-type": "application/json" },
                                 body: JSON.stringify(body) });
  const answer = await response.json();
  const context = answer.context || {};
  const access = context.access_request || {};
  // `True`/`False`, as the checks below (and the README) spell the AuthZEN decision.
  console.log(answer.decision ? "True" : "False", access.id || "-", (context.reasons || []).join(" "));
})().catch((e) => { console.error(e); process.exit(1); });
JS
}
echo "== remit grants grant personal_shopping (as Alice): her mandate, granted at run time"
REMIT_TOKEN=alice-demo-token "$remit" grants grant personal_shopping --principal user:alice --holder agent:shopper \
  --param 'merchants=["acme-grocer","globex-pharmacy","initech-hardware"]' --param 'cap=100.00 USD' \
  --param until=2027-01-01T00:00:00Z --gateway "$url"

echo "== POST $url/access/v1/evaluation: the agent pays 80 USD"
read -r decision access reasons < <(evaluate)
echo "decision $decision, access request $access ($reasons)"
[ "$decision" = False ] && [ "$access" != - ] || { echo "expected an escalation to Alice's inbox" >&2; exit 1; }

echo "== remit approvals approve $access (as Alice)"
REMIT_TOKEN=alice-demo-token "$remit" approvals approve "$access" --gateway "$url"

echo "== the same call again: allowed, and the approval is consumed"
read -r decision _ reasons < <(evaluate)
echo "decision $decision ($reasons)"
[ "$decision" = True ] || { echo "expected the approved call to be allowed" >&2; exit 1; }
read -r decision access reasons < <(evaluate op-main-job-2)
echo "the same payment in another operation: decision $decision, access request $access ($reasons)"
[ "$decision" = False ] && [ "$reasons" = approval.missing ] || { echo "a single-use approval allows once" >&2; exit 1; }
read -r decision _ reasons < <(evaluate)
echo "a second payment in the first operation: decision $decision ($reasons)"
[ "$decision" = False ] || { echo "the budget allows one payment per operation" >&2; exit 1; }

echo "== remit audit verify $store; remit audit receipt --operation op-main-job"
"$remit" audit verify "$store"
"$remit" audit receipt --operation op-main-job --store "$store"

if [ "${2:-}" = --serve ]; then
  echo "== serving $url (inbox: $url/inbox, Alice's token alice-demo-token); Ctrl-C stops it"
  wait "$server"
fi
