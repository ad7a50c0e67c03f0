// A host for remit decision modules in Node's built-in WebAssembly (docs/abi.md): no npm packages, and the module
// is instantiated with an EMPTY import object, as any runtime could.
//
//   node tests/node/decide.mjs [--visible-tools] POLICY.wasm REQUEST...
//
// Reads each request file as raw bytes, asks one instance (reused for every request) `remit_decide` (or
// `remit_visible_tools`), and prints one result per line, byte for byte. A trap is answered as the host-made deny
// of docs/abi.md (reason `runtime.trap`) and the instance is replaced; Node has no fuel, so the caller bounds the
// whole run with a timeout.
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const visible = args[0] === "--visible-tools";
if (visible) args.shift();
if (args.length < 1) {
  process.stderr.write("usage: decide.mjs [--visible-tools] POLICY.wasm REQUEST...\n");
  process.exit(2);
}
const [wasmPath, ...requestPaths] = args;
const bytes = readFileSync(wasmPath);

async function instantiate() {
  const { instance } = await WebAssembly.instantiate(bytes, {});
  const e = instance.exports;
  if (e.remit_abi_version.value !== 1) throw new Error(`ABI version ${e.remit_abi_version.value}, not 1`);
  return e;
}

// `(ptr << 32) | len` as a BigInt → the bytes, copied out of the memory.
function result(exports, packed) {
  const word = BigInt.asUintN(64, packed);
  const ptr = Number(word >> 32n);
  const len = Number(word & 0xffffffffn);
  return Buffer.from(new Uint8Array(exports.memory.buffer, ptr, len));
}

function escape(s) {
  return JSON.stringify(s);
}

let exports = await instantiate();
const info = JSON.parse(result(exports, exports.remit_policy_info()).toString("utf8"));

function call(request) {
  const len = Math.min(request.length, 0x7fffffff);
  const ptr = exports.remit_alloc(len);
  if (ptr !== 0) new Uint8Array(exports.memory.buffer, ptr >>> 0, request.length).set(request);
  const f = visible ? exports.remit_visible_tools : exports.remit_decide;
  return result(exports, f(ptr, len));
}

const out = [];
for (const path of requestPaths) {
  const request = readFileSync(path);
  try {
    out.push(call(request));
  } catch (error) {
    process.stderr.write(`${path}: trap: ${error}\n`);
    const deny = visible
      ? `{"visible":[],"hidden":[],"error":"runtime.trap"}`
      : `{"decision":"deny","reasons":["runtime.trap"],"rules":[],"missing_approvals":[],"approvals":[],"obligations":[],` +
        `"mandate_chain":[],"credential":null,"escalate_to":null,"policy":${escape(info.policy)}}`;
    out.push(Buffer.from(deny, "utf8"));
    exports = await instantiate();
  }
  out.push(Buffer.from("\n"));
}
process.stdout.write(Buffer.concat(out));
