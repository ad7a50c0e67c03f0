//! Assembles one module: interned function types, functions declared by name before their bodies (so runtime
//! pieces can call each other in any order), static data interned into one segment, and everything encoded in one
//! `finish()` that also validates the result with wasmparser.

use std::borrow::Cow;
use std::collections::HashMap;

use wasm_encoder::{
    CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function, FunctionSection, GlobalSection,
    GlobalType, MemArg, MemArgTarget, MemorySection, MemoryType, Module, NameMap, NameSection, TypeSection, ValType,
};

use super::layout::{data_base, OUT_SIZE, PAGE};

#[derive(Debug)]
struct FuncEntry {
    name: Cow<'static, str>,
    ty: u32,
    body: Option<Function>,
}

/// A module under construction.
#[derive(Debug)]
pub struct ModuleBuilder {
    /// Size of the output area (layout.rs): the static data starts after it.
    out_size: u32,
    types: Vec<(Vec<ValType>, Vec<ValType>)>,
    funcs: Vec<FuncEntry>,
    by_name: HashMap<Cow<'static, str>, u32>,
    data: Vec<u8>,
    interned: HashMap<Vec<u8>, u32>,
    exports: Vec<(String, ExportKind, u32)>,
    globals: Vec<(String, i32)>,
}

impl Default for ModuleBuilder {
    fn default() -> ModuleBuilder {
        ModuleBuilder::new()
    }
}

impl ModuleBuilder {
    pub fn new() -> ModuleBuilder {
        ModuleBuilder::with_output(OUT_SIZE)
    }

    /// A module whose output area holds `out_size` bytes (rounded up to whole pages).
    pub fn with_output(out_size: u32) -> ModuleBuilder {
        ModuleBuilder {
            out_size: out_size.max(OUT_SIZE).next_multiple_of(PAGE),
            types: Vec::new(),
            funcs: Vec::new(),
            by_name: HashMap::new(),
            data: Vec::new(),
            interned: HashMap::new(),
            exports: Vec::new(),
            globals: Vec::new(),
        }
    }

    /// Size of the output area.
    pub fn out_size(&self) -> u32 {
        self.out_size
    }

    fn intern_type(&mut self, params: &[ValType], results: &[ValType]) -> u32 {
        let key = (params.to_vec(), results.to_vec());
        match self.types.iter().position(|t| *t == key) {
            Some(i) => i as u32,
            None => {
                self.types.push(key);
                (self.types.len() - 1) as u32
            }
        }
    }

    /// Declares a function; its index is fixed from now on. Declaring a name twice is a compiler bug. Runtime
    /// functions have static names; per-policy ones (`cond_3`, `part_17`) are made when compiling.
    pub fn declare(&mut self, name: impl Into<Cow<'static, str>>, params: &[ValType], results: &[ValType]) -> u32 {
        let name = name.into();
        assert!(!self.by_name.contains_key(&name), "function `{name}` declared twice");
        let ty = self.intern_type(params, results);
        self.funcs.push(FuncEntry { name: name.clone(), ty, body: None });
        let index = (self.funcs.len() - 1) as u32;
        self.by_name.insert(name, index);
        index
    }

    /// How many functions are declared (so a fresh name can be made from it).
    pub fn function_count(&self) -> usize {
        self.funcs.len()
    }

    /// The index of a declared function.
    pub fn func(&self, name: &str) -> u32 {
        *self.by_name.get(name).unwrap_or_else(|| panic!("function `{name}` is not declared"))
    }

    pub fn define(&mut self, name: &str, body: Function) {
        let index = self.func(name) as usize;
        assert!(self.funcs[index].body.is_none(), "function `{name}` defined twice");
        self.funcs[index].body = Some(body);
    }

    /// Places bytes in the static data and returns their address; equal byte strings share one copy.
    pub fn bytes(&mut self, bytes: &[u8]) -> u32 {
        if let Some(&at) = self.interned.get(bytes) {
            return at;
        }
        let at = self.raw(bytes, 1);
        self.interned.insert(bytes.to_vec(), at);
        at
    }

    /// Places bytes in the static data without interning, aligned to `align`, and returns their address.
    pub fn raw(&mut self, bytes: &[u8], align: usize) -> u32 {
        while !self.data.len().is_multiple_of(align) {
            self.data.push(0);
        }
        let at = data_base(self.out_size) + self.data.len() as u32;
        self.data.extend_from_slice(bytes);
        at
    }

    pub fn export_func(&mut self, export: &str, func: &str) {
        let index = self.func(func);
        self.exports.push((export.to_string(), ExportKind::Func, index));
    }

    /// An immutable exported i32 global.
    pub fn export_global(&mut self, export: &str, value: i32) {
        self.globals.push((export.to_string(), value));
    }

    /// Encodes the module and validates it.
    pub fn finish(self) -> Result<Vec<u8>, String> {
        let mut module = Module::new();
        let mut types = TypeSection::new();
        for (params, results) in &self.types {
            types.ty().function(params.iter().copied(), results.iter().copied());
        }
        module.section(&types);
        let mut functions = FunctionSection::new();
        for f in &self.funcs {
            functions.function(f.ty);
        }
        module.section(&functions);
        let pages = (data_base(self.out_size) as u64 + self.data.len() as u64).div_ceil(PAGE as u64);
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: pages,
            maximum: Some(pages),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&memories);
        let mut globals = GlobalSection::new();
        for (_, value) in &self.globals {
            globals.global(
                GlobalType { val_type: ValType::I32, mutable: false, shared: false },
                &ConstExpr::i32_const(*value),
            );
        }
        module.section(&globals);
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        for (i, (name, _)) in self.globals.iter().enumerate() {
            exports.export(name, ExportKind::Global, i as u32);
        }
        for (name, kind, index) in &self.exports {
            exports.export(name, *kind, *index);
        }
        module.section(&exports);
        let mut code = CodeSection::new();
        for f in &self.funcs {
            let body = f.body.as_ref().ok_or_else(|| format!("function `{}` has no body", f.name))?;
            code.function(body);
        }
        module.section(&code);
        let mut data = DataSection::new();
        data.active(0, &ConstExpr::i32_const(data_base(self.out_size) as i32), self.data.iter().copied());
        module.section(&data);
        let mut names = NameSection::new();
        let mut function_names = NameMap::new();
        for (i, f) in self.funcs.iter().enumerate() {
            function_names.append(i as u32, &f.name);
        }
        names.functions(&function_names);
        module.section(&names);
        let bytes = module.finish();
        wasmparser::Validator::new().validate_all(&bytes).map_err(|e| format!("invalid module: {e}"))?;
        Ok(bytes)
    }
}

/// A memory access with the given static offset and natural alignment for `bytes`.
pub fn mem(offset: u64, bytes: u32) -> MemArg {
    MemArg { offset, align: bytes.trailing_zeros(), target: MemArgTarget::Memory(0), ordering: None }
}
