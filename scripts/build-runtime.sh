#!/usr/bin/env bash
# Builds the decision module's runtime, crates/remit-rt, into the committed wasm32 artifact crates/remit-module/runtime.wasm
# (docs/module-v2.md), with Debian's rustc 1.63 and its wasm32 standard library (`apt-get install rustc
# libstd-rust-dev-wasm32 lld`; scripts/test-deps.sh installs them): the crate is no_std, so that toolchain is enough,
# and the same one always gives the same bytes. Run it after changing the crate; tests/runtime_artifact.rs fails on
# a stale artifact and, where this toolchain is installed, rebuilds it and compares the bytes.
#
#   scripts/build-runtime.sh              writes crates/remit-module/runtime.wasm
#   scripts/build-runtime.sh OUT.wasm     writes OUT.wasm instead (the test's rebuild)
#   scripts/build-runtime.sh --sources    prints the sources' hash and exits
#
# REMIT_RT_CFG=NAME adds `--cfg NAME` (tests/runtime_artifact.rs builds with `remit_rt_panic_probe`, a function with
# a panic path, and expects this script to refuse the result).
#
# The artifact imports nothing (a panic path left after optimization calls an undefined function, which the link
# turns into an import; this script refuses any import), has min = max memory (it never grows: the statics, then
# 256 KiB past `__heap_base` for the test exports' output), and carries the sources' hash in the custom section
# `remit.runtime.sources`.
set -euo pipefail
cd "$(dirname "$0")/.."
rustc=${REMIT_RT_RUSTC:-/usr/bin/rustc}

# The sources: every .rs file of the crate and this script, in byte order of their paths, as `sha256sum` lists them;
# their hash is the hash of that list (tests/runtime_artifact.rs computes it the same way).
sources() {
  { find crates/remit-rt/src -name '*.rs'; echo scripts/build-runtime.sh; } | LC_ALL=C sort | xargs sha256sum \
    | sha256sum | cut -c1-64
}
if [ "${1:-}" = "--sources" ]; then
  sources
  exit 0
fi
out=${1:-crates/remit-module/runtime.wasm}

[ -x "$rustc" ] || { echo "build-runtime: $rustc is missing (apt-get install rustc libstd-rust-dev-wasm32 lld)" >&2; exit 1; }
# The committed bytes come from this version (Debian 12's); another compiler gives other bytes.
version=$("$rustc" --version)
case "$version" in
  "rustc 1.63.0"*) ;;
  *) echo "build-runtime: $rustc is \`$version\`; the artifact is built with Debian 12's rustc 1.63.0" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# build MEMORY OUT: the crate linked with a memory of MEMORY bytes (min = max).
# -disable-lsr: LLVM's loop strength reduction gives the JSON parse loop a second induction variable (a pointer to the
# next token beside the token count); Cranelift, compiling the wasm, then spills the memory base and the read position.
# Without it the parse is 10-20% faster (docs/module-v2.md, measured).
build() {
  REMIT_RT_SOURCES=$(sources) "$rustc" --edition 2021 --crate-name remit_rt --crate-type cdylib \
    --target wasm32-unknown-unknown -C panic=abort -C opt-level=3 -C codegen-units=1 -C debuginfo=0 \
    -C llvm-args=-disable-lsr \
    -C strip=symbols --remap-path-prefix="$PWD=." \
    -C target-feature=+bulk-memory,+mutable-globals,+nontrapping-fptoint -C link-arg=--stack-first -C link-arg=-zstack-size=65536 \
    -C link-arg=--initial-memory="$1" -C link-arg=--max-memory="$1" \
    ${REMIT_RT_CFG:+--cfg "$REMIT_RT_CFG"} -o "$2" crates/remit-rt/src/lib.rs
}

# A first link finds `__heap_base` (the end of the stack and the statics of crates/remit-rt/src/wasm.rs; the memory's size does not
# move it; 16 MiB is room enough). No imports: node reads the module's import list (WebAssembly.Module.imports).
build $((256 * 65536)) "$tmp/probe.wasm"
imports=$(node -e '
  const bytes = require("fs").readFileSync(process.argv[1]);
  const m = new WebAssembly.Module(bytes);
  console.log(WebAssembly.Module.imports(m).map(i => i.module + "." + i.name).join(" "));
' "$tmp/probe.wasm")
if [ -n "$imports" ]; then
  echo "build-runtime: the runtime imports $imports (a panic path the optimizer kept, or a missing function)" >&2
  exit 1
fi
heap_base=$(node -e '
  const bytes = require("fs").readFileSync(process.argv[1]);
  console.log(new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports.__heap_base.value);
' "$tmp/probe.wasm")
# The artifact's memory: up to `__heap_base` rounded up to 8, then the test exports' output (`TEST_OUT_LEN` =
# MAX_INPUT, 256 KiB), in whole pages. A decision module's memory is the linker's (crates/remit-module/src/link.rs: the image and
# the policy's output area after `__heap_base`), not this.
pages=$(( ((heap_base + 7) / 8 * 8 + 262144 + 65535) / 65536 ))
build $((pages * 65536)) "$tmp/runtime.wasm"
cp "$tmp/runtime.wasm" "$out"
echo "build-runtime: $out ($(wc -c <"$out") bytes, sources $(sources | cut -c1-12))"
