//! PLACEHOLDER (replaced by the rtcond branch's conditions): the API decide.rs and visible.rs call.

use crate::image::{Image, Param, Tool};
use crate::json::Doc;
use crate::request::Request;

#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub image: Image<'a>,
    pub doc: Doc<'a>,
    pub request: &'a Request<'a>,
    pub tool: u32,
    pub listing: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Possible(u8);

impl Possible {
    pub fn can_be_true(self) -> bool {
        self.0 & 1 != 0
    }
    pub fn can_be_false(self) -> bool {
        self.0 & 2 != 0
    }
}

pub fn eval(env: &Env<'_>, off: u32, count: u32) -> Truth {
    use crate::image::{Node, NODE_AND, NODE_FALSE, NODE_TRUE};
    let _ = count;
    let n = Node::decode(env.image.bytes, off);
    match n.op {
        NODE_TRUE => Truth::True,
        NODE_FALSE => Truth::False,
        NODE_AND if n.arg == 0 => Truth::True,
        _ => Truth::Error,
    }
}

pub fn possible(env: &Env<'_>, off: u32, count: u32) -> Possible {
    let _ = (env, off, count);
    Possible(7)
}

/// The declared parameter of `tool` named `name` (unescaped bytes).
pub fn param(image: &Image<'_>, tool: &Tool, name: impl Iterator<Item = u8> + Clone) -> Option<Param> {
    (0..tool.params_count)
        .map(|i| Param::decode(image.bytes, Image::at(tool.params_off, Param::SIZE, i)))
        .find(|p| name.clone().eq(image.str(p.name_off, p.name_len).iter().copied()))
}
