//! One line an application writes to hostd's API socket.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let _ = concast_hostd::api::parse(line, std::net::Ipv4Addr::new(10, 0, 0, 1));
});
