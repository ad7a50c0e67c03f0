#!/usr/bin/env bash
# What a one-line change rebuilds: two checkouts side by side (e.g. a worktree of an older commit and this one),
# interleaved rounds. In each, FILE gets one message's wording changed, then `cargo build [--release] --bin remit`
# is timed; the file is restored and rebuilt (untimed) before the next round. Build both checkouts once first, so
# that both are warm. BENCHMARKS.md, "Build", has the figures.
#
#   bench/rebuild.sh debug|release ROUNDS OLD_DIR OLD_FILE NEW_DIR NEW_FILE
#   bench/rebuild.sh release 2 ../before src/gateway/http.rs . crates/remit-gateway/src/http.rs
#
# FILE must contain the text `the body is not acceptable JSON: {e}` (a message of the gateway's HTTP layer).
set -euo pipefail
profile=$1 rounds=$2
flag=(); [ "$profile" = release ] && flag=(--release)
one() { # dir file label
  local dir=$1 file=$2 label=$3 backup start end
  backup=$(mktemp)
  cp "$dir/$file" "$backup"
  sed -i 's/the body is not acceptable JSON: {e}/the body is not acceptable JSON (probe): {e}/' "$dir/$file"
  grep -q "(probe)" "$dir/$file" || { echo "the probe's text is not in $dir/$file" >&2; exit 1; }
  start=$(date +%s.%N)
  (cd "$dir" && cargo build --quiet "${flag[@]}" --bin remit)
  end=$(date +%s.%N)
  cp "$backup" "$dir/$file"
  rm "$backup"
  echo "$label $profile $(awk "BEGIN { print $end - $start }") s"
  (cd "$dir" && cargo build --quiet "${flag[@]}" --bin remit)
}
for _ in $(seq "$rounds"); do
  one "$3" "$4" old
  one "$5" "$6" new
done
