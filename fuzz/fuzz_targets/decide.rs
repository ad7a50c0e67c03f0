//! Fuzzes the module's input path: any bytes given to `remit_decide` and `remit_visible_tools` must not trap and
//! must give exactly the interpreter's JSON — through the decision module (`remit_lang::wasm::compile`) and the
//! runtime crate natively (`remit_lang::native`). Every input is decided under two policies: the wallet example
//! (arguments, approvals, facts, counters, stops) and fuzz/world/policy.remit (subject and resource attributes,
//! comparisons of two attributes, set membership, relations, calendars with holidays, durations), which reads
//! `subject.properties`, `resource.properties`, `context.relations` and `context.holidays`.
//! Run: `cargo +nightly fuzz run decide` from the repository root (see fuzz/README.md);
//! tests/wasm_decide.rs runs the seeds (fuzz/seeds/decide/) and the regressions the same way.
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

/// One decision module in a warm instance.
struct Module1 {
    store: Store<()>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    decide: TypedFunc<(i32, i32), i64>,
    visible: TypedFunc<(i32, i32), i64>,
}

impl Module1 {
    fn new(engine: &Engine, bytes: &[u8]) -> Module1 {
        let module = Module::new(engine, bytes).expect("valid module");
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("no imports");
        Module1 {
            memory: instance.get_memory(&mut store, "memory").expect("memory"),
            alloc: instance.get_typed_func(&mut store, "remit_alloc").expect("alloc"),
            decide: instance.get_typed_func(&mut store, "remit_decide").expect("decide"),
            visible: instance.get_typed_func(&mut store, "remit_visible_tools").expect("visible"),
            store,
        }
    }

    fn call(&mut self, visible: bool, data: &[u8]) -> String {
        let ptr = self.alloc.call(&mut self.store, data.len() as i32).expect("alloc never traps");
        if ptr != 0 {
            self.memory.write(&mut self.store, ptr as usize, data).expect("fits");
        }
        let f = if visible { self.visible.clone() } else { self.decide.clone() };
        let packed = f.call(&mut self.store, (ptr, data.len() as i32)).expect("the module never traps");
        let mut out = vec![0; (packed as u64 & 0xffff_ffff) as usize];
        self.memory.read(&self.store, (packed as u64 >> 32) as usize, &mut out).expect("in memory");
        String::from_utf8(out).expect("UTF-8")
    }
}

/// One policy and its three engines.
struct Policy {
    program: remit_lang::ir::Program,
    module: Module1,
    native: remit_lang::native::Native,
}

impl Policy {
    /// The `.remit` files `files` of the folder `dir` (relative to fuzz/), with the standard library.
    fn new(engine: &Engine, dir: &str, files: &[&str]) -> Policy {
        let mut sources = remit_lang::stdlib::sources();
        for file in files {
            let path = format!("{}/{dir}/{file}", env!("CARGO_MANIFEST_DIR"));
            sources.add(*file, std::fs::read_to_string(&path).expect("policy file"));
        }
        let program = remit_lang::check::check(sources).program.expect("the policy checks");
        Policy {
            module: Module1::new(engine, &remit_lang::wasm::compile(&program).expect("compiles")),
            native: remit_lang::native::Native::new(&program).expect("an image"),
            program,
        }
    }

    /// The decision and the listing of `data`, alike in the three engines.
    fn compare(&mut self, data: &[u8], name: &str) {
        let decision = remit_lang::eval::decide(&self.program, data).to_json();
        assert_eq!(self.module.call(false, data), decision, "{name}: module");
        assert_eq!(String::from_utf8(self.native.decide(data)).expect("UTF-8"), decision, "{name}: native");
        let listing = remit_lang::eval::visible_tools(&self.program, data).to_json();
        assert_eq!(self.module.call(true, data), listing, "{name}: module");
        assert_eq!(String::from_utf8(self.native.visible_tools(data)).expect("UTF-8"), listing, "{name}: native");
    }
}

struct Harness {
    wallet: Policy,
    world: Policy,
}

fn harness() -> &'static Mutex<Harness> {
    static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let engine = Engine::default();
        Mutex::new(Harness {
            wallet: Policy::new(&engine, "../examples/wallet", &["catalog.remit", "policy.remit"]),
            world: Policy::new(&engine, "world", &["policy.remit"]),
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let mut guard = harness().lock().expect("not poisoned");
    let h = &mut *guard;
    h.wallet.compare(data, "wallet");
    h.world.compare(data, "world");
});
