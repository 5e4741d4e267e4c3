//! The `multiplex` spec's bundle size follows the flow's path MTU in the engine, as Wasm and
//! natively: past 4096 bytes on a jumbo path (the buffers live in the spec's arena, not on its
//! 64 KiB stack), never past a small path's MTU.

mod bundled;

use bundled::*;
use concast_engine::sdk::wire::{classify, Datagram};
use concast_engine::OutputKind;
use concast_spec_multiplex::Multiplex;
use concast_speckit::test_host::make::{self, host};

/// One pure ACK (a 48-byte concast datagram) from each of `senders` hosts in one batch,
/// held up to 1 s; returns the merged datagrams' lengths and the records they carry.
fn bundle_sizes(mtu: u32, senders: u8) -> (Vec<usize>, usize) {
    let setup = Setup::params("max_local_delay_us=1000000,max_total_delay_us=2000000").mtu(mtu);
    let run = both::<Multiplex>("multiplex", &setup, |run| {
        let batch: Vec<Vec<u8>> = (1..=senders)
            .map(|n| make::concast(host(n), 6, 64, &[0x50; 20]))
            .collect();
        run.at(0, &batch);
        run.until(3_000_000);
    });
    let mut records = 0;
    let sizes = run
        .of_kind(OutputKind::Merged)
        .into_iter()
        .map(|(_, d)| {
            check_merged_header(&d, mtu);
            let Ok(Datagram::Mplex { mplex, .. }) = classify(&d) else {
                panic!("not an MplexPkt")
            };
            records += mplex.records().count();
            d.len()
        })
        .collect();
    (sizes, records)
}

#[test]
fn a_9000_byte_path_gets_one_bundle_past_4096_bytes() {
    let (sizes, records) = bundle_sizes(9000, 250);
    assert_eq!(records, 250);
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert!(sizes[0] > 4096, "{sizes:?}");
}

#[test]
fn a_576_byte_path_keeps_bundles_within_576() {
    let (sizes, records) = bundle_sizes(576, 100);
    assert_eq!(records, 100);
    assert!(
        sizes.len() > 1 && sizes.iter().all(|&s| s <= 576),
        "{sizes:?}"
    );
}

#[test]
fn linear_memory_per_flow_grows_with_the_path_mtu_not_past_it() {
    let memory = |mtu: u32| {
        let setup = Setup::params("").mtu(mtu);
        let run = both::<Multiplex>("multiplex", &setup, |run| {
            run.at(0, &[make::concast(host(1), 6, 64, &[0x50; 20])])
        });
        run.stats().memory_bytes
    };
    let (m1500, m9000, m65535) = (memory(1500), memory(9000), memory(65_535));
    println!(
        "multiplex flow, 16 bundles: {m1500} B at MTU 1500, {m9000} B at 9000, {m65535} B at 65535"
    );
    assert!(m1500 <= 640 << 10, "{m1500}");
    assert!(m1500 < m9000 && m9000 < m65535);
    assert!(m65535 <= 8 << 20, "{m65535}");
}
