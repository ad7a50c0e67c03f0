#!/usr/bin/env python3
"""Where a decision's wasm instructions go, per function of the runtime: a deterministic profile (the count of
executed instructions, which tracks wasmtime's fuel within a few percent), for picking what to make cheaper.

    scripts/wasm-profile.py MODULE.wasm REQUEST.json RUNTIME.wasm [TOP]

MODULE.wasm is a decision module linked with an unstripped build of the runtime, RUNTIME.wasm that build (its name
section names the functions; the linker keeps their indices). Both come from tests/rt_decide.rs:

    (cd scripts && sed 's/-C strip=symbols //' build-runtime.sh | bash -s /abs/runtime-unstripped.wasm)
    REMIT_RT_ARTIFACT=/abs/runtime-unstripped.wasm REMIT_LOOP_EXAMPLE=/abs/dir REMIT_LOOP_FILE=req.json REMIT_LOOP_CALLS=1 \\
      REMIT_LOOP_DUMP=module.wasm cargo test --release --test rt_decide -- --ignored --exact module_loop

(REMIT_LOOP_EXAMPLE takes an absolute folder holding the policy's .remit files.) The request is placed in the
module's input buffer by a data segment, `remit_decide` is called once under wabt's interpreter with `--trace`
(one line per executed instruction, with the call depth), and each line is counted to the function it runs in
(exclusive) and to every function on the call stack (inclusive). Needs wabt (wasm2wat, wat2wasm, wasm-interp) and
node.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile


def demangle(symbol):
    """`_ZN8remit_rt4json6tokens17h…E` as `remit_rt::json::tokens` (legacy Rust mangling, roughly)."""
    if not symbol.startswith("_ZN"):
        return symbol
    parts, i = [], 3
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        parts.append(symbol[j:j + n])
        i = j + n
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    name = "::".join(parts)
    for code, text in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$u7b$", "{"), ("$u7d$", "}"), ("..", "::")):
        name = name.replace(code, text)
    return name


def function_names(wat):
    return [demangle(m.group(1)) for m in re.finditer(r"^  \(func \$(\S+)", wat, re.M)]


def main():
    module, request, runtime = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    with tempfile.TemporaryDirectory() as tmp:
        wat = subprocess.run(["wasm2wat", "--enable-all", module], check=True, capture_output=True, text=True).stdout
        names = function_names(
            subprocess.run(["wasm2wat", "--enable-all", runtime], check=True, capture_output=True, text=True).stdout
        )
        address = subprocess.run(
            ["node", "-e", "const m = new WebAssembly.Module(require('fs').readFileSync(process.argv[1]));"
             "console.log(new WebAssembly.Instance(m, {}).exports.remit_alloc(1))", module],
            check=True, capture_output=True, text=True).stdout.strip()
        decide = re.search(r'\(export "remit_decide" \(func (\S+?)\)\)', wat).group(1)
        body = open(request, "rb").read()
        data = "".join("\\%02x" % b for b in body)
        wat = re.sub(r'\n  \(export "[^"]*" \(func [^)]*\)\)', "", wat).rstrip()
        assert wat.endswith(")")
        wat = wat[:-1] + (
            f'\n  (data (i32.const {address}) "{data}")'
            f'\n  (func (export "go") (drop (call {decide} (i32.const {address}) (i32.const {len(body)})))))\n'
        )
        with open(os.path.join(tmp, "go.wat"), "w") as f:
            f.write(wat)
        subprocess.run(["wat2wasm", "--enable-all", "go.wat", "-o", "go.wasm"], cwd=tmp, check=True)
        trace = subprocess.run(["wasm-interp", "--enable-all", "go.wasm", "--run-all-exports", "--trace"],
                               cwd=tmp, capture_output=True, text=True).stdout
    exclusive, inclusive, calls = collections.Counter(), collections.Counter(), collections.Counter()
    stack, total = ["(call)"], 0
    for line in trace.splitlines():
        m = re.match(r"#(\d+)\. +\d+: V:\d+ *\| (.*)", line)
        if not m:
            continue
        depth, instruction = int(m.group(1)), m.group(2)
        del stack[depth + 1:]
        total += 1
        exclusive[stack[depth]] += 1
        for name in set(stack[: depth + 1]):
            inclusive[name] += 1
        c = re.match(r"call \$(\d+)", instruction)
        if c:
            index = int(c.group(1))
            name = names[index] if index < len(names) else str(index)
            stack[depth + 1:] = [name]
            calls[name] += 1
    print(f"{total} instructions executed")
    print("%-80s %8s %8s %6s" % ("function", "incl", "excl", "calls"))
    for name, count in inclusive.most_common(top):
        print("%-80s %8d %8d %6d" % (name[-80:], count, exclusive[name], calls[name]))


if __name__ == "__main__":
    main()
