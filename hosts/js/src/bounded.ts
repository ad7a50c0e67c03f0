// A time bound for calls into a decision module, for JavaScript, where WebAssembly has no fuel: the evaluator runs
// in a worker thread; the calling thread posts the request and waits (Atomics.wait, synchronously) for the result
// at most `timeoutMs`. A call that does not answer in time is denied with `runtime.fuel-exhausted` (docs/abi.md: "the
// call ran out of its budget (fuel, a deadline)"), the worker is terminated and the next call starts a fresh one.
import { Worker } from "node:worker_threads";
import { Policy, REASON_FUEL, REASON_TRAP, type RequestBytes } from "./index.js";

/** The largest result a bounded call carries back (a decision or listing is far smaller). */
const RESULT_CAPACITY = 8 << 20;
const encoder = new TextEncoder();

// The worker: one Evaluator, answering each posted request into the shared buffer.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const { control, data, module, index } = workerData;
import(index).then(async ({ Policy }) => {
  const evaluator = (await Policy.load(module)).evaluator();
  const ctrl = new Int32Array(control);
  const out = new Uint8Array(data);
  parentPort.on("message", ({ kind, request, call }) => {
    const result = kind === "visible" ? evaluator.visibleTools(request) : evaluator.decide(request);
    if (result.length > out.length) {
      Atomics.store(ctrl, 1, -1);
    } else {
      out.set(result);
      Atomics.store(ctrl, 1, result.length);
    }
    Atomics.store(ctrl, 0, call);
    Atomics.notify(ctrl, 0);
  });
  Atomics.store(ctrl, 2, 1);
  Atomics.notify(ctrl, 2);
});
`;

class Thread {
  readonly worker: Worker;
  // [the number of the call last answered, its result's length, ready]
  readonly control = new Int32Array(new SharedArrayBuffer(12));
  readonly data = new Uint8Array(new SharedArrayBuffer(RESULT_CAPACITY));

  constructor(policy: Policy) {
    const index = new URL("./index.js", import.meta.url).href;
    this.worker = new Worker(WORKER, {
      eval: true,
      workerData: { control: this.control.buffer, data: this.data.buffer, module: policy.module, index },
    });
    this.worker.unref();
  }
}

/** Like {@link Evaluator}, with every call bounded in time; synchronous, one call at a time. */
export class BoundedEvaluator {
  #thread: Thread | undefined;
  #calls = 0;

  constructor(
    readonly policy: Policy,
    /** The time one call may take, in milliseconds. */
    readonly timeoutMs: number,
    /** The time a fresh worker may take to start and compile the module. */
    readonly startupMs: number = 10_000,
  ) {}

  decide(request: RequestBytes): Uint8Array {
    return this.#call("decide", request, (reason) => this.policy.deny(reason));
  }

  visibleTools(request: RequestBytes): Uint8Array {
    return this.#call("visible", request, Policy.listingFailure);
  }

  /** Ends the worker (the process can also exit with it running: it does not keep Node alive). */
  async close(): Promise<void> {
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.worker.terminate();
  }

  #call(kind: "decide" | "visible", request: RequestBytes, onFailure: (reason: string) => Uint8Array): Uint8Array {
    if (this.#thread === undefined) {
      const thread = new Thread(this.policy);
      if (!waitUntil(thread.control, 2, 1, this.startupMs)) {
        void thread.worker.terminate();
        return onFailure(REASON_TRAP);
      }
      this.#thread = thread;
    }
    const thread = this.#thread;
    // Calls are numbered (never 0, the word's first value), so that only this call's answer ends the wait.
    this.#calls = (this.#calls % 0x7fffffff) + 1;
    const call = this.#calls;
    const bytes = typeof request === "string" ? encoder.encode(request) : new Uint8Array(request);
    thread.worker.postMessage({ kind, request: bytes, call });
    if (!waitUntil(thread.control, 0, call, this.timeoutMs)) {
      // The call may still be running: its memory and thread are given up, not reused.
      this.#thread = undefined;
      void thread.worker.terminate();
      return onFailure(REASON_FUEL);
    }
    const length = Atomics.load(thread.control, 1);
    if (length < 0) return onFailure(REASON_TRAP);
    return thread.data.slice(0, length);
  }
}

/**
 * Waits until `words[index]` is `value`, at most `ms` milliseconds; false when the time ran out first. A wake-up
 * alone proves nothing: the worker stores its answer and then notifies, and a notify that comes late, after the
 * calling thread saw the store and went on to the next call, wakes that next call's wait (seen on a loaded CI
 * machine: a call answered with the call before's result). So the word is read again after every wake-up.
 */
function waitUntil(words: Int32Array, index: number, value: number, ms: number): boolean {
  const deadline = performance.now() + ms;
  for (;;) {
    const seen = Atomics.load(words, index);
    if (seen === value) return true;
    const left = deadline - performance.now();
    if (left <= 0) return false;
    Atomics.wait(words, index, seen, left);
  }
}
