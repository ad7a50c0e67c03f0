#!/usr/bin/env bash
# Checks the deployment files of deploy/ with what this machine has (tests/deploy_files.rs runs it):
#   - deploy/remit.service with `systemd-analyze verify` (its ExecStart pointed at BINARY); any warning fails;
#   - deploy/haproxy.cfg with `haproxy -c`, the replicas' addresses given as its variables;
#   - deploy/compose.yaml and the Helm chart's Chart.yaml and values.yaml parsed as YAML, and its templates'
#     static parts (the template directives removed, each `{{ … }}` replaced by a placeholder) parsed too, with
#     what a platform team relies on asserted: two replicas or more, a PodDisruptionBudget, readiness on /ready
#     and liveness on /health, the store's password from a Secret, a non-root user. `helm` is not installed here,
#     so the templates are not rendered.
#
#   scripts/check-deploy.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?check-deploy.sh BINARY}"
python=/usr/bin/python3
"$python" -c 'import yaml' 2>/dev/null || { echo "check-deploy.sh: no python3-yaml: run scripts/test-deps.sh" >&2; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/remit-check-deploy-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

if command -v systemd-analyze >/dev/null; then
  sed "s|^ExecStart=/usr/local/bin/remit |ExecStart=$(realpath "$binary") |" deploy/remit.service >"$tmp/remit.service"
  grep -q "^ExecStart=$(realpath "$binary") serve --config" "$tmp/remit.service"
  warnings="$(systemd-analyze verify "$tmp/remit.service" 2>&1)" || { echo "$warnings" >&2; exit 1; }
  [ -z "$warnings" ] || { echo "systemd-analyze verify deploy/remit.service: $warnings" >&2; exit 1; }
  echo "deploy/remit.service: systemd-analyze verify passes"
else
  echo "deploy/remit.service: not checked (no systemd-analyze)"
fi

haproxy="$(command -v haproxy || echo /usr/sbin/haproxy)"
[ -x "$haproxy" ] || { echo "check-deploy.sh: no haproxy: run scripts/test-deps.sh" >&2; exit 1; }
REMIT_REPLICA_A=127.0.0.1:1 REMIT_REPLICA_B=127.0.0.1:2 REMIT_LB_BIND=127.0.0.1:8181 \
  "$haproxy" -c -q -f deploy/haproxy.cfg
echo "deploy/haproxy.cfg: haproxy -c passes"

"$python" - <<'PY'
import re, sys, pathlib, yaml

def load(path):
    with open(path) as f:
        return yaml.safe_load(f)

def static(text):
    """A template's static parts: directive-only lines dropped, each {{ ... }} a placeholder."""
    lines = [l for l in text.splitlines() if not re.fullmatch(r"\s*\{\{-?.*-?\}\}\s*", l)]
    return re.sub(r"\{\{-?.*?-?\}\}", "placeholder", "\n".join(lines))

compose = load("deploy/compose.yaml")
services = compose["services"]
assert {"postgres", "remit-a", "remit-b", "haproxy"} <= set(services), services.keys()
for name in ("remit-a", "remit-b"):
    replica = services[name]
    assert "REMIT_STORE_PASSWORD_FILE" in replica["environment"], name
    assert "store-password" in replica["secrets"], name
print("deploy/compose.yaml: postgres, two replicas, haproxy; the password a secret")

chart = pathlib.Path("deploy/helm/remit")
assert load(chart / "Chart.yaml")["apiVersion"] == "v2"
values = load(chart / "values.yaml")
assert values["replicaCount"] >= 2, values["replicaCount"]
kinds = {}
for template in sorted((chart / "templates").glob("*.yaml")):
    document = yaml.safe_load(static(template.read_text()))
    assert isinstance(document, dict) and "kind" in document, template
    kinds[document["kind"]] = document
assert {"Deployment", "Service", "PodDisruptionBudget", "Secret", "ConfigMap"} <= set(kinds), kinds.keys()
pod = kinds["Deployment"]["spec"]["template"]["spec"]
container = pod["containers"][0]
assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
assert container["livenessProbe"]["httpGet"]["path"] == "/health"
assert pod["securityContext"]["runAsNonRoot"] is True
assert any(v.get("secret") for v in pod["volumes"]), "the secrets are a Secret volume"
assert "store-password" in kinds["Secret"]["stringData"]
config = kinds["ConfigMap"]["data"]["remit.toml"]
assert 'store-password-file = "/etc/remit/secrets/store-password"' in config, config
assert "maxUnavailable" in kinds["PodDisruptionBudget"]["spec"]
print("deploy/helm/remit: %d templates parse (static parts); replicas %d, PDB, probes /ready and /health, Secret"
      % (len(kinds), values["replicaCount"]))
PY
