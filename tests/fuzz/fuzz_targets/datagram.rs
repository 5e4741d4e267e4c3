//! A whole IPv4 datagram as a router's CPU port hands it over: the options walk, the kind,
//! and for CSP and MplexPkt their bodies. Whatever the bytes, classification never panics and
//! a datagram it accepts holds together.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The check itself lives in tests/fuzz-checks, shared with the stable smoke run.
fuzz_target!(|data: &[u8]| concast_fuzz_checks::datagram(data));
