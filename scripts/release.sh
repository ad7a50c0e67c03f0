#!/usr/bin/env bash
# Builds the release archive of the remit gateway (deploy/README.md):
#   dist/remit-VERSION-ARCH-linux.tar.gz  holding  remit-VERSION/{bin/remit, remit.service, remit.toml,
#   haproxy.cfg, compose.yaml, compose/, Containerfile, helm/, README.md, LICENSE?}  and its SHA256SUMS.
#
#   scripts/release.sh [--binary PATH] [--out DIR] [--image-context DIR]
#
#   --binary PATH         package this `remit` binary instead of building one (`cargo build --release --locked`)
#   --out DIR             where the archive goes (default: dist)
#   --image-context DIR   also make the build context of deploy/Containerfile in DIR: the binary, the shared
#                         libraries it links (ldd: glibc, libgcc_s, the loader) and the CA certificates under
#                         DIR/rootfs, and the Containerfile; `podman build DIR` then needs no base image.
set -euo pipefail
cd "$(dirname "$0")/.."
binary="" out="dist" context=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --image-context) context="$2"; shift 2 ;;
    *) echo "release.sh: unknown option \`$1\`" >&2; exit 2 ;;
  esac
done
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
arch="$(uname -m)"
if [ -z "$binary" ]; then
  cargo build --release --locked --bin remit
  binary="target/release/remit"
fi
[ -x "$binary" ] || { echo "release.sh: \`$binary\` is not an executable" >&2; exit 1; }

name="remit-$version"
stage="$(mktemp -d "${TMPDIR:-/tmp}/remit-release-XXXXXX")"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin"
install -m 0755 "$binary" "$root/bin/remit"
# Without its debug information (its symbols stay, for backtraces): a tenth of the size.
strip --strip-debug "$root/bin/remit"
install -m 0644 deploy/remit.service deploy/remit.toml deploy/haproxy.cfg deploy/compose.yaml deploy/Containerfile \
  "$root/"
cp -R deploy/compose deploy/helm "$root/"
install -m 0644 deploy/README.md "$root/README.md"
[ -f LICENSE ] && install -m 0644 LICENSE "$root/LICENSE"
mkdir -p "$out"
archive="$out/$name-$arch-linux.tar.gz"
# Reproducible: sorted, owned by root, dated by the last commit.
epoch="$(git log -1 --format=%ct 2>/dev/null || echo 0)"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -czf "$archive" "$name"
(cd "$out" && sha256sum "$(basename "$archive")" >"$(basename "$archive").sha256")
echo "$archive"

if [ -n "$context" ]; then
  rm -rf "$context"
  rootfs="$context/rootfs"
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/remit" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  install -m 0755 "$root/bin/remit" "$rootfs/usr/local/bin/remit"
  # The shared libraries, at the paths the binary's loader looks for them (no base image provides them).
  ldd "$binary" | awk '/=> \//{print $3} /^[ \t]*\/.*ld-linux/{print $1}' | while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
  install -m 0644 deploy/compose/remit.toml "$rootfs/etc/remit/remit.toml"
  mkdir -p "$rootfs/etc/remit/policy"
  install -m 0644 deploy/compose/policy/*.remit "$rootfs/etc/remit/policy/"
  install -m 0644 deploy/Containerfile "$context/Containerfile"
  echo "$context"
fi
