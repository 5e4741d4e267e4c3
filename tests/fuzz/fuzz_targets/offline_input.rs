//! The offline runner's input files (`concast-spec run --input`): JSON lines or a pcap.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The check itself lives in tests/fuzz-checks, shared with the stable smoke run.
fuzz_target!(|data: &[u8]| concast_fuzz_checks::offline_input(data));
