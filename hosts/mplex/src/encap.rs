//! A captured datagram becomes a one-record MplexPkt (docs/protocol.md sections 3.1, 3.2):
//! outer source = the datagram's own source (this host, the bundling node), destination R,
//! the Concast ID option of the flow's group, DF; the MplexHdr carries the flow's delay
//! parameters with DelayedSoFar 0, and initialTTL = outer TTL = the datagram's TTL.
//!
//! The one-record MplexPkt carries the flow's own delays; hostd then bundles it with the
//! host's other captured datagrams in its merge engine (the routers' multiplex spec), or it
//! leaves alone when the spec does not run on the host.

use concast_wire::build::MplexBuilder;
use concast_wire::ipv4::{self, Params};
use concast_wire::mplex::{HeaderRepr, RecordRepr};
use concast_wire::BuildError;

/// The delay fields a flow gives its plain datagrams (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delays {
    pub max_local_us: u32,
    pub max_total_us: u32,
}

/// Largest MplexPkt a captured datagram can become: the datagram's payload plus 28 bytes
/// of IPv4 header, 16 of MplexHdr and 9 of record header (33 more than the datagram).
pub const fn encapsulated_len(payload_len: usize) -> usize {
    concast_wire::build::CONCAST_HEADER_LEN
        + concast_wire::mplex::HEADER_LEN
        + concast_wire::mplex::RECORD_HEADER_LEN
        + payload_len
}

/// Writes the MplexPkt for `datagram` (a checked, unfragmented IPv4 datagram) into `out` and
/// returns its length. `ident` is the outer IPv4 ID.
pub fn encapsulate(
    datagram: &[u8],
    group: u32,
    delays: Delays,
    ident: u16,
    out: &mut [u8],
) -> Result<usize, BuildError> {
    let ip = ipv4::Packet::new_checked(datagram)?;
    let params = Params {
        ident,
        ..Params::new(ip.src_addr(), ip.dst_addr(), ipv4::protocol::MPLEX)
    };
    let header = HeaderRepr {
        initial_ttl: 0, // finish_bundle sets it to the record's TTL
        max_total_delay: delays.max_total_us,
        delayed_so_far: 0,
        max_local_delay: delays.max_local_us,
    };
    let mut b = MplexBuilder::new(out, &params, group, &header)?;
    b.push(&RecordRepr::from_ipv4(&ip))?;
    b.finish_bundle()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{self, C1, R};
    use concast_wire::{classify, Datagram};

    #[test]
    fn one_record_with_the_flows_delays() {
        let ack = testpkt::tcp_ack(C1, R, 61, 99);
        let mut out = [0u8; 256];
        let d = Delays {
            max_local_us: 2000,
            max_total_us: 10_000,
        };
        let n = encapsulate(&ack, 1, d, 7, &mut out).unwrap();
        assert_eq!(n, encapsulated_len(ack.len() - 20));
        let Ok(Datagram::Mplex { ip, group, mplex }) = classify(&out[..n]) else {
            panic!("not an MplexPkt")
        };
        assert_eq!(
            (ip.src_addr(), ip.dst_addr(), group, ip.ttl(), ip.ident()),
            (C1, R, 1, 61, 7)
        );
        assert!(ip.dont_frag() && ip.verify_checksum());
        let h = mplex.header_repr();
        assert_eq!(
            (
                h.initial_ttl,
                h.max_local_delay,
                h.max_total_delay,
                h.delayed_so_far
            ),
            (61, 2000, 10_000, 0)
        );
        let recs: Vec<_> = mplex.records().collect();
        assert_eq!(recs.len(), 1);
        assert_eq!(
            (recs[0].src_addr(), recs[0].ttl(), recs[0].protocol()),
            (C1, 61, 6)
        );
        assert_eq!(recs[0].payload(), &ack[20..]);
    }

    #[test]
    fn short_buffers_and_bad_input_are_refused() {
        let ack = testpkt::tcp_ack(C1, R, 64, 1);
        let d = Delays {
            max_local_us: 1,
            max_total_us: 1,
        };
        assert!(encapsulate(&ack, 1, d, 0, &mut [0u8; 60]).is_err());
        assert!(encapsulate(&ack[..10], 1, d, 0, &mut [0u8; 256]).is_err());
    }
}
