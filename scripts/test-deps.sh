#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain and node, and nothing else (idempotent):
#   - Debian's rustc, its wasm32 standard library and lld: scripts/build-runtime.sh builds the decision module's
#     runtime (crates/remit-rt) with them, and tests/runtime_artifact.rs rebuilds it and compares the bytes;
#   - Debian's tzdata, the reference tests/time_zones.rs compares local times with (through Python's zoneinfo);
#   - Debian's chromium (a real browser for the picture and inbox tests), graphviz (`dot` checks our DOT),
#     neovim (a real client of `remit lsp`) and faketime (scripts/any-date.sh runs the gateway a year ahead);
#   - Playwright from PyPI, which drives /usr/bin/chromium (it never downloads a browser);
#   - the pinned npm packages the browser tests load from disk (tests/browser/package-lock.json);
#   - what the host libraries and the editor package need (scripts/test-deps-hosts.sh);
#   - the MCP server and the MCP client (Python SDK) the `remit mcp-proxy` tests run (scripts/test-deps-mcp.sh);
#   - Debian's PostgreSQL server, which the PostgreSQL store's tests start throwaway clusters of (scripts/postgres.sh;
#     their standbys with pg_basebackup, of Debian's postgresql-client, which the server's package depends on),
#     and Debian's openssl, whose command makes the certificates of tests/gateway_postgres.rs' client-certificate test
#     (not part of every Debian installation);
#   - Debian's HAProxy, the load balancer of tests/deploy_topology.rs (two `remit serve` behind it);
#     python3-yaml, which scripts/check-deploy.sh parses the compose file and the Helm chart with; podman and runc,
#     which scripts/container.sh builds and runs the gateway's image with (FROM scratch: nothing is pulled).
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v dot >/dev/null || missing+=(graphviz)
command -v nvim >/dev/null || missing+=(neovim)
[ -x /usr/bin/rustc ] || missing+=(rustc)
[ -d /usr/lib/rustlib/wasm32-unknown-unknown/lib ] || missing+=(libstd-rust-dev-wasm32)
[ -x /usr/bin/wasm-ld ] || missing+=(lld)
command -v faketime >/dev/null || missing+=(faketime)
[ -f /usr/share/zoneinfo/Europe/Berlin ] || missing+=(tzdata)
[ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v openssl >/dev/null || missing+=(openssl)
/usr/bin/python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
    || { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi
if ! command -v python3 >/dev/null; then
  $sudo apt-get install -y -qq python3 python3-pip >/dev/null 2>&1 \
    || { $sudo apt-get update -qq && $sudo apt-get install -y -qq python3 python3-pip >/dev/null; }
fi
if ! python3 -c 'import playwright.sync_api' 2>/dev/null; then
  pip=(python3 -m pip install --quiet --disable-pip-version-check 'playwright==1.65.2')
  "${pip[@]}" || "${pip[@]}" --break-system-packages
fi
if [ ! -f tests/browser/node_modules/mermaid/dist/mermaid.min.js ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
# The host libraries and the editor package (Python's wasmtime, npm packages):
./scripts/test-deps-hosts.sh
# The MCP server behind `remit mcp-proxy` in tests/mcp_proxy.rs:
./scripts/test-deps-mcp.sh
# The PostgreSQL server of the PostgreSQL store's tests (tests/support/postgres.rs starts it):
./scripts/postgres.sh install
