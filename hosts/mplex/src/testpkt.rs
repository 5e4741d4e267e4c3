//! Datagrams for the unit tests, built with the wire crate and correct checksums.

use std::net::Ipv4Addr;

use concast_wire::ipv4::{self, Params};

pub const C1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
pub const C2: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 2);
pub const R: Ipv4Addr = Ipv4Addr::new(10, 2, 1, 2);

/// A TCP segment 40000 -> 8000 with `flags`, a 12-byte timestamp option and `data`.
pub fn tcp(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, ack: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut seg = vec![0u8; 32];
    seg[0..2].copy_from_slice(&40000u16.to_be_bytes());
    seg[2..4].copy_from_slice(&8000u16.to_be_bytes());
    seg[4..8].copy_from_slice(&7u32.to_be_bytes());
    seg[8..12].copy_from_slice(&ack.to_be_bytes());
    seg[12] = 8 << 4; // 32-byte header
    seg[13] = flags;
    seg[14..16].copy_from_slice(&502u16.to_be_bytes());
    seg[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    seg.extend_from_slice(data);
    let c = crate::checksum::transport_checksum(src, dst, 6, &seg).unwrap();
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    let params = Params {
        ttl,
        ident: 0x4242,
        ..Params::new(src, dst, 6)
    };
    let mut buf = vec![0u8; 20 + seg.len()];
    let n = ipv4::build(&mut buf, &params, &[], &seg).unwrap();
    buf.truncate(n);
    buf
}

/// A pure ACK (52 bytes, as Linux sends with timestamps).
pub fn tcp_ack(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, ack: u32) -> Vec<u8> {
    tcp(src, dst, ttl, ack, 0x10, &[])
}

pub fn udp(src: Ipv4Addr, dst: Ipv4Addr, data: &[u8]) -> Vec<u8> {
    let mut seg = vec![0u8; 8];
    seg[0..2].copy_from_slice(&4000u16.to_be_bytes());
    seg[2..4].copy_from_slice(&5000u16.to_be_bytes());
    seg[4..6].copy_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    seg.extend_from_slice(data);
    let c = crate::checksum::transport_checksum(src, dst, 17, &seg).unwrap();
    seg[6..8].copy_from_slice(&c.to_be_bytes());
    let mut buf = vec![0u8; 20 + seg.len()];
    let n = ipv4::build(&mut buf, &Params::new(src, dst, 17), &[], &seg).unwrap();
    buf.truncate(n);
    buf
}
