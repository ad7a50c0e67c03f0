#!/usr/bin/env bash
# The policy CI of a repository that keeps remit policies, as one plain script (the composite GitHub Action in
# action.yml runs exactly this; any other CI can too):
#
#   scripts/ci-policy.sh [--base REF] POLICY_DIR...
#
# Run from the repository's root; each POLICY_DIR (relative to it) is one policy set. Steps, all run, in order:
#   1. check   `remit check --format github DIR`     errors fail (annotations in a pull request)
#   2. test    `remit test DIR`                      any failing case fails
#   3. fmt     `remit fmt --check DIR…`              an unformatted file fails (skipped, saying so, when this remit
#                                                    has no `fmt` command)
#   4. diff    `remit diff --format github BASE NEW` per DIR, BASE being DIR at the git ref REF: a mandate that
#                                                    widened, was added or could not be compared fails. Without
#                                                    --base (e.g. on a push) the step is skipped, saying so.
# Exit 0 when every step passed, 1 otherwise, 2 on a usage error. The `remit` binary is $REMIT (default: on PATH).
set -uo pipefail

usage() { echo "usage: $0 [--base REF] POLICY_DIR..." >&2; exit 2; }
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) [ $# -ge 2 ] || usage; base="$2"; shift 2 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
remit="${REMIT:-remit}"
paths=()
for p in "$@"; do p="${p#./}"; paths+=("${p%/}"); done

if [ "${GITHUB_ACTIONS:-}" = true ]; then
  group() { echo "::group::$*"; }
  endgroup() { echo "::endgroup::"; }
else
  group() { echo "== $*"; }
  endgroup() { :; }
fi

# remit names files relative to the folder it was given; GitHub wants them relative to the repository.
annotate() {
  local dir="$1"
  sed -E "s#^::(error|warning|notice) file=([^,]*)#::\1 file=${dir//#/\\#}/\2#"
}

failed=()
summary=()
step() { # name status note
  summary+=("$1: $2${3:+ ($3)}")
  [ "$2" = failed ] && failed+=("$1")
}

status=passed
for dir in "${paths[@]}"; do
  group "remit check --format github $dir"
  "$remit" check --format github "$dir" | annotate "$dir" || status=failed
  endgroup
done
step check "$status"

status=passed
for dir in "${paths[@]}"; do
  group "remit test $dir"
  "$remit" test "$dir" || status=failed
  endgroup
done
step test "$status"

group "remit fmt --check ${paths[*]}"
if "$remit" fmt --help >/dev/null 2>&1; then
  if "$remit" fmt --check "${paths[@]}"; then step fmt passed; else step fmt failed "run \`remit fmt\` on these files"; fi
else
  echo "skipped: this remit has no \`remit fmt\` command (\`$remit fmt --help\` failed)"
  step fmt skipped "no \`remit fmt\` in this remit"
fi
endgroup

if [ -z "$base" ]; then
  echo "== remit diff: skipped (no --base REF to compare against)"
  step diff skipped "no base"
elif ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "error: the base \`$base\` is not a commit of this repository (fetch it, e.g. actions/checkout with fetch-depth: 0)" >&2
  step diff failed "unknown base"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  status=passed
  for dir in "${paths[@]}"; do
    old="$work/base/$dir"
    mkdir -p "$old"
    group "remit diff $base:$dir $dir"
    if git cat-file -e "$base:$dir" 2>/dev/null; then
      git archive --format=tar "$base" -- "$dir" | tar -x -C "$work/base"
    else
      echo "$dir does not exist at $base: every mandate in it is new authority"
    fi
    "$remit" diff --format github "$old" "$dir" | annotate "$dir" || status=failed
    endgroup
  done
  step diff "$status" "$([ "$status" = failed ] && echo "authority widened against $base: needs review")"
fi

echo "== ci-policy summary"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-policy: failed: ${failed[*]}"
  exit 1
fi
echo "ci-policy: passed"
