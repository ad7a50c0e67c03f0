"""A host for remit decision modules on wasmtime (the `wasmtime` package from PyPI), following docs/abi.md.

    from remit_host import Policy

    policy = Policy.load("policy.wasm")        # compiles once, checks the ABI, reads remit_policy_info
    evaluator = policy.evaluator()            # one store + instance, reused for every call (not thread-safe:
                                              # one evaluator per thread)
    decision: bytes = evaluator.decide(request_bytes)          # exactly the bytes `remit eval` prints
    listing: bytes = evaluator.visible_tools(request_bytes)    # exactly what `remit tools --json` prints

Every call is bounded by a fuel budget and the memory cap; a trap, a result outside the memory or exhausted fuel is
answered with the host-made deny of docs/abi.md (`runtime.trap` / `runtime.fuel-exhausted`) and the instance is
discarded, the next call instantiating afresh. A call never raises on any request bytes.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Union

import wasmtime

__all__ = [
    "ABI_VERSION",
    "DEFAULT_FUEL",
    "DEFAULT_MEMORY_CAP",
    "MAX_INPUT",
    "REASON_FUEL",
    "REASON_TRAP",
    "Evaluator",
    "LoadError",
    "Policy",
]

ABI_VERSION = 1
#: The largest request the module takes (docs/abi.md, "Maximum input").
MAX_INPUT = 262_144
#: About one unit per executed WebAssembly instruction, as `remit_host::DEFAULT_FUEL` (crates/remit-host).
DEFAULT_FUEL = 100_000_000
#: The module's fixed memory must fit under this, as `remit_host::DEFAULT_MEMORY_CAP`.
DEFAULT_MEMORY_CAP = 64 << 20
REASON_TRAP = "runtime.trap"
REASON_FUEL = "runtime.fuel-exhausted"

_I32_MAX = 0x7FFF_FFFF
_FUNCTIONS = {
    "remit_alloc": (["i32"], ["i32"]),
    "remit_decide": (["i32", "i32"], ["i64"]),
    "remit_visible_tools": (["i32", "i32"], ["i64"]),
    "remit_policy_info": ([], ["i64"]),
}


class LoadError(Exception):
    """The bytes are not a module that follows docs/abi.md version 1."""


class _CallFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _valtype(t: wasmtime.ValType) -> str:
    return str(t)


class Policy:
    """A compiled decision module: compile once, then make one :class:`Evaluator` per thread."""

    def __init__(self, wasm: bytes, *, fuel: int = DEFAULT_FUEL, memory_cap: int = DEFAULT_MEMORY_CAP):
        config = wasmtime.Config()
        config.consume_fuel = True
        self._engine = wasmtime.Engine(config)
        self.fuel = fuel
        self.memory_cap = memory_cap
        try:
            self._module = wasmtime.Module(self._engine, wasm)
        except wasmtime.WasmtimeError as error:
            raise LoadError(f"not a valid WebAssembly module: {error}") from None
        imports = list(self._module.imports)
        if imports:
            first = imports[0]
            raise LoadError(f"the module imports `{first.module}.{first.name}`; a decision module imports nothing")
        exports = {e.name: e.type for e in self._module.exports}
        for name, (params, results) in _FUNCTIONS.items():
            ty = exports.get(name)
            if not isinstance(ty, wasmtime.FuncType):
                raise LoadError(f"the module does not export `{name}` as a function")
            got = ([_valtype(p) for p in ty.params], [_valtype(r) for r in ty.results])
            if got != (params, results):
                raise LoadError(f"`{name}` has type {got}, not {(params, results)}")
        if not isinstance(exports.get("memory"), wasmtime.MemoryType):
            raise LoadError("the module does not export `memory`")
        if not isinstance(exports.get("remit_abi_version"), wasmtime.GlobalType):
            raise LoadError("the module does not export the global `remit_abi_version`")
        # Instantiate once to read the version and the policy info (and to prove it fits under the cap).
        probe = self._instantiate()
        version = probe.exports["remit_abi_version"].value(probe.store)
        if version != ABI_VERSION:
            raise LoadError(f"the module has ABI version {version}; this host speaks version {ABI_VERSION}")
        try:
            raw = probe.call_packed("remit_policy_info")
        except _CallFailed as failure:
            raise LoadError(f"remit_policy_info failed: {failure.reason}") from None
        try:
            info = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise LoadError(f"remit_policy_info returned invalid JSON: {error}") from None
        if not isinstance(info, dict) or not isinstance(info.get("policy"), str) or info.get("abi_version") != 1:
            raise LoadError("remit_policy_info lacks a `policy` string or `\"abi_version\": 1`")
        self.info: dict = info
        self.info_json: bytes = bytes(raw)
        self.policy: str = info["policy"]
        self._spare: Optional[_Instance] = probe

    @classmethod
    def load(cls, source: Union[str, os.PathLike, bytes], **limits) -> "Policy":
        """Loads a `.wasm` from a path or from its bytes."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return cls(bytes(source), **limits)
        with open(source, "rb") as f:
            return cls(f.read(), **limits)

    def evaluator(self) -> "Evaluator":
        return Evaluator(self)

    def _instantiate(self) -> "_Instance":
        return _Instance(self)

    def _take_instance(self) -> "_Instance":
        spare, self._spare = self._spare, None
        return spare if spare is not None else self._instantiate()

    def deny(self, reason: str) -> bytes:
        """The deny a host makes itself (docs/abi.md), byte-identical to `remit_host`'s."""
        return (
            '{"decision":"deny","reasons":[' + json.dumps(reason) + '],"rules":[],"missing_approvals":[],"approvals":[],'
            '"obligations":[],"mandate_chain":[],"credential":null,"escalate_to":null,"policy":'
            + json.dumps(self.policy, ensure_ascii=False)
            + "}"
        ).encode("utf-8")

    @staticmethod
    def listing_failure(reason: str) -> bytes:
        return ('{"visible":[],"hidden":[],"error":' + json.dumps(reason) + "}").encode("utf-8")


class _Instance:
    """One store and one instance of a module."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.store = wasmtime.Store(policy._engine)
        self.store.set_limits(memory_size=policy.memory_cap)
        self.store.set_fuel(policy.fuel)
        try:
            instance = wasmtime.Instance(self.store, policy._module, [])
        except (wasmtime.WasmtimeError, wasmtime.Trap) as error:
            raise LoadError(f"cannot instantiate the module under the memory cap: {error}") from None
        self.exports = instance.exports(self.store)
        self.memory: wasmtime.Memory = self.exports["memory"]
        self.size = self.memory.data_len(self.store)

    def _run(self, name: str, *args: int) -> int:
        self.store.set_fuel(self.policy.fuel)
        try:
            return self.exports[name](self.store, *args)
        except wasmtime.Trap as trap:
            raise _CallFailed(REASON_FUEL if trap.trap_code == wasmtime.TrapCode.OUT_OF_FUEL else REASON_TRAP)
        except wasmtime.WasmtimeError:
            raise _CallFailed(REASON_TRAP)

    def _unpack(self, packed: int) -> bytearray:
        word = packed & 0xFFFF_FFFF_FFFF_FFFF
        ptr, length = word >> 32, word & 0xFFFF_FFFF
        if ptr + length > self.size:
            raise _CallFailed(REASON_TRAP)
        return self.memory.read(self.store, ptr, ptr + length)

    def call_packed(self, name: str, *args: int) -> bytearray:
        return self._unpack(self._run(name, *args))

    def call(self, name: str, request: bytes) -> bytearray:
        length = min(len(request), _I32_MAX)
        ptr = self._run("remit_alloc", length) & 0xFFFF_FFFF
        if ptr != 0:
            if ptr + len(request) > self.size:
                raise _CallFailed(REASON_TRAP)
            self.memory.write(self.store, request, ptr)
        return self.call_packed(name, _signed(ptr), length)


def _signed(value: int) -> int:
    return value - (1 << 32) if value > _I32_MAX else value


class Evaluator:
    """One reused instance of a policy. Calls are not re-entrant: use one evaluator per thread."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self._instance: Optional[_Instance] = policy._take_instance()

    def decide(self, request: Union[bytes, bytearray, memoryview, str]) -> bytes:
        """The decision JSON (UTF-8 bytes, no trailing newline) for one request's bytes."""
        return self._call("remit_decide", request, self.policy.deny)

    def visible_tools(self, request: Union[bytes, bytearray, memoryview, str]) -> bytes:
        """The tool listing JSON of the request's subject and context."""
        return self._call("remit_visible_tools", request, Policy.listing_failure)

    def _call(self, name: str, request, on_failure) -> bytes:
        if isinstance(request, str):
            request = request.encode("utf-8")
        request = bytes(request)
        try:
            if self._instance is None:
                self._instance = self.policy._instantiate()
            return bytes(self._instance.call(name, request))
        except LoadError:
            self._instance = None
            return on_failure(REASON_TRAP)
        except _CallFailed as failure:
            # After a failed call the memory is in an unknown state: the next call starts on a fresh instance.
            self._instance = None
            return on_failure(failure.reason)
