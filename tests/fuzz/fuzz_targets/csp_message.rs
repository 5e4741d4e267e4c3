//! A CSP message (the IPv4 payload of protocol 253): header checks, type, body rules, and
//! the signature trailer of JOIN_ACK and SPEC_UPDATE.
#![no_main]

use concast_wire::csp::{Message, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        // Accepted: the length field said exactly how long it is.
        assert_eq!(usize::from(m.header.length()), data.len());
        // What was read (signature trailer included) is written back to an equal message.
        let repr = Repr::parse(&m);
        let mut out = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut out).expect("a parsed message can be emitted");
        assert_eq!(Repr::parse(&Message::parse(&out[..n]).expect("emitted parses")), repr);
    }
});
