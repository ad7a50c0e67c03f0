#!/usr/bin/env bash
# Installs what the inbox's browser test needs (tests/browser/inbox.py): Debian's chromium and the Playwright
# Python package, which drives the system browser (it downloads no browser of its own). Idempotent.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v python3 >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >/dev/null
fi
if ! python3 -c "import playwright.sync_api" >/dev/null 2>&1; then
  python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq python3-pip >/dev/null; }
  python3 -m pip install -q playwright || python3 -m pip install -q --break-system-packages playwright
fi
