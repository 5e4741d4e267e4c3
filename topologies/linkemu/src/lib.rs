//! concast-linkemu: one process emulates every link of a Mininet network (delay, random loss,
//! rate, drop-tail queue) between pairs of TAP devices, because this kernel has no netem.
//! The library holds the parts that need no sockets: the per-direction link model in virtual
//! time, its parameters, the seeded RNG, the queueing-delay histogram and the shared-memory
//! state file that routerd reads (layout in docs/linkemu.md), and the books of what its drops
//! carried.

pub mod hist;
pub mod kind;
pub mod model;
pub mod params;
pub mod rng;
pub mod state;
