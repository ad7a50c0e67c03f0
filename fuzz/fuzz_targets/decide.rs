//! Fuzzes the module's input path: any bytes given to `remit_decide` and `remit_visible_tools` of the compiled
//! wallet example must not trap and must give exactly the interpreter's JSON.
//! Run: `cargo +nightly fuzz run decide` from the repository root (see fuzz/README.md).
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

struct Harness {
    program: remit::ir::Program,
    store: Store<()>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    decide: TypedFunc<(i32, i32), i64>,
    visible: TypedFunc<(i32, i32), i64>,
}

fn harness() -> &'static Mutex<Harness> {
    static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/wallet");
        let mut sources = remit::stdlib::sources();
        for file in ["catalog.remit", "policy.remit"] {
            sources.add(file, std::fs::read_to_string(format!("{dir}/{file}")).expect("example file"));
        }
        let program = remit::check::check(sources).program.expect("the example checks");
        let bytes = remit::wasm::compile(&program).expect("compiles");
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes).expect("valid module");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("no imports");
        Mutex::new(Harness {
            memory: instance.get_memory(&mut store, "memory").expect("memory"),
            alloc: instance.get_typed_func(&mut store, "remit_alloc").expect("alloc"),
            decide: instance.get_typed_func(&mut store, "remit_decide").expect("decide"),
            visible: instance.get_typed_func(&mut store, "remit_visible_tools").expect("visible"),
            program,
            store,
        })
    })
}

fn call(h: &mut Harness, visible: bool, data: &[u8]) -> String {
    let ptr = h.alloc.call(&mut h.store, data.len() as i32).expect("alloc never traps");
    if ptr != 0 {
        h.memory.write(&mut h.store, ptr as usize, data).expect("fits");
    }
    let f = if visible { h.visible.clone() } else { h.decide.clone() };
    let packed = f.call(&mut h.store, (ptr, data.len() as i32)).expect("the module never traps");
    let mut out = vec![0; (packed as u64 & 0xffff_ffff) as usize];
    h.memory.read(&h.store, (packed as u64 >> 32) as usize, &mut out).expect("in memory");
    String::from_utf8(out).expect("UTF-8")
}

fuzz_target!(|data: &[u8]| {
    let mut guard = harness().lock().expect("not poisoned");
    let h = &mut *guard;
    let decision = call(h, false, data);
    assert_eq!(decision, remit::eval::decide(&h.program, data).to_json());
    let listing = call(h, true, data);
    assert_eq!(listing, remit::eval::visible_tools(&h.program, data).to_json());
});
