//! The policy a gateway serves: the compiled module with its metadata (and the checked program when the sources
//! were given), swapped whole on reload, and the pool of module instances that decide and list tools with it.
//! Depends on nothing else of the core.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use remit_host::{Compiled, Evaluator};
use remit_lang::eval::Decision;
use remit_lang::ir::Program;
use remit_lang::wasm::meta::PolicyMeta;

use super::Gateway;

/// How many idle module instances the gateway keeps.
const MAX_POOLED_EVALUATORS: usize = 8;

/// A policy the gateway serves: the compiled module and what the gateway must know about it, and the checked
/// program when the gateway was given the sources (then the inbox can explain decisions; a module alone cannot).
#[derive(Debug)]
pub struct Policy {
    pub compiled: Arc<Compiled>,
    pub meta: PolicyMeta,
    pub program: Option<Arc<Program>>,
    /// The revision of the signed bundle it came from (`remit build --revision N`), reported by `/ready` and
    /// `/metrics` so that an operator sees which rollout each replica serves; `None` for sources or a bare module.
    pub revision: Option<u64>,
}

impl Policy {
    /// Pairs a module with its metadata; they must describe the same policy.
    pub fn new(compiled: Compiled, meta: PolicyMeta) -> Result<Policy, String> {
        if compiled.policy() != meta.policy {
            return Err(format!(
                "the gateway metadata is for policy `{}`, the module is policy `{}`",
                meta.policy,
                compiled.policy()
            ));
        }
        Ok(Policy { compiled: Arc::new(compiled), meta, program: None, revision: None })
    }

    /// Adds the checked program the module was compiled from, for explanations; it must be the same policy.
    pub fn with_program(mut self, program: Arc<Program>) -> Result<Policy, String> {
        if program.hash != self.compiled.policy() {
            return Err(format!(
                "the sources are policy `{}`, the module is policy `{}`",
                program.hash,
                self.compiled.policy()
            ));
        }
        self.program = Some(program);
        Ok(self)
    }
}

impl Gateway {
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the policy: decisions that already started finish on the old one.
    pub fn swap_policy(&self, policy: Policy) {
        // What the new policy reads of the world comes with it (unless an operator gave the spec).
        if !self.world_given.load(Ordering::SeqCst) {
            let world = Arc::new(super::WorldSpec::from_meta(&policy.meta));
            *self.world.write().unwrap_or_else(|p| p.into_inner()) = world;
        }
        self.store.note_policy(policy.compiled.policy());
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        self.counts.reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs `f` on a pooled evaluator of `policy`; `None` when no instance can be made (the module instantiated at
    /// load time, so only when memory is exhausted): the caller then fails closed.
    fn with_evaluator<R>(&self, policy: &Arc<Policy>, f: impl FnOnce(&mut Evaluator) -> R) -> Option<R> {
        let pooled = self.evaluators.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut evaluator = match pooled {
            Some(e) if Arc::ptr_eq(e.compiled(), &policy.compiled) => e,
            _ => policy.compiled.evaluator().ok()?,
        };
        let result = f(&mut evaluator);
        let mut pool = self.evaluators.lock().unwrap_or_else(|p| p.into_inner());
        // Decisions take turns (one store transaction at a time); only listings run side by side. A few instances
        // cover that; more would only hold their fixed memories.
        if pool.len() < MAX_POOLED_EVALUATORS {
            pool.push(evaluator);
        }
        Some(result)
    }

    /// The module's decision JSON for `request` (a `runtime.trap` deny when no instance can be made).
    pub(super) fn module_decide(&self, policy: &Arc<Policy>, request: &[u8]) -> String {
        match self.with_evaluator(policy, |e| e.decide(request)) {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => Decision::deny(vec![remit_host::REASON_TRAP.to_string()], policy.compiled.policy()).to_json(),
        }
    }

    pub(super) fn module_listing(&self, policy: &Arc<Policy>, request: &[u8]) -> Vec<u8> {
        let listing = self.with_evaluator(policy, |e| e.visible_tools(request));
        listing.unwrap_or_else(|| br#"{"visible":[],"hidden":[],"error":"runtime.trap"}"#.to_vec())
    }
}
