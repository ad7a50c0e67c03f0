#!/usr/bin/env bash
# Builds the gateway's image from deploy/Containerfile with Debian's podman (no base image is pulled: FROM scratch,
# the context from scripts/release.sh --image-context) and runs it once: /health and /ready answer, a decision is
# allowed, `podman stop` (SIGTERM) drains it and it exits 0. tests/deploy_files.rs runs it.
#
#   scripts/container.sh BINARY
#
# On this kind of machine (a container itself, without CAP_SYS_RESOURCE, cgroups v1/v2 hybrid) podman's default
# runtime crun refuses to start any container ("setrlimit RLIMIT_NOFILE: Operation not permitted", then "cgroups in
# hybrid mode not supported"); runc starts it when the limits are given no higher than the caller's, and with the
# host's network (no network helper needed). Elsewhere plain `podman run` works.
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?container.sh BINARY}"
command -v podman >/dev/null || { echo "container.sh: no podman: run scripts/test-deps.sh" >&2; exit 1; }
command -v runc >/dev/null || { echo "container.sh: no runc: run scripts/test-deps.sh" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/remit-container-XXXXXX")"
tag="localhost/remit-test:$$"
name="remit-test-$$"
cleanup() {
  podman --runtime runc rm -f "$name" >/dev/null 2>&1 || true
  podman rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
./scripts/release.sh --binary "$binary" --out "$work/dist" --image-context "$work/image" >/dev/null
podman build -q --layers=false -t "$tag" "$work/image" >/dev/null
echo "built $tag FROM scratch: $(podman image inspect "$tag" --format '{{.Size}}') bytes, user $(podman image inspect "$tag" --format '{{.Config.User}}')"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="pep-container-$$-token"
podman --runtime runc run -d --name "$name" --network host \
  --ulimit nofile="$(ulimit -n)":"$(ulimit -Hn)" --ulimit nproc=1024:1024 \
  -e REMIT_LISTEN="127.0.0.1:$port" -e REMIT_STORE=sqlite:/tmp/remit.db -e REMIT_PEP_TOKEN="pep=$token" \
  "$tag" >/dev/null
url="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
  curl -fsS "$url/health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$url/health" >/dev/null || { podman logs "$name" >&2; exit 1; }
ready="$(curl -fsS "$url/ready")"
echo "ready: $ready"
decision="$(curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"subject":{"id":"agent:shopper"},"action":{"name":"make_payment","arguments":{"merchant":"m","amount":"1.00 USD"}},"context":{"operation_id":"op-1"}}' \
  "$url/v1/decide")"
case "$decision" in
  '{"decision":"allow"'*) echo "a decision in the container: allow" ;;
  *) echo "container.sh: the decision was not allow: $decision" >&2; podman logs "$name" >&2; exit 1 ;;
esac
# The user the gateway runs as, from the process table (not the image's configuration).
user="$(podman top "$name" huser user | awk 'NR == 2 {print $2}')"
[ "$user" = 65532 ] || { echo "container.sh: the gateway runs as \`$user\`, not 65532" >&2; exit 1; }
echo "runs as user $user"
podman stop -t 30 "$name" >/dev/null
status="$(podman inspect "$name" --format '{{.State.ExitCode}}')"
[ "$status" = 0 ] || { echo "container.sh: exit code $status after SIGTERM" >&2; podman logs "$name" >&2; exit 1; }
echo "stopped with SIGTERM: exit code 0"
