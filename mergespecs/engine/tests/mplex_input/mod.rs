//! What senders' hosts send toward a multiplexing receiver: one-record MplexPkts. Shared by
//! `tests/abi_v2.rs`, `tests/bursty` and `benches/multiplex.rs`.

use std::net::Ipv4Addr;

use concast_engine::sdk::wire::build::MplexBuilder;
use concast_engine::sdk::wire::ipv4::Params;
use concast_engine::sdk::wire::mplex::{HeaderRepr, RecordRepr};

/// Sender `sender`'s (10.x.y.1) MplexPkt to `receiver`, group `group`, carrying one TCP
/// record with `payload`: IPv4 + Concast ID option + MplexPkt header + the record.
pub fn one_record(
    sender: usize,
    receiver: Ipv4Addr,
    group: u32,
    delays: (u32, u32),
    payload: &[u8],
) -> Vec<u8> {
    let src = Ipv4Addr::new(10, 1 + (sender >> 8) as u8, sender as u8, 1);
    let header = HeaderRepr {
        initial_ttl: 64,
        max_total_delay: delays.0,
        delayed_so_far: 0,
        max_local_delay: delays.1,
    };
    let mut buf = vec![0u8; 128 + payload.len()];
    let params = Params::new(src, receiver, 254);
    let mut b = MplexBuilder::new(&mut buf, &params, group, &header).unwrap();
    b.push(&RecordRepr {
        src,
        ttl: 64,
        protocol: 6,
        tos: 0,
        payload,
    })
    .unwrap();
    let n = b.finish_bundle().unwrap();
    buf.truncate(n);
    buf
}
