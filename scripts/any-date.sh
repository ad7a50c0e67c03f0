#!/usr/bin/env bash
# Proves that nothing a user runs depends on today's date: the main job on the wallet, and the gateway and MCP proxy
# tests (the list below), run again with the clock a year and ten years ahead (Debian's faketime, which
# scripts/test-deps.sh installs). `.ci/run` runs it after the tests. DONT_FAKE_MONOTONIC keeps the monotonic clock real, so timed waits (and
# `remit serve --clock`, which advances with it) do not wait out the offset.
# Usage: scripts/any-date.sh [OFFSET…]   (default: +365d +3652d)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v faketime >/dev/null || { echo "faketime is missing: run scripts/test-deps.sh" >&2; exit 1; }
offsets=("$@")
[ ${#offsets[@]} -gt 0 ] || offsets=(+365d +3652d)
export DONT_FAKE_MONOTONIC=1
# The gateway's and the MCP proxy's tests: every test file that serves, decides with state or proxies. They and the
# release binary are built on today's clock, so that nothing is compiled under a faked one.
# (gateway_postgres is not among them: it starts a PostgreSQL server, which is not run under a faked clock.)
tests=(gateway_http gateway_core gateway_store gateway_log gateway_tokens gateway_data authzen authzen_todo
  authzen_search slow_clients any_date mcp_proxy mcp_hardening)
selected=()
for t in "${tests[@]}"; do selected+=(--test "$t"); done
cargo build --release --quiet
cargo test --quiet --no-run "${selected[@]}"
host="$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z-' 'A-Z_')"
for offset in "${offsets[@]}"; do
  echo "== the clock at $offset: $(faketime -f "$offset" date -u +%Y-%m-%dT%H:%M:%SZ)"
  faketime -f "$offset" ./scripts/main-job.sh examples/wallet > "${TMPDIR:-/tmp}/remit-main-job$offset.log" 2>&1 \
    || { cat "${TMPDIR:-/tmp}/remit-main-job$offset.log" >&2; echo "the main job failed at $offset" >&2; exit 1; }
  echo "the main job passed at $offset"
  # Cargo runs each test binary through faketime (its children, `remit` and the browser included, inherit it).
  env "CARGO_TARGET_${host}_RUNNER=faketime -f $offset" \
    cargo test --quiet "${selected[@]}"
done
