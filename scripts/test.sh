#!/usr/bin/env bash
# The README's test command: installs the test dependencies (scripts/test-deps.sh), then runs `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/test-deps.sh
exec cargo test "$@"
