//! A thin layer over wasm-encoder for writing function bodies: locals allocated by type, instructions appended
//! from arrays, and the static-offset memory accessors used everywhere.

use wasm_encoder::{Function, Instruction, ValType};

use super::module::mem;

/// A function body under construction.
#[derive(Debug)]
pub struct Body {
    params: u32,
    locals: Vec<ValType>,
    code: Vec<Instruction<'static>>,
}

impl Body {
    pub fn new(params: u32) -> Body {
        Body { params, locals: Vec::new(), code: Vec::new() }
    }

    /// A new local of type `ty`; its index.
    pub fn local(&mut self, ty: ValType) -> u32 {
        self.locals.push(ty);
        self.params + self.locals.len() as u32 - 1
    }

    pub fn i32(&mut self) -> u32 {
        self.local(ValType::I32)
    }

    pub fn i64(&mut self) -> u32 {
        self.local(ValType::I64)
    }

    pub fn emit<I: IntoIterator<Item = Instruction<'static>>>(&mut self, code: I) -> &mut Self {
        self.code.extend(code);
        self
    }

    pub fn finish(mut self) -> Function {
        self.code.push(Instruction::End);
        let mut f = Function::new_with_locals_types(self.locals);
        for instruction in &self.code {
            f.instruction(instruction);
        }
        f
    }
}

/// `i32.load` at `offset` from the address on the stack.
pub fn load32(offset: u64) -> Instruction<'static> {
    Instruction::I32Load(mem(offset, 4))
}

pub fn load8(offset: u64) -> Instruction<'static> {
    Instruction::I32Load8U(mem(offset, 1))
}

pub fn load64(offset: u64) -> Instruction<'static> {
    Instruction::I64Load(mem(offset, 8))
}

pub fn store32(offset: u64) -> Instruction<'static> {
    Instruction::I32Store(mem(offset, 4))
}

pub fn store8(offset: u64) -> Instruction<'static> {
    Instruction::I32Store8(mem(offset, 1))
}

pub fn store64(offset: u64) -> Instruction<'static> {
    Instruction::I64Store(mem(offset, 8))
}
