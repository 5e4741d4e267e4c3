//! concast-routerd as a library: the daemon's parts, so tests can drive a [`Router`] in
//! process with a real merge engine and real CSP, and the binary stays a thin shell.

pub mod adaptive;
pub mod busypoll;
pub mod config;
pub mod counters;
pub mod cpu_port;
pub mod daemon;
pub mod dataplane;
pub mod diversion;
pub mod egress;
pub mod framequeue;
pub mod linkgate;
pub mod linkstate;
/// The shared logger, re-exported so `concast_routerd::log` keeps working.
pub use concast_daemon::log;
pub mod mgmt;
pub mod router;
pub mod rx_ring;
pub mod tc;

pub use router::{Router, Sink};
