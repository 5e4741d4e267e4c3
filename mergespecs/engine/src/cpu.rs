//! The CPU budget of one call into a spec.
//!
//! With epochs, a background thread ticks the wasmtime epoch (`epoch.rs`); each call gets a
//! deadline of one tick. Reaching it does not trap at once: a wall-clock deadline would also
//! stop a harmless call whose thread was merely preempted (two cores shared with compilers
//! do that for milliseconds). Instead the callback samples the thread's own CPU time and
//! traps once the call has used its CPU budget since the first sample. Calls that finish
//! within a tick (all normal ones) never reach the callback, so this costs nothing on the
//! fast path. Fuel, the alternative, is deterministic but slows every basic block.

use std::time::Duration;

use wasmtime::{Store, UpdateDeadline};

use crate::config::{CpuLimit, INIT_BUDGET_FACTOR, INIT_MIN_BUDGET};
use crate::fault::Fault;
use crate::host::FlowCtx;

/// CPU time this thread has used.
pub(crate) fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is valid on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Sets up a new store for `cpu`.
pub(crate) fn install(store: &mut Store<FlowCtx>, cpu: CpuLimit) {
    if let CpuLimit::Epoch { .. } = cpu {
        store.epoch_deadline_callback(move |mut cx| {
            let step = run_step(&cx);
            let clock = &mut cx.data_mut().clock;
            let now = thread_cpu_time();
            match clock.mark {
                Some((call, at, since)) if call == clock.calls && at == step => {
                    if now.saturating_sub(since) >= clock.budget {
                        return Err(Fault::CpuLimit(cpu.describe()).into());
                    }
                }
                _ => clock.mark = Some((clock.calls, step, now)),
            }
            Ok(UpdateDeadline::Continue(1))
        });
    }
}

/// The entry a `concast_run` is working on (0 outside runs): a run gets the per-call budget
/// for each datagram, never more for one of them.
fn run_step(cx: &wasmtime::StoreContextMut<'_, FlowCtx>) -> u32 {
    let (Some(area), Some(memory)) = (cx.data().clock.run_area, cx.data().memory) else {
        return 0;
    };
    let mem = memory.data(cx);
    mem.get(area..area + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// Gives a `concast_run` over `steps` datagrams its budget: per datagram with epochs (see
/// [`run_step`]), `steps` times the fuel with fuel.
#[inline]
pub(crate) fn arm_run(store: &mut Store<FlowCtx>, cpu: CpuLimit, steps: u32) {
    match cpu {
        CpuLimit::Epoch { .. } => arm(store, cpu),
        CpuLimit::Fuel(fuel) => store
            .set_fuel(fuel.saturating_mul(u64::from(steps.max(1))))
            .expect("fuel is enabled with CpuLimit::Fuel"),
    }
}

/// Gives the next call its budget.
#[inline]
pub(crate) fn arm(store: &mut Store<FlowCtx>, cpu: CpuLimit) {
    arm_scaled(store, cpu, 1);
}

/// Gives `concast_init` its larger budget (see [`INIT_BUDGET_FACTOR`]).
pub(crate) fn arm_init(store: &mut Store<FlowCtx>, cpu: CpuLimit) {
    arm_scaled(store, cpu, INIT_BUDGET_FACTOR);
}

#[inline]
fn arm_scaled(store: &mut Store<FlowCtx>, cpu: CpuLimit, factor: u32) {
    match cpu {
        CpuLimit::Epoch { budget, .. } => {
            let clock = &mut store.data_mut().clock;
            if let Some(a) = &clock.activity {
                a.note_call();
            }
            clock.calls += 1;
            clock.budget = if factor == 1 {
                budget
            } else {
                (budget * factor).max(INIT_MIN_BUDGET)
            };
            store.set_epoch_deadline(1);
        }
        CpuLimit::Fuel(fuel) => store
            .set_fuel(fuel.saturating_mul(u64::from(factor)))
            .expect("fuel is enabled with CpuLimit::Fuel"),
    }
}
