// A host for remit decision modules in Node's built-in WebAssembly (or any JavaScript engine's), following
// docs/abi.md: no npm runtime dependencies, the module instantiated with an EMPTY import object, one instance reused
// for every call.
//
//   import { Policy } from "remit-host";
//   const policy = await Policy.load(readFileSync("policy.wasm"));   // compiles, checks the ABI, reads the info
//   const evaluator = policy.evaluator();                              // one instance, reused
//   const decision: Uint8Array = evaluator.decide(requestBytes);       // exactly the bytes `remit eval` prints
//
// JavaScript runs a WebAssembly call to its end on the calling thread: there is no fuel in V8. The module never
// loops by design (docs/abi.md); to bound each call in time anyway, use `BoundedEvaluator` (bounded.ts, Node only),
// which runs the evaluator in a worker thread and denies a call that overruns its deadline.

/** The ABI version this host speaks. */
export const ABI_VERSION = 1;
/** The largest request a module takes (docs/abi.md, "Maximum input"). */
export const MAX_INPUT = 262_144;
export const REASON_TRAP = "runtime.trap";
export const REASON_FUEL = "runtime.fuel-exhausted";

/** What `remit_policy_info` returns. */
export interface PolicyInfo {
  /** The policy hash: the `policy` field of every decision the module makes. */
  policy: string;
  abi_version: 1;
  mandates: string[];
  entry_points: string[];
}

/** A request: its raw bytes (need not be valid UTF-8 or JSON) or a string (encoded as UTF-8). */
export type RequestBytes = Uint8Array | ArrayBuffer | string;

/** The bytes are not a module that follows docs/abi.md version 1. */
export class LoadError extends Error {
  override name = "LoadError";
}

class CallFailed extends Error {}

interface Exports {
  memory: WebAssembly.Memory;
  remit_abi_version: WebAssembly.Global;
  remit_alloc(len: number): number;
  remit_decide(ptr: number, len: number): bigint;
  remit_visible_tools(ptr: number, len: number): bigint;
  remit_policy_info(): bigint;
}

const FUNCTIONS = ["remit_alloc", "remit_decide", "remit_visible_tools", "remit_policy_info"] as const;
const encoder = new TextEncoder();

/** A compiled decision module. Compile once; make one {@link Evaluator} per worker. */
export class Policy {
  readonly info: PolicyInfo;
  /** The policy hash (`info.policy`). */
  readonly policy: string;
  /** `remit_policy_info`'s bytes, as the module returned them. */
  readonly infoJson: Uint8Array;
  #spare: Instance | undefined;

  private constructor(
    readonly module: WebAssembly.Module,
    probe: Instance,
  ) {
    const version = probe.exports.remit_abi_version.value;
    if (version !== ABI_VERSION) {
      throw new LoadError(`the module has ABI version ${version}; this host speaks version ${ABI_VERSION}`);
    }
    let raw: Uint8Array;
    try {
      raw = probe.result(probe.exports.remit_policy_info());
    } catch {
      throw new LoadError("remit_policy_info failed");
    }
    let info: unknown;
    try {
      info = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    } catch (error) {
      throw new LoadError(`remit_policy_info returned invalid JSON: ${error}`);
    }
    const i = info as Partial<PolicyInfo> | null;
    if (typeof i !== "object" || i === null || typeof i.policy !== "string" || i.abi_version !== 1) {
      throw new LoadError('remit_policy_info lacks a `policy` string or `"abi_version": 1`');
    }
    this.info = i as PolicyInfo;
    this.policy = i.policy;
    this.infoJson = raw;
    this.#spare = probe;
  }

  /** Compiles and checks a `.wasm` (its bytes or an already compiled `WebAssembly.Module`). */
  static async load(wasm: Uint8Array | ArrayBuffer | WebAssembly.Module): Promise<Policy> {
    let module: WebAssembly.Module;
    if (wasm instanceof WebAssembly.Module) {
      module = wasm;
    } else {
      try {
        module = await WebAssembly.compile(wasm as BufferSource);
      } catch (error) {
        throw new LoadError(`not a valid WebAssembly module: ${error}`);
      }
    }
    return Policy.fromModule(module);
  }

  /** Like {@link Policy.load}, synchronously (fine for modules of a few hundred KiB outside browsers). */
  static loadSync(wasm: Uint8Array | ArrayBuffer): Policy {
    let module: WebAssembly.Module;
    try {
      module = new WebAssembly.Module(wasm as BufferSource);
    } catch (error) {
      throw new LoadError(`not a valid WebAssembly module: ${error}`);
    }
    return Policy.fromModule(module);
  }

  private static fromModule(module: WebAssembly.Module): Policy {
    const imports = WebAssembly.Module.imports(module);
    if (imports.length > 0) {
      throw new LoadError(
        `the module imports \`${imports[0].module}.${imports[0].name}\`; a decision module imports nothing`,
      );
    }
    const kinds = new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]));
    for (const name of FUNCTIONS) {
      if (kinds.get(name) !== "function") throw new LoadError(`the module does not export \`${name}\` as a function`);
    }
    if (kinds.get("memory") !== "memory") throw new LoadError("the module does not export `memory`");
    if (kinds.get("remit_abi_version") !== "global") {
      throw new LoadError("the module does not export the global `remit_abi_version`");
    }
    return new Policy(module, new Instance(module));
  }

  /** A new evaluator: one instance of the module, reused for every call. */
  evaluator(): Evaluator {
    const spare = this.#spare;
    this.#spare = undefined;
    return new Evaluator(this, spare ?? new Instance(this.module));
  }

  /** The deny a host makes itself (docs/abi.md), byte-identical to the Rust host's. */
  deny(reason: string): Uint8Array {
    return encoder.encode(
      `{"decision":"deny","reasons":[${JSON.stringify(reason)}],"rules":[],"missing_approvals":[],"approvals":[],` +
        `"obligations":[],"mandate_chain":[],"credential":null,"escalate_to":null,"policy":${JSON.stringify(this.policy)}}`,
    );
  }

  /** The listing a host answers when `remit_visible_tools` failed: no tool is visible. */
  static listingFailure(reason: string): Uint8Array {
    return encoder.encode(`{"visible":[],"hidden":[],"error":${JSON.stringify(reason)}}`);
  }
}

class Instance {
  readonly exports: Exports;

  constructor(module: WebAssembly.Module) {
    const instance = new WebAssembly.Instance(module, {});
    this.exports = instance.exports as unknown as Exports;
  }

  /** `(ptr << 32) | len` → a copy of the bytes; a result outside the memory is a failure. */
  result(packed: bigint): Uint8Array {
    const word = BigInt.asUintN(64, packed);
    const ptr = Number(word >> 32n);
    const len = Number(word & 0xffffffffn);
    const memory = this.exports.memory.buffer;
    if (ptr + len > memory.byteLength) throw new CallFailed(REASON_TRAP);
    return new Uint8Array(memory, ptr, len).slice();
  }

  call(f: (ptr: number, len: number) => bigint, request: Uint8Array): Uint8Array {
    const len = Math.min(request.length, 0x7fffffff);
    const ptr = this.exports.remit_alloc(len) >>> 0;
    if (ptr !== 0) {
      const memory = this.exports.memory.buffer;
      if (ptr + request.length > memory.byteLength) throw new CallFailed(REASON_TRAP);
      new Uint8Array(memory, ptr, request.length).set(request);
    }
    return this.result(f(ptr | 0, len));
  }
}

function bytes(request: RequestBytes): Uint8Array {
  if (typeof request === "string") return encoder.encode(request);
  return request instanceof Uint8Array ? request : new Uint8Array(request);
}

/** One reused instance of a policy. Calls are not re-entrant; JavaScript makes one call at a time anyway. */
export class Evaluator {
  #instance: Instance | undefined;

  constructor(
    readonly policy: Policy,
    instance: Instance,
  ) {
    this.#instance = instance;
  }

  /** The decision JSON (UTF-8, no trailing newline) for one request. Never throws. */
  decide(request: RequestBytes): Uint8Array {
    return this.#call("remit_decide", request, (reason) => this.policy.deny(reason));
  }

  /** The tool listing JSON of the request's subject and context. Never throws. */
  visibleTools(request: RequestBytes): Uint8Array {
    return this.#call("remit_visible_tools", request, Policy.listingFailure);
  }

  #call(
    name: "remit_decide" | "remit_visible_tools",
    request: RequestBytes,
    onFailure: (reason: string) => Uint8Array,
  ): Uint8Array {
    try {
      this.#instance ??= new Instance(this.policy.module);
      const instance = this.#instance;
      return instance.call((ptr, len) => instance.exports[name](ptr, len), bytes(request));
    } catch (error) {
      // A trap (a WebAssembly.RuntimeError, a stack overflow) or a result outside the memory: after a failed call
      // the memory is in an unknown state, so the next call starts on a fresh instance.
      this.#instance = undefined;
      return onFailure(error instanceof CallFailed ? error.message : REASON_TRAP);
    }
  }
}
