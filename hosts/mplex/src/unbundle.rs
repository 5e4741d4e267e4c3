//! At the receiver: an MplexPkt's records become the original datagrams again
//! (docs/protocol.md section 3.3).
//!
//! `hops = initialTTL - outer TTL` (0 if a node raised the outer TTL); each record's
//! `TTL' = TTL - hops`, and a record with `TTL' <= 0` is dropped and counted: on a plain
//! path it would have expired. The rest are rebuilt with IHL 5, the record's TOS byte, a
//! fresh ID, DF and a computed header checksum; the payload is copied unchanged, so its TCP checksum (over
//! the same source, destination, protocol and length) still verifies.

use concast_wire::ipv4::{self, Params};
use concast_wire::mplex;

/// Hands out IPv4 IDs for rebuilt datagrams. The originals' IDs are not carried; with DF
/// set the ID only needs to differ between datagrams in flight, so a counter does.
#[derive(Debug, Default, Clone)]
pub struct IdGen(u16);

impl IdGen {
    pub fn new(seed: u16) -> IdGen {
        IdGen(seed)
    }

    pub fn next_id(&mut self) -> u16 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

/// What one MplexPkt gave.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub records: u32,
    pub delivered: u32,
    pub expired: u32,
}

/// Section 3.3's TTL of a record after `hops` hops of its MplexPkt.
pub fn hops_travelled(initial_ttl: u8, outer_ttl: u8) -> u8 {
    initial_ttl.saturating_sub(outer_ttl)
}

/// Rebuilds every live record of a checked MplexPkt and hands each datagram to `deliver`.
/// `deliver` returning false counts the datagram as not delivered (an injection failure).
pub fn unbundle<T: AsRef<[u8]>>(
    ip: &ipv4::Packet<T>,
    body: &mplex::Packet<T>,
    ids: &mut IdGen,
    scratch: &mut [u8],
    mut deliver: impl FnMut(&[u8]) -> bool,
) -> Outcome {
    let hops = hops_travelled(body.initial_ttl(), ip.ttl());
    let mut out = Outcome::default();
    for rec in body.records() {
        out.records += 1;
        let Some(ttl) = rec.ttl_after(hops) else {
            out.expired += 1;
            continue;
        };
        let params = Params {
            ttl,
            tos: rec.tos(),
            ident: ids.next_id(),
            ..Params::new(rec.src_addr(), ip.dst_addr(), rec.protocol())
        };
        // The MplexPkt fit in 64 KiB, so each record's datagram (20 + payload) does too.
        match ipv4::build(scratch, &params, &[], rec.payload()) {
            Ok(n) if deliver(&scratch[..n]) => out.delivered += 1,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::transport_checksum_ok;
    use crate::encap::{encapsulate, Delays};
    use crate::testpkt::{self, C1, C2, R};
    use concast_wire::build::MplexBuilder;
    use concast_wire::mplex::{HeaderRepr, RecordRepr};
    use concast_wire::{classify, Datagram};

    const D: Delays = Delays {
        max_local_us: 2000,
        max_total_us: 10_000,
    };

    fn run(mplex_pkt: &[u8]) -> (Outcome, Vec<Vec<u8>>) {
        let Ok(Datagram::Mplex { ip, mplex, .. }) = classify(mplex_pkt) else {
            panic!("not an MplexPkt")
        };
        let mut got = Vec::new();
        let mut scratch = vec![0u8; 65536];
        let o = unbundle(&ip, &mplex, &mut IdGen::new(0), &mut scratch, |d| {
            got.push(d.to_vec());
            true
        });
        (o, got)
    }

    /// A router's bundle: records as given, outer TTL = initialTTL - `hops`.
    fn bundle(records: &[&[u8]], hops: u8) -> Vec<u8> {
        let mut buf = vec![0u8; 2048];
        let node = std::net::Ipv4Addr::new(10, 0, 0, 1);
        let mut b = MplexBuilder::new(
            &mut buf,
            &Params::new(node, R, 254),
            1,
            &HeaderRepr::default(),
        )
        .unwrap();
        let ips: Vec<_> = records
            .iter()
            .map(|r| ipv4::Packet::new_checked(*r).unwrap())
            .collect();
        for ip in &ips {
            b.push(&RecordRepr::from_ipv4(ip)).unwrap();
        }
        let n = b.finish_bundle().unwrap();
        buf.truncate(n);
        let mut p = ipv4::Packet::new_unchecked(&mut buf[..]);
        let ttl = p.ttl() - hops;
        p.update_ttl(ttl);
        buf
    }

    #[test]
    fn encapsulate_then_unbundle_gives_the_datagram_back() {
        let mut ack = testpkt::tcp_ack(C1, R, 64, 12345);
        ack[1] = 0xB8 | 0b11; // DSCP EF, ECN CE: the TOS byte must come back as it was
        let mut out = [0u8; 256];
        let n = encapsulate(&ack, 1, D, 1, &mut out).unwrap();
        // Two hops on the way: the rebuilt datagram has the TTL a plain path would give it.
        let mut p = ipv4::Packet::new_unchecked(&mut out[..n]);
        p.update_ttl(62);
        let (o, got) = run(&out[..n]);
        assert_eq!(
            o,
            Outcome {
                records: 1,
                delivered: 1,
                expired: 0
            }
        );
        let ip = ipv4::Packet::new_checked(&got[0][..]).unwrap();
        assert_eq!(
            (ip.src_addr(), ip.dst_addr(), ip.ttl(), ip.protocol()),
            (C1, R, 62, 6)
        );
        assert_eq!(
            (ip.header_len(), ip.tos(), ip.dont_frag(), ip.more_frags()),
            (20, 0xBB, true, false)
        );
        assert!(ip.verify_checksum());
        assert_eq!(
            ip.payload(),
            &ack[20..],
            "the TCP segment is copied unchanged"
        );
        assert!(transport_checksum_ok(C1, R, 6, ip.payload()));
        // Everything but ID, TTL and checksum is the original header.
        let mut orig = ack.clone();
        orig[4..6].copy_from_slice(&got[0][4..6]);
        orig[8] = 62;
        orig[6] |= 0x40;
        orig[10..12].copy_from_slice(&[0, 0]);
        let mut mine = got[0].clone();
        mine[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(orig, mine);
    }

    #[test]
    fn ttl_rule_drops_and_counts_records_that_would_have_expired() {
        let old = testpkt::tcp_ack(C1, R, 3, 1); // bundled with TTL 3 left
        let young = testpkt::tcp_ack(C2, R, 64, 2);
        let (o, got) = run(&bundle(&[&old, &young], 3));
        assert_eq!(
            o,
            Outcome {
                records: 2,
                delivered: 1,
                expired: 1
            }
        );
        let ip = ipv4::Packet::new_checked(&got[0][..]).unwrap();
        assert_eq!((ip.src_addr(), ip.ttl()), (C2, 61));
        // One hop fewer and both live: TTL' = 1 is still alive.
        let (o, got) = run(&bundle(&[&old, &young], 2));
        assert_eq!((o.delivered, o.expired), (2, 0));
        assert_eq!(got[0][8], 1);
    }

    #[test]
    fn a_raised_outer_ttl_ages_nothing() {
        let ack = testpkt::tcp_ack(C1, R, 10, 1);
        let mut pkt = bundle(&[&ack], 0);
        let mut p = ipv4::Packet::new_unchecked(&mut pkt[..]);
        p.update_ttl(200);
        let (o, got) = run(&pkt);
        assert_eq!(o.delivered, 1);
        assert_eq!(got[0][8], 10);
        assert_eq!(hops_travelled(64, 200), 0);
    }

    #[test]
    fn records_keep_their_order_and_get_fresh_ids() {
        let a = testpkt::tcp_ack(C1, R, 64, 1);
        let b = testpkt::tcp_ack(C2, R, 64, 2);
        let c = testpkt::udp(C1, R, b"hello");
        let (o, got) = run(&bundle(&[&a, &b, &c], 1));
        assert_eq!(o.delivered, 3);
        let srcs: Vec<_> = got
            .iter()
            .map(|d| ipv4::Packet::new_checked(&d[..]).unwrap().src_addr())
            .collect();
        assert_eq!(srcs, vec![C1, C2, C1]);
        let ids: Vec<_> = got
            .iter()
            .map(|d| u16::from_be_bytes([d[4], d[5]]))
            .collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert!(transport_checksum_ok(C1, R, 17, &got[2][20..]));
    }

    #[test]
    fn failed_injections_are_not_counted_as_delivered() {
        let a = testpkt::tcp_ack(C1, R, 64, 1);
        let pkt = bundle(&[&a], 1);
        let Ok(Datagram::Mplex { ip, mplex, .. }) = classify(&pkt) else {
            panic!()
        };
        let o = unbundle(&ip, &mplex, &mut IdGen::new(0), &mut [0u8; 2048], |_| false);
        assert_eq!(
            o,
            Outcome {
                records: 1,
                delivered: 0,
                expired: 0
            }
        );
    }
}
