//! A merge-spec module as CSP delivers it: the params section reader and the engine's loader
//! (Wasm validation, the ABI's export and import checks, compilation). A module it accepts
//! must also start a flow or be refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The check itself lives in tests/fuzz-checks, shared with the stable smoke run.
fuzz_target!(|data: &[u8]| concast_fuzz_checks::spec_module(data));
