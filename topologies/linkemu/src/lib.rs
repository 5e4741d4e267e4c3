//! concast-linkemu: one process emulates every link of a Mininet network (delay, random loss,
//! rate, drop-tail queue) between pairs of TAP devices, because this kernel has no netem.
//! The library holds the parts that need no sockets: the per-direction link model in virtual
//! time, its parameters, the event loop's policy of which TAP to read when (`pump`) and of how
//! it waits when none holds frames (`idle`), what a batch of io_uring completions means and how
//! many reads to queue (`iobatch`), the seeded RNG, the queueing-delay histogram, and the books
//! of what its drops carried. The shared-memory state file it writes for routerd is
//! defined in `concast_daemon::linkstate` (layout in docs/linkemu.md), which both crates use.

pub mod hist;
pub mod idle;
pub mod iobatch;
pub mod kind;
pub mod model;
pub mod params;
pub mod pump;
pub mod rng;
