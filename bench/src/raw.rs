//! The decision module called through the bare ABI in an engine without fuel metering: what `remit_host`'s
//! bounds (fuel, result checks) cost on top, for orientation only (a gateway must bound calls); optionally with
//! epoch interruption instead (a deadline per call, checked at loop headers and function entries).

use wasmtime::{Config, Engine, Instance, Memory, Module, Store, TypedFunc};

pub struct Raw {
    store: Store<()>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    decide: TypedFunc<(i32, i32), i64>,
    epoch: bool,
}

impl Raw {
    pub fn new(wasm: &[u8], epoch: bool) -> Option<Raw> {
        let mut config = Config::new();
        config.epoch_interruption(epoch);
        let engine = Engine::new(&config).ok()?;
        let module = Module::new(&engine, wasm).ok()?;
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).ok()?;
        let memory = instance.get_memory(&mut store, "memory")?;
        let alloc = instance.get_typed_func(&mut store, "remit_alloc").ok()?;
        let decide = instance.get_typed_func(&mut store, "remit_decide").ok()?;
        Some(Raw { store, memory, alloc, decide, epoch })
    }

    /// The decision's length.
    pub fn decide(&mut self, request: &[u8]) -> usize {
        if self.epoch {
            // A deadline one tick away (nothing ticks here: this measures the checks, not an interruption).
            self.store.set_epoch_deadline(1);
        }
        let ptr = self.alloc.call(&mut self.store, request.len() as i32).unwrap();
        if ptr != 0 {
            self.memory.write(&mut self.store, ptr as usize, request).unwrap();
        }
        let packed = self.decide.call(&mut self.store, (ptr, request.len() as i32)).unwrap() as u64;
        let (at, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        self.memory.data(&self.store)[at..at + len].len()
    }
}
