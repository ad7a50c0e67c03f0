#!/usr/bin/env bash
# The main job on one example: check it, compile it to a WebAssembly decision module, evaluate each request of its
# `requests/` folder through the module (and confirm the interpreter gives the same bytes), run its policy tests.
# Usage: scripts/main-job.sh [examples/NAME]   (default: examples/wallet)
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-examples/wallet}"
cargo build --release --quiet
remit=target/release/remit
out="$(mktemp -d)"
module="$out/$(basename "$example").wasm"

echo "== remit check $example"
"$remit" check "$example"

echo "== remit build $example -o $module"
"$remit" build "$example" -o "$module"

for request in "$example"/requests/*.json; do
  echo "== remit eval $module --request $request"
  "$remit" eval "$module" --request "$request" | tee "$out/wasm.json"
  "$remit" eval "$example" --request "$request" > "$out/interpreter.json"
  cmp -s "$out/wasm.json" "$out/interpreter.json" || { echo "the module and the interpreter disagree" >&2; exit 1; }
done

echo "== remit test $example"
"$remit" test "$example"
