#!/usr/bin/env bash
# Installs the MCP server the `remit mcp-proxy` tests put the proxy in front of (tests/mcp_proxy.rs):
# `@modelcontextprotocol/server-filesystem` from the npm registry, pinned in tests/mcp/package-lock.json.
# Idempotent: `npm ci` runs only when the installed tree is not the lock file's.
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp"
lock() { node -e 'const l=require(process.argv[1]);console.log(JSON.stringify(Object.keys(l.packages).filter(Boolean).map(k=>[k,l.packages[k].version]).sort()))' "$1"; }
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s <(lock ./package-lock.json) <(lock ./node_modules/.package-lock.json); then
  echo "== npm ci in tests/mcp"
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "mcp test dependencies: ready"
