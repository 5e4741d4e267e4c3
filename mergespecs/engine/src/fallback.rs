//! A bounded pool's overflow (`Allocator::Bounded`): a flow that finds every pool slot taken
//! gets an on-demand sandbox from a second wasmtime engine with the same code generation
//! (same memory reservation, same CPU limit), and is counted. A spec is compiled for that
//! engine the first time one of its flows overflows.

use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::{Linker, PoolConcurrencyLimitError};

use crate::host::FlowCtx;

pub(crate) struct Fallback {
    pub engine: wasmtime::Engine,
    pub linker: Linker<FlowCtx>,
    /// Sandboxes made here because the pool was full.
    used: AtomicU64,
}

impl Fallback {
    pub fn new(engine: wasmtime::Engine) -> wasmtime::Result<Fallback> {
        let linker = crate::linker::concast_linker(&engine)?;
        Ok(Fallback { engine, linker, used: AtomicU64::new(0) })
    }

    pub fn count(&self) {
        self.used.fetch_add(1, Ordering::Relaxed);
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// Whether instantiation failed only because the pool had no free slot.
pub(crate) fn pool_full(e: &wasmtime::Error) -> bool {
    e.chain().any(|c| c.is::<PoolConcurrencyLimitError>())
}
