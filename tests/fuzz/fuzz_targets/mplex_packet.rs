//! An MplexPkt body (MplexHdr and records) on its own, checked and unchecked.
#![no_main]

use concast_wire::mplex::{Packet, RecordIter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let unchecked = Packet::new_unchecked(data);
    let walked: usize = RecordIter::new(unchecked.records_bytes()).filter_map(Result::ok).map(|r| r.as_bytes().len()).sum();
    assert!(walked <= unchecked.records_bytes().len());
    if let Ok(p) = Packet::new_checked(data) {
        let covered: usize = p.records().map(|r| r.as_bytes().len()).sum();
        assert_eq!(covered, p.records_bytes().len(), "a checked packet's records cover it");
    }
});
