// Linked decision modules, version 2 (crates/remit-module/src/link.rs), in Node's built-in WebAssembly, for tests/link.rs.
//
//   node tests/node/module_v2.mjs UNITS
//
// UNITS holds frames (4-byte big-endian length, then the bytes): for each policy, its module, then its requests
// (themselves frames). Writes three frames per policy to stdout: what the module is (`imports=N`, its exports as
// `name:kind`, `abi=V`, `memory=BYTES`, one per line), the `remit_policy_info` bytes, and one byte per request:
// the outcome of `remit_decide` in bits 0-1 and of `remit_visible_tools` in bits 2-3 (0 a result inside the
// memory, 1 a trap, 2 a result outside the memory, 3 `remit_alloc` gave a place where the request does not fit).
// Each module is instantiated once with an EMPTY import object and serves all its requests, as a host does.
import { readFileSync, writeSync } from "node:fs";

function* frames(bytes) {
  for (let at = 0; at < bytes.length; ) {
    const len = bytes.readUInt32BE(at);
    yield bytes.subarray(at + 4, at + 4 + len);
    at += 4 + len;
  }
}

const out = [];
function emit(bytes) {
  const frame = Buffer.alloc(4);
  frame.writeUInt32BE(bytes.length);
  out.push(frame, Buffer.from(bytes));
}

const items = [...frames(readFileSync(process.argv[2]))];
for (let i = 0; i < items.length; i += 2) {
  const module = new WebAssembly.Module(items[i]);
  const { exports: e } = new WebAssembly.Instance(module, {});
  const shape = [
    `imports=${WebAssembly.Module.imports(module).length}`,
    ...WebAssembly.Module.exports(module).map((x) => `${x.name}:${x.kind}`),
    `abi=${e.remit_abi_version.value}`,
    `memory=${e.memory.buffer.byteLength}`,
  ];
  emit(Buffer.from(shape.join("\n")));
  const bytesAt = (packed) => {
    const word = BigInt.asUintN(64, packed);
    const ptr = Number(word >> 32n);
    const len = Number(word & 0xffffffffn);
    return ptr + len <= e.memory.buffer.byteLength ? new Uint8Array(e.memory.buffer, ptr, len) : null;
  };
  emit(bytesAt(e.remit_policy_info()) ?? Buffer.from("outside the memory"));
  const outcomes = [];
  for (const request of frames(items[i + 1])) {
    let outcome = 0;
    [e.remit_decide, e.remit_visible_tools].forEach((entry, k) => {
      let code = 0;
      try {
        const len = Math.min(request.length, 0x7fffffff);
        const ptr = e.remit_alloc(len) >>> 0;
        if (ptr !== 0 && ptr + request.length > e.memory.buffer.byteLength) {
          code = 3;
        } else {
          if (ptr !== 0) new Uint8Array(e.memory.buffer, ptr, request.length).set(request);
          code = bytesAt(entry(ptr, len)) === null ? 2 : 0;
        }
      } catch {
        code = 1;
      }
      outcome |= code << (2 * k);
    });
    outcomes.push(outcome);
  }
  emit(Buffer.from(outcomes));
}
const all = Buffer.concat(out);
for (let off = 0; off < all.length; ) off += writeSync(1, all, off);
