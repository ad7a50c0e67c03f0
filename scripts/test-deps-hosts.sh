#!/usr/bin/env bash
# Installs what the host-library, editor-package and tutorial tests need (tests/hosts.rs, tests/editor.rs), pinned:
#   - Python 3 with venv (apt-get, only when missing), and a virtualenv at hosts/python/.venv with the `wasmtime`
#     wheel pinned in hosts/python/requirements.txt;
#   - `npm ci` (from the committed package-lock.json) in hosts/js/ (typescript) and editors/vscode/ (vscode-textmate,
#     vscode-oniguruma, vscode-languageclient).
# Idempotent: a second run changes nothing and needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "== apt-get install python3 python3-venv"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  $sudo_ apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
fi

venv=hosts/python/.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "== python3 -m venv $venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -m pip freeze 2>/dev/null | grep -qxF -f hosts/python/requirements.txt; then
  echo "== pip install -r hosts/python/requirements.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r hosts/python/requirements.txt
fi

for dir in hosts/js editors/vscode; do
  # `npm ci` only when the installed tree is not the lock file's.
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || ! cmp -s <(node -e 'const l=require("./'"$dir"'/package-lock.json");console.log(JSON.stringify(Object.keys(l.packages).filter(Boolean).map(k=>[k,l.packages[k].version]).sort()))') \
      <(node -e 'const l=require("./'"$dir"'/node_modules/.package-lock.json");console.log(JSON.stringify(Object.keys(l.packages).filter(Boolean).map(k=>[k,l.packages[k].version]).sort()))'); then
    echo "== npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
echo "host test dependencies: ready"
