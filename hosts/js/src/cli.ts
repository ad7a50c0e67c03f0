#!/usr/bin/env node
// remit-host [--visible-tools] [--timeout-ms N] POLICY.wasm REQUEST...  — one result per request, one per line,
// byte for byte; with --timeout-ms, each call runs in a worker thread bounded by that time (bounded.ts).
// remit-host [--visible-tools] --frames IN POLICY.wasm — requests read from a file of frames (a 4-byte big-endian
// length, then the bytes), results written as frames to stdout: how the test suite sends thousands of requests,
// garbage included, through one reused instance.
import { readFileSync } from "node:fs";
import { BoundedEvaluator } from "./bounded.js";
import { LoadError, Policy } from "./index.js";

function usage(): never {
  process.stderr.write("usage: remit-host [--visible-tools] [--timeout-ms N] [--frames IN] POLICY.wasm [REQUEST...]\n");
  process.exit(2);
}

const args = process.argv.slice(2);
let visible = false;
let frames: string | undefined;
let timeoutMs: number | undefined;
while (args[0]?.startsWith("--")) {
  const flag = args.shift();
  if (flag === "--visible-tools") visible = true;
  else if (flag === "--frames") frames = args.shift() ?? usage();
  else if (flag === "--timeout-ms") timeoutMs = Number(args.shift() ?? usage());
  else usage();
}
const [wasmPath, ...requestPaths] = args;
if (wasmPath === undefined) usage();

let policy: Policy;
try {
  policy = await Policy.load(readFileSync(wasmPath));
} catch (error) {
  process.stderr.write(`error: ${wasmPath}: ${error instanceof LoadError ? error.message : error}\n`);
  process.exit(1);
}
const evaluator = timeoutMs === undefined ? policy.evaluator() : new BoundedEvaluator(policy, timeoutMs);
const call = (request: Uint8Array) => (visible ? evaluator.visibleTools(request) : evaluator.decide(request));

const out: Uint8Array[] = [];
if (frames !== undefined) {
  const data = readFileSync(frames);
  for (let at = 0; at < data.length; ) {
    const len = data.readUInt32BE(at);
    const result = call(data.subarray(at + 4, at + 4 + len));
    const header = Buffer.alloc(4);
    header.writeUInt32BE(result.length);
    out.push(header, result);
    at += 4 + len;
  }
} else {
  for (const path of requestPaths) out.push(call(readFileSync(path)), Buffer.from("\n"));
}
process.stdout.write(Buffer.concat(out));
