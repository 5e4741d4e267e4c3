//! The offline runner's input files (`concast-spec run --input`): JSON lines or a pcap.
#![no_main]

use concast_engine::offline::{input, pcap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if pcap::is_pcap(data) {
        let _ = pcap::read(data);
    } else {
        let _ = input::read(data);
    }
});
