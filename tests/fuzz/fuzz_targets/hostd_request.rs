//! One line an application writes to hostd's API socket.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The check itself lives in tests/fuzz-checks, shared with the stable smoke run.
fuzz_target!(|data: &[u8]| concast_fuzz_checks::hostd_request(data));
