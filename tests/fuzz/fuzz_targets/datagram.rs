//! A whole IPv4 datagram as a router's CPU port hands it over: the options walk, the kind,
//! and for CSP and MplexPkt their bodies. Whatever the bytes, classification never panics and
//! a datagram it accepts holds together.
#![no_main]

use concast_wire::{classify, Datagram};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(d) = classify(data) else { return };
    match d {
        Datagram::Csp { message, .. } => {
            let _ = message.msg_type();
        }
        Datagram::Mplex { mplex, .. } => {
            // A checked MplexPkt's records cover its record bytes exactly.
            let covered: usize = mplex.records().map(|r| r.as_bytes().len()).sum();
            assert_eq!(covered, mplex.records_bytes().len());
        }
        Datagram::Concast { ip, .. } | Datagram::Ipv4(ip) => {
            assert!(usize::from(ip.total_len()) <= data.len());
        }
    }
});
