//! A decision module run directly in wasmtime through its ABI (docs/abi.md), without `remit_host`: no fuel, no
//! instance replacement, so a trap fails the test instead of becoming a deny. The differential tests compare what
//! it answers with the interpreter.

use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc};

pub struct Wasm {
    store: Store<()>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    decide: TypedFunc<(i32, i32), i64>,
    visible: TypedFunc<(i32, i32), i64>,
}

impl Wasm {
    pub fn new(engine: &Engine, bytes: &[u8]) -> Wasm {
        let module = Module::new(engine, bytes).expect("module compiles");
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates with no imports");
        let memory = instance.get_memory(&mut store, "memory").expect("memory export");
        let alloc = instance.get_typed_func(&mut store, "remit_alloc").expect("remit_alloc");
        let decide = instance.get_typed_func(&mut store, "remit_decide").expect("remit_decide");
        let visible = instance.get_typed_func(&mut store, "remit_visible_tools").expect("remit_visible_tools");
        Wasm { store, memory, alloc, decide, visible }
    }

    /// `remit_decide`: the decision JSON.
    pub fn decide(&mut self, request: &[u8]) -> String {
        let f = self.decide.clone();
        self.call(f, request)
    }

    /// `remit_visible_tools`: the listing JSON.
    pub fn visible(&mut self, request: &[u8]) -> String {
        let f = self.visible.clone();
        self.call(f, request)
    }

    fn call(&mut self, f: TypedFunc<(i32, i32), i64>, request: &[u8]) -> String {
        let ptr = self.alloc.call(&mut self.store, request.len() as i32).expect("alloc does not trap");
        // An oversize request gets no buffer (`ptr == 0`); the module answers it without reading it.
        if ptr != 0 {
            self.memory.write(&mut self.store, ptr as usize, request).expect("write request");
        }
        let packed = f.call(&mut self.store, (ptr, request.len() as i32)).expect("the module does not trap");
        let (at, len) = ((packed as u64 >> 32) as usize, (packed as u64 & 0xffff_ffff) as usize);
        let mut out = vec![0; len];
        self.memory.read(&self.store, at, &mut out).expect("read decision");
        String::from_utf8(out).expect("decisions are UTF-8")
    }
}
