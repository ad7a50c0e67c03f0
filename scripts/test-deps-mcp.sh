#!/usr/bin/env bash
# Installs what the `remit mcp-proxy` tests (tests/mcp_proxy.rs) need, pinned:
#   - the MCP servers the proxy is put in front of: `@modelcontextprotocol/server-filesystem` and
#     `@modelcontextprotocol/server-everything` from the npm registry (tests/mcp/package-lock.json);
#   - a real MCP client: the official Python SDK, `mcp` from PyPI (tests/mcp/requirements.txt), in a virtualenv at
#     tests/mcp/.venv (python3 with venv comes from scripts/test-deps-hosts.sh).
# Idempotent: `npm ci` and `pip install` run only when what is installed is not what is pinned.
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp"
lock() { node -e 'const l=require(process.argv[1]);console.log(JSON.stringify(Object.keys(l.packages).filter(Boolean).map(k=>[k,l.packages[k].version]).sort()))' "$1"; }
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s <(lock ./package-lock.json) <(lock ./node_modules/.package-lock.json); then
  echo "== npm ci in tests/mcp"
  npm ci --no-audit --no-fund --loglevel=error
fi
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "== python3 -m venv tests/mcp/$venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip freeze 2>/dev/null | grep -qxF -f requirements.txt; then
  echo "== pip install -r tests/mcp/requirements.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
fi
echo "mcp test dependencies: ready"
