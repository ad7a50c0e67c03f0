//! The native engine: the decision module's runtime (`crates/remit-rt`) called as a Rust library over the policy
//! image, so `remit test --engine native` and the module in a gateway run the same source code. The buffers are the
//! artifact's (a fixed parse window, tape, key slots, work lists and an output area of the policy's
//! `eval::output_limit`), boxed and reused from call to call as the module reuses its memory.

use remit_rt::decide::Work;
use remit_rt::image::Image;
use remit_rt::json::{Scratch, Tape, Token, Window, TAPE_LEN, WINDOW};
use remit_rt::out::Out;

use crate::ir::Program;
use crate::wasm::err::Error;
use crate::wasm::image;

/// One policy's image and the buffers its calls work in. Calls take `&mut self`: one engine per thread.
pub struct Native {
    image: Vec<u8>,
    window: Box<Window>,
    tape: Box<Tape>,
    scratch: Box<Scratch>,
    work: Box<Work>,
    out: Vec<u8>,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native").field("image_bytes", &self.image.len()).finish_non_exhaustive()
    }
}

impl Native {
    /// The engine for a checked program (its image written here). Its errors are the backend's, worded there.
    pub fn new(program: &Program) -> Result<Native, Error> {
        let image = image::write(program)?;
        let output = Image::new(&image).map_or(0, |i| i.header.output_limit as usize);
        Ok(Native {
            image,
            window: boxed_array(0u8, WINDOW + 8),
            tape: boxed_array(Token::default(), TAPE_LEN),
            scratch: Box::new(Scratch::EMPTY),
            work: Box::new(Work::EMPTY),
            out: vec![0; output],
        })
    }

    /// The decision's JSON, the bytes `remit_decide` returns.
    pub fn decide(&mut self, request: &[u8]) -> Vec<u8> {
        self.call(request, remit_rt::decide::decide)
    }

    /// The tool listing's JSON, the bytes `remit_visible_tools` returns.
    pub fn visible_tools(&mut self, request: &[u8]) -> Vec<u8> {
        self.call(request, remit_rt::visible::visible_tools)
    }

    /// The JSON of `remit_policy_info`.
    pub fn policy_info(&mut self) -> Vec<u8> {
        let Some(image) = Image::new(&self.image) else { return Vec::new() };
        let mut out = Out::new(&mut self.out);
        remit_rt::decide::policy_info(&image, &mut out);
        out.written().to_vec()
    }

    fn call(
        &mut self,
        request: &[u8],
        entry: fn(&Image<'_>, remit_rt::json::Parsed<'_>, &mut Work, &mut Out<'_>),
    ) -> Vec<u8> {
        let Some(image) = Image::new(&self.image) else { return Vec::new() };
        // A request past the maximum is not copied (as `remit_alloc` refuses it); the parse refuses its length.
        let len = request.len();
        if len <= remit_rt::MAX_INPUT {
            self.window[..len].copy_from_slice(request);
        }
        let parsed = remit_rt::json::parse(&mut self.window, 0, len, &mut self.tape, &mut self.scratch).map(|n| {
            let doc = remit_rt::json::Doc { input: &self.window[..len], tape: &self.tape[..n as usize] };
            (doc, &mut self.scratch.keys[..])
        });
        let mut out = Out::new(&mut self.out);
        entry(&image, parsed, &mut self.work, &mut out);
        out.written().to_vec()
    }
}

/// A boxed fixed-size array made on the heap (these are too large for a thread's stack).
fn boxed_array<T: Clone, const N: usize>(value: T, len: usize) -> Box<[T; N]> {
    vec![value; len].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!("`len` is `N`"))
}
