// hosts/js's BoundedEvaluator under stray wake-ups, for tests/hosts.rs: another thread keeps notifying the words the
// calling thread waits on, as a worker's late notify does. Every bounded result must still be the unbounded
// evaluator's for the same request. Arguments: the built host's dist folder, a module, a frames file of requests.
// Exits 1, naming the first request whose result differs.
import { createRequire, syncBuiltinESMExports } from "node:module";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [dist, wasmPath, framesPath] = process.argv.slice(2);
const threads = createRequire(import.meta.url)("node:worker_threads");

// Every worker the evaluator starts gets a second thread that notifies its control words without pause.
const noises = [];
const HostWorker = threads.Worker;
threads.Worker = class extends HostWorker {
  constructor(source, options) {
    super(source, options);
    const noise = new HostWorker(
      `const words = new Int32Array(require("node:worker_threads").workerData);
       for (;;) { Atomics.notify(words, 0); Atomics.notify(words, 2); }`,
      { eval: true, workerData: options.workerData.control },
    );
    noise.unref();
    noises.push(noise);
  }
};
syncBuiltinESMExports(); // the ESM binding `import { Worker }` in bounded.js now names the class above

const { Policy } = await import(pathToFileURL(join(dist, "index.js")).href);
const { BoundedEvaluator } = await import(pathToFileURL(join(dist, "bounded.js")).href);
const policy = await Policy.load(readFileSync(wasmPath));
const plain = policy.evaluator();
const bounded = new BoundedEvaluator(policy, 10_000);

const data = readFileSync(framesPath);
let calls = 0;
for (let at = 0; at < data.length; ) {
  const len = data.readUInt32BE(at);
  const request = data.subarray(at + 4, at + 4 + len);
  at += 4 + len;
  for (const kind of ["decide", "visibleTools"]) {
    const want = Buffer.from(plain[kind](request)).toString();
    const got = Buffer.from(bounded[kind](request)).toString();
    calls += 1;
    if (got !== want) {
      process.stderr.write(`${kind} differs on ${request.toString().slice(0, 200)}\n got: ${got}\nwant: ${want}\n`);
      process.exit(1);
    }
  }
}
if (noises.length === 0) {
  process.stderr.write("no worker was started: the stray wake-ups were not sent\n");
  process.exit(1);
}
process.stdout.write(`${calls} calls under stray wake-ups, every result the unbounded evaluator's\n`);
await bounded.close();
await Promise.all(noises.map((noise) => noise.terminate()));
