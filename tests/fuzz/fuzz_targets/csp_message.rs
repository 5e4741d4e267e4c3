//! A CSP message (the IPv4 payload of protocol 253): header checks, type, body rules, and
//! the signature trailer of JOIN_ACK and SPEC_UPDATE.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The check itself lives in tests/fuzz-checks, shared with the stable smoke run.
fuzz_target!(|data: &[u8]| concast_fuzz_checks::csp_message(data));
