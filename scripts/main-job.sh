#!/usr/bin/env bash
# The main job on one example: check it, evaluate each request of its `requests/` folder, run its policy tests.
# Usage: scripts/main-job.sh [examples/NAME]   (default: examples/wallet)
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-examples/wallet}"
cargo build --release --quiet
remit=target/release/remit

echo "== remit check $example"
"$remit" check "$example"

for request in "$example"/requests/*.json; do
  echo "== remit eval $example --request $request"
  "$remit" eval "$example" --request "$request"
done

echo "== remit test $example"
"$remit" test "$example"
