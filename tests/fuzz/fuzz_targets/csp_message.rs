//! A CSP message (the IPv4 payload of protocol 253): header checks, type, body rules.
#![no_main]

use concast_wire::csp::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        // Accepted: the length field said exactly how long it is.
        assert_eq!(usize::from(m.header.length()), data.len());
    }
});
