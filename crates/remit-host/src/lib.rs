//! The module host: runs decision modules (docs/abi.md) in wasmtime — what a Rust gateway embeds to load a `.wasm`
//! (or a `.cwasm`) and decide. It depends on wasmtime, the module format (`remit-module`, to know a module whose work
//! is bounded) and serde_json (to read `remit_policy_info`), never on the compiler: no parser, no checker, no
//! diagnostics, no async runtime, no database.
//!
//! - [`Runtime`] owns the wasmtime engine and the per-call [`Limits`]; it compiles a `.wasm`, precompiles it into a
//!   `.cwasm` (Cranelift ahead of time, what `remit build --precompile` writes) and loads either into a
//!   [`Compiled`] policy, checking the ABI on the way (no imports, the exports and their types, the ABI version,
//!   `remit_policy_info`).
//! - [`Evaluator`] owns one store and one instance of a compiled policy and reuses them across calls (one per
//!   thread: calls are not re-entrant). Every call is bounded: module v2 (the committed runtime linked with a
//!   policy image, checked byte for byte by `remit_module::linked_image`, whose image weighs at most
//!   [`MAX_UNMETERED_WEIGHT`]) by its own work bound, linear in the request's length for a given policy
//!   (docs/module-v2.md, "The work bound"), so it runs without a fuel meter; every other module by a fuel budget
//!   ([`Limits::fuel`]). A memory cap is enforced by a resource limiter ([`Limits::memory_bytes`]; decision modules
//!   have a fixed memory, so this only refuses growth). A trap, an exhausted budget or a broken ABI contract never
//!   escapes as an error or a hang: the call answers a `deny` decision with the reason `runtime.trap` or
//!   `runtime.fuel-exhausted`, and the instance is replaced before the next call.
//! - [`PolicyHandle`] swaps the compiled policy atomically (hot reload): an evaluator made by
//!   [`PolicyHandle::evaluator`] finishes an in-flight call on the policy it started with, and every call that starts
//!   after [`PolicyHandle::swap`] returned runs on the new policy.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use wasmtime::{
    Config, Engine, ExternType, Instance, Memory, Module, Mutability, Precompiled, Store, StoreLimits,
    StoreLimitsBuilder, Trap, TypedFunc, ValType,
};

/// The ABI version this host speaks (the module's `remit_abi_version` global must equal it).
pub const ABI_VERSION: i32 = remit_module::ABI_VERSION;

/// The default fuel budget of one call (wasmtime fuel: about one unit per executed wasm instruction). A decision on
/// a request at the module's 256 KiB input limit needs a small fraction of it; on this machine class 100 million
/// units run in roughly 0.05-0.2 s, which is what a call that never finishes (a module bug) costs before it is
/// denied.
pub const DEFAULT_FUEL: u64 = 100_000_000;

/// The heaviest policy image module v2 runs without fuel (`remit_rt::image::work_weight`: tools with their scopes and
/// parameters, rules, condition nodes and operand elements). A call's work is at most linear in the request for a
/// given policy, with this weight in the factor; past it (a tool with hundreds of atoms over large sets, say) the
/// module is metered like any other. The shipped examples weigh 120-606; tests/rt_bound.rs times a policy built to be
/// slow at this weight (docs/module-v2.md, "The work bound").
pub const MAX_UNMETERED_WEIGHT: u64 = 1024;

/// The default cap on an instance's linear memory. Decision modules declare a fixed memory of a few MiB (the
/// runtime's buffers, the policy image and the output area, docs/module-v2.md "Memory"); a module that needs more
/// than the cap is refused at load time.
pub const DEFAULT_MEMORY_CAP: usize = 64 << 20;

/// The reason of the deny a host answers when the module trapped or broke the ABI contract.
pub const REASON_TRAP: &str = "runtime.trap";
/// The reason of the deny a host answers when a call used up its fuel budget.
pub const REASON_FUEL: &str = "runtime.fuel-exhausted";

/// Per-call bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel given to every call (`remit_alloc` and `remit_decide` together share one budget).
    pub fuel: u64,
    /// The largest linear memory an instance may have, in bytes.
    pub memory_bytes: usize,
    /// Meter module v2 too (by default it runs without fuel: its work is bounded by construction). For measuring
    /// its fuel, and for hosts that want one meter for every module.
    pub meter_bounded: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { fuel: DEFAULT_FUEL, memory_bytes: DEFAULT_MEMORY_CAP, meter_bounded: false }
    }
}

/// The wasmtime engines for decision modules, with the per-call limits.
#[derive(Clone)]
pub struct Runtime {
    /// Fuel metering compiled in: for every module whose work is not known to be bounded.
    engine: Engine,
    /// No fuel metering: for module v2 (see the module's header).
    bounded: Engine,
    limits: Limits,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("limits", &self.limits).finish_non_exhaustive()
    }
}

/// The engine configuration, metered or not. Fuel metering is compiled into the code, so a `.cwasm` only loads into
/// an engine with the same configuration (and the same wasmtime version): `remit build --precompile` uses these.
fn config(metered: bool) -> Config {
    let mut config = Config::new();
    config.consume_fuel(metered);
    // Module v2's fixed buffers (about 3 MiB of zeros) lie between the runtime's constants and the policy image: a
    // dense memory image would span them, and every `.cwasm` would carry it (3.8 MiB for the wallet, about 300 KiB
    // without: BENCHMARKS.md, Modules). Sparse, the segments are copied at instantiation, which is as fast here (21 against 29 µs for an
    // evaluator and its first call, measured on the wallet).
    config.memory_guaranteed_dense_image_size(0);
    if !metered {
        // Module v2 uses no SIMD (docs/abi.md). Turning it off also makes this engine refuse a `.cwasm` compiled
        // with wasmtime's defaults and no fuel: a module precompiled elsewhere without a meter does not get in here
        // by accident.
        config.wasm_relaxed_simd(false);
        config.wasm_simd(false);
    }
    config
}

fn err(context: &str) -> impl FnOnce(wasmtime::Error) -> String + '_ {
    move |e| format!("{context}: {e:#}")
}

impl Runtime {
    /// A runtime with the default limits.
    pub fn new() -> Result<Runtime, String> {
        Runtime::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Result<Runtime, String> {
        let engine = Engine::new(&config(true)).map_err(err("cannot set up wasmtime"))?;
        let bounded = Engine::new(&config(false)).map_err(err("cannot set up wasmtime"))?;
        Ok(Runtime { engine, bounded, limits })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The metered engine (every module but module v2).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether `wasm` runs without a fuel meter here: module v2 (the runtime linked with an image) whose image
    /// weighs at most [`MAX_UNMETERED_WEIGHT`], unless the limits meter it too.
    pub fn is_bounded(&self, wasm: &[u8]) -> bool {
        if self.limits.meter_bounded {
            return false;
        }
        let image = remit_module::linked_image(wasm).and_then(remit_rt::image::Image::new);
        image
            .is_some_and(|image| remit_rt::image::work_weight(&image, MAX_UNMETERED_WEIGHT + 1) <= MAX_UNMETERED_WEIGHT)
    }

    /// Compiles a `.wasm` ahead of time into the bytes of a `.cwasm` for this engine configuration and wasmtime
    /// version (unmetered for module v2, [`Runtime::is_bounded`]).
    pub fn precompile(&self, wasm: &[u8]) -> Result<Vec<u8>, String> {
        let engine = if self.is_bounded(wasm) { &self.bounded } else { &self.engine };
        engine.precompile_module(wasm).map_err(err("cannot precompile the module"))
    }

    /// Loads a decision module from a `.wasm` or a `.cwasm` (told apart by their contents) and checks its ABI.
    pub fn load(&self, bytes: &[u8]) -> Result<Compiled, String> {
        let (module, metered) = match Engine::detect_precompiled(bytes) {
            // A `.cwasm` is trusted whole (see `deserialize`): it loads into the engine it was compiled for, which
            // `remit build --precompile` chose by the same test as below.
            Some(Precompiled::Module) => match deserialize(&self.engine, bytes) {
                Ok(module) => (module, true),
                Err(metered) if self.limits.meter_bounded => return Err(metered),
                Err(metered) => (deserialize(&self.bounded, bytes).map_err(|_| metered)?, false),
            },
            Some(Precompiled::Component) => return Err("this is a precompiled component, not a decision module".into()),
            None => {
                let bounded = self.is_bounded(bytes);
                let engine = if bounded { &self.bounded } else { &self.engine };
                (Module::new(engine, bytes).map_err(err("not a valid WebAssembly module"))?, !bounded)
            }
        };
        Compiled::new(self, module, metered)
    }

    /// [`Runtime::load`] of a file.
    pub fn load_file(&self, path: &Path) -> Result<Compiled, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        self.load(&bytes).map_err(|e| format!("`{}`: {e}", path.display()))
    }
}

/// Loads a precompiled module. wasmtime's `Module::deserialize` is `unsafe`: it trusts the machine code inside the
/// artifact. One of the crate's two places with `unsafe` (the lints deny `unsafe_code` everywhere else; the other
/// is `gateway::wal_index`, which reads SQLite's shared memory).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, bytes: &[u8]) -> Result<Module, String> {
    // SAFETY: a `.cwasm` must come from a trusted build (`remit build --precompile` in the policy's CI) with this
    // same wasmtime version; `Module::deserialize` refuses, with an error and before using any of the code, an
    // artifact of another wasmtime version or other compilation settings (fuel metering, target, CPU features).
    // Never load a `.cwasm` from an untrusted source: ship the `.wasm`, which is validated here.
    unsafe { Module::deserialize(engine, bytes) }.map_err(|e| format!("cannot load the precompiled module: {e}"))
}

/// What `remit_policy_info` says about a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInfo {
    /// The policy hash (`sha256:…`), the `policy` of every decision.
    pub policy: String,
    /// The JSON as the module returned it.
    pub json: String,
}

/// A decision module compiled for a [`Runtime`], its ABI checked: ready to instantiate, cheap to share across
/// threads (behind an `Arc`).
pub struct Compiled {
    engine: Engine,
    module: Module,
    limits: Limits,
    /// Whether calls are metered by fuel (false for module v2, whose work is bounded without a meter).
    metered: bool,
    info: PolicyInfo,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled").field("policy", &self.info.policy).field("limits", &self.limits).finish()
    }
}

const FUNCTIONS: [(&str, &[ValType], &[ValType]); 4] = [
    ("remit_alloc", &[ValType::I32], &[ValType::I32]),
    ("remit_decide", &[ValType::I32, ValType::I32], &[ValType::I64]),
    ("remit_visible_tools", &[ValType::I32, ValType::I32], &[ValType::I64]),
    ("remit_policy_info", &[], &[ValType::I64]),
];

impl Compiled {
    fn new(runtime: &Runtime, module: Module, metered: bool) -> Result<Compiled, String> {
        if let Some(import) = module.imports().next() {
            return Err(format!(
                "the module imports `{}.{}`: a decision module imports nothing",
                import.module(),
                import.name()
            ));
        }
        check_exports(&module)?;
        let mut compiled = Compiled {
            engine: if metered { runtime.engine.clone() } else { runtime.bounded.clone() },
            module,
            limits: runtime.limits,
            metered,
            info: PolicyInfo { policy: String::new(), json: String::new() },
        };
        // One instantiation now, so a module that cannot run here is refused at load time, not on a request.
        let mut live = Live::new(&compiled)?;
        let json = live.policy_info()?;
        compiled.info = parse_info(json)?;
        Ok(compiled)
    }

    /// The policy hash (`sha256:…`).
    pub fn policy(&self) -> &str {
        &self.info.policy
    }

    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether calls are metered by fuel: false for module v2, whose work is bounded without a meter.
    pub fn metered(&self) -> bool {
        self.metered
    }

    /// A new evaluator (one instance) of this policy.
    pub fn evaluator(self: &Arc<Self>) -> Result<Evaluator, String> {
        Evaluator::new(self.clone())
    }
}

fn check_exports(module: &Module) -> Result<(), String> {
    let export = |name: &str| module.get_export(name).ok_or_else(|| format!("the module does not export `{name}`"));
    if !matches!(export("memory")?, ExternType::Memory(_)) {
        return Err("the export `memory` is not a memory".into());
    }
    match export("remit_abi_version")? {
        ExternType::Global(g) if ValType::eq(g.content(), &ValType::I32) && g.mutability() == Mutability::Const => {}
        _ => return Err("the export `remit_abi_version` is not an immutable i32 global".into()),
    }
    for (name, params, results) in FUNCTIONS {
        let ExternType::Func(ty) = export(name)? else {
            return Err(format!("the export `{name}` is not a function"));
        };
        let same = |actual: &mut dyn ExactSizeIterator<Item = ValType>, wanted: &[ValType]| {
            actual.len() == wanted.len() && actual.zip(wanted).all(|(a, b)| ValType::eq(&a, b))
        };
        if !same(&mut ty.params(), params) || !same(&mut ty.results(), results) {
            return Err(format!("the export `{name}` has the type {ty}, not the one of ABI version {ABI_VERSION}"));
        }
    }
    Ok(())
}

fn parse_info(json: Vec<u8>) -> Result<PolicyInfo, String> {
    let json = String::from_utf8(json).map_err(|_| "`remit_policy_info` returned invalid UTF-8".to_string())?;
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("`remit_policy_info` returned invalid JSON: {e}"))?;
    let policy = value.get("policy").and_then(|p| p.as_str()).ok_or("`remit_policy_info` has no `policy` string")?;
    if value.get("abi_version").and_then(|v| v.as_i64()) != Some(i64::from(ABI_VERSION)) {
        return Err(format!("`remit_policy_info` does not say `\"abi_version\": {ABI_VERSION}`"));
    }
    Ok(PolicyInfo { policy: policy.to_string(), json })
}

/// Why a call did not produce the module's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Trap,
    Fuel,
}

impl Failure {
    fn reason(self) -> &'static str {
        match self {
            Failure::Trap => REASON_TRAP,
            Failure::Fuel => REASON_FUEL,
        }
    }

    fn of(error: &wasmtime::Error) -> Failure {
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => Failure::Fuel,
            _ => Failure::Trap,
        }
    }
}

/// One store and instance with the exports resolved.
struct Live {
    /// The fuel every call starts with; `None` for an unmetered module.
    fuel: Option<u64>,
    store: Store<StoreLimits>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    decide: TypedFunc<(i32, i32), i64>,
    visible_tools: TypedFunc<(i32, i32), i64>,
    policy_info: TypedFunc<(), i64>,
}

#[derive(Debug, Clone, Copy)]
enum Entry {
    Decide,
    VisibleTools,
}

impl Live {
    fn new(compiled: &Compiled) -> Result<Live, String> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(compiled.limits.memory_bytes)
            .instances(1)
            .memories(1)
            .tables(1)
            .build();
        let mut store = Store::new(&compiled.engine, limits);
        store.limiter(|limits| limits);
        let fuel = compiled.metered.then_some(compiled.limits.fuel);
        if let Some(fuel) = fuel {
            store.set_fuel(fuel).map_err(err("cannot set fuel"))?;
        }
        let instance =
            Instance::new(&mut store, &compiled.module, &[]).map_err(err("cannot instantiate the module"))?;
        let version = instance
            .get_global(&mut store, "remit_abi_version")
            .and_then(|g| g.get(&mut store).i32())
            .ok_or("the module has no `remit_abi_version` global")?;
        if version != ABI_VERSION {
            return Err(format!("the module has ABI version {version}; this host speaks version {ABI_VERSION}"));
        }
        let memory = instance.get_memory(&mut store, "memory").ok_or("the module exports no memory")?;
        let alloc = instance.get_typed_func(&mut store, "remit_alloc").map_err(err("`remit_alloc`"))?;
        let decide = instance.get_typed_func(&mut store, "remit_decide").map_err(err("`remit_decide`"))?;
        let visible_tools =
            instance.get_typed_func(&mut store, "remit_visible_tools").map_err(err("`remit_visible_tools`"))?;
        let policy_info =
            instance.get_typed_func(&mut store, "remit_policy_info").map_err(err("`remit_policy_info`"))?;
        Ok(Live { fuel, store, memory, alloc, decide, visible_tools, policy_info })
    }

    /// The bytes `(ptr << 32) | len` designates, when they lie inside the memory.
    fn result(&self, packed: i64) -> Result<(usize, usize), Failure> {
        let ptr = (packed as u64 >> 32) as usize;
        let len = (packed as u64 & 0xffff_ffff) as usize;
        match ptr.checked_add(len) {
            Some(end) if end <= self.memory.data_size(&self.store) => Ok((ptr, len)),
            _ => Err(Failure::Trap),
        }
    }

    /// Writes the request and calls the entry point; the result's place in memory.
    fn call(&mut self, entry: Entry, request: &[u8]) -> Result<(usize, usize), Failure> {
        if let Some(fuel) = self.fuel {
            self.store.set_fuel(fuel).map_err(|_| Failure::Trap)?;
        }
        // A length beyond i32 is oversize anyway: `remit_alloc` answers 0 and the module denies it.
        let len = i32::try_from(request.len()).unwrap_or(i32::MAX);
        let ptr = self.alloc.call(&mut self.store, len).map_err(|e| Failure::of(&e))?;
        if ptr != 0 {
            // A module that hands out a place outside its memory broke the ABI: the write fails, the call traps.
            self.memory.write(&mut self.store, ptr as u32 as usize, request).map_err(|_| Failure::Trap)?;
        }
        let func = match entry {
            Entry::Decide => &self.decide,
            Entry::VisibleTools => &self.visible_tools,
        };
        let packed = func.call(&mut self.store, (ptr, len)).map_err(|e| Failure::of(&e))?;
        self.result(packed)
    }

    fn policy_info(&mut self) -> Result<Vec<u8>, String> {
        if let Some(fuel) = self.fuel {
            self.store.set_fuel(fuel).map_err(err("cannot set fuel"))?;
        }
        let packed = self.policy_info.call(&mut self.store, ()).map_err(err("`remit_policy_info` failed"))?;
        let (ptr, len) = self.result(packed).map_err(|_| "`remit_policy_info` returned bytes outside its memory")?;
        Ok(self.memory.data(&self.store)[ptr..ptr + len].to_vec())
    }
}

/// One instance of a compiled policy, reused across calls. Not re-entrant: one per thread.
pub struct Evaluator {
    compiled: Arc<Compiled>,
    /// `None` after a failed call: the next call instantiates afresh.
    live: Option<Live>,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator").field("policy", &self.compiled.info.policy).finish_non_exhaustive()
    }
}

impl Evaluator {
    pub fn new(compiled: Arc<Compiled>) -> Result<Evaluator, String> {
        let live = Live::new(&compiled)?;
        Ok(Evaluator { compiled, live: Some(live) })
    }

    /// The policy this evaluator runs.
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    /// The decision JSON for a request: the module's bytes, or a host-made deny (`runtime.trap`,
    /// `runtime.fuel-exhausted`). Never fails, never hangs.
    pub fn decide(&mut self, request: &[u8]) -> Vec<u8> {
        self.decide_with(request, <[u8]>::to_vec)
    }

    /// [`Evaluator::decide`] without copying: `f` sees the decision bytes where the module wrote them.
    pub fn decide_with<R>(&mut self, request: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        match self.run(Entry::Decide, request) {
            Ok((ptr, len)) => f(&self.memory()[ptr..ptr + len]),
            Err(failure) => f(&deny_json(failure.reason(), self.compiled.policy())),
        }
    }

    /// The tool listing JSON (the interpreter's `Visibility::to_json`) for a request's subject and context. When the
    /// module fails, no tool is visible: `{"visible":[],"hidden":[],"error":"runtime.trap"}` (or
    /// `runtime.fuel-exhausted`).
    pub fn visible_tools(&mut self, request: &[u8]) -> Vec<u8> {
        match self.run(Entry::VisibleTools, request) {
            Ok((ptr, len)) => self.memory()[ptr..ptr + len].to_vec(),
            Err(failure) => format!("{{\"visible\":[],\"hidden\":[],\"error\":\"{}\"}}", failure.reason()).into_bytes(),
        }
    }

    /// The fuel the last call used (0 after a failed one that replaced the instance, and for an unmetered module).
    pub fn fuel_used(&self) -> u64 {
        let Some(live) = self.live.as_ref() else { return 0 };
        match (live.fuel, live.store.get_fuel()) {
            (Some(fuel), Ok(left)) => fuel.saturating_sub(left),
            _ => 0,
        }
    }

    fn memory(&self) -> &[u8] {
        let live = self.live.as_ref().expect("a successful call leaves its instance");
        live.memory.data(&live.store)
    }

    fn run(&mut self, entry: Entry, request: &[u8]) -> Result<(usize, usize), Failure> {
        if self.live.is_none() {
            self.live = Some(Live::new(&self.compiled).map_err(|_| Failure::Trap)?);
        }
        let live = self.live.as_mut().expect("just instantiated");
        let result = live.call(entry, request);
        if result.is_err() {
            // The instance stopped mid-call: its memory and globals are in an unknown state.
            self.live = None;
        }
        result
    }
}

/// A policy that can be replaced while it is in use (hot reload). Clones share the same policy.
#[derive(Clone)]
pub struct PolicyHandle {
    shared: Arc<Shared>,
}

struct Shared {
    /// The policy and its generation, replaced together.
    current: RwLock<(u64, Arc<Compiled>)>,
    /// The generation of `current`, readable without the lock: evaluators compare it on every call.
    generation: AtomicU64,
}

impl std::fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHandle").field("current", &self.current()).finish()
    }
}

impl PolicyHandle {
    pub fn new(compiled: Compiled) -> PolicyHandle {
        let shared = Shared { current: RwLock::new((0, Arc::new(compiled))), generation: AtomicU64::new(0) };
        PolicyHandle { shared: Arc::new(shared) }
    }

    /// The policy new calls run on.
    pub fn current(&self) -> Arc<Compiled> {
        self.read().1
    }

    fn read(&self) -> (u64, Arc<Compiled>) {
        let guard = self.shared.current.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        (guard.0, guard.1.clone())
    }

    /// Replaces the policy and returns the previous one. Calls in flight finish on the policy they started with;
    /// every call that starts after this returns runs on `compiled`.
    pub fn swap(&self, compiled: Compiled) -> Arc<Compiled> {
        let mut guard = self.shared.current.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = guard.0 + 1;
        let previous = std::mem::replace(&mut *guard, (generation, Arc::new(compiled)));
        self.shared.generation.store(generation, Ordering::SeqCst);
        previous.1
    }

    /// An evaluator that follows this handle: it re-instantiates when the policy was swapped since its last call.
    pub fn evaluator(&self) -> Result<ReloadingEvaluator, String> {
        let (generation, compiled) = self.read();
        Ok(ReloadingEvaluator { handle: self.clone(), generation, evaluator: Evaluator::new(compiled)? })
    }
}

/// An [`Evaluator`] of whatever policy a [`PolicyHandle`] holds at the start of each call. One per thread.
#[derive(Debug)]
pub struct ReloadingEvaluator {
    handle: PolicyHandle,
    generation: u64,
    evaluator: Evaluator,
}

impl ReloadingEvaluator {
    /// Moves to the handle's current policy if it changed; the evaluator to use for the next call.
    pub fn refresh(&mut self) -> &mut Evaluator {
        if self.handle.shared.generation.load(Ordering::SeqCst) != self.generation {
            let (generation, compiled) = self.handle.read();
            self.generation = generation;
            // Instantiation only fails for a module that already instantiated once at load time (e.g. memory
            // exhausted); the evaluator then retries on each call and denies with `runtime.trap` meanwhile.
            self.evaluator = Evaluator::new(compiled.clone()).unwrap_or_else(|_| Evaluator { compiled, live: None });
        }
        &mut self.evaluator
    }

    pub fn decide(&mut self, request: &[u8]) -> Vec<u8> {
        self.refresh().decide(request)
    }

    pub fn decide_with<R>(&mut self, request: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        self.refresh().decide_with(request, f)
    }

    pub fn visible_tools(&mut self, request: &[u8]) -> Vec<u8> {
        self.refresh().visible_tools(request)
    }

    /// The generation of the policy the last call ran on (0 for the handle's first policy, +1 per swap).
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The decision a host answers when the module failed: a deny with one reason and nothing else, byte for byte what
/// the interpreter's `Decision::deny(vec![reason], policy).to_json()` writes (tests/runtime.rs compares them).
pub fn deny_json(reason: &str, policy: &str) -> Vec<u8> {
    use remit_rt::Sink;
    struct Bytes(Vec<u8>);
    impl Sink for Bytes {
        fn write(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
        fn byte(&mut self, byte: u8) {
            self.0.push(byte);
        }
    }
    let mut out = Bytes(b"{\"decision\":\"deny\",\"reasons\":[".to_vec());
    remit_rt::out::write_string(&mut out, reason.as_bytes());
    out.write(
        b"],\"rules\":[],\"missing_approvals\":[],\"approvals\":[],\"obligations\":[],\"mandate_chain\":[],\
          \"credential\":null,\"escalate_to\":null,\"policy\":",
    );
    remit_rt::out::write_string(&mut out, policy.as_bytes());
    out.byte(b'}');
    out.0
}
