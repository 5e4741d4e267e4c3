//! A [`Host`] for native unit tests of specs: a settable clock and flow info, a pending
//! queue, and a record of what the spec emitted, logged and armed. It does not enforce the
//! engine's call rules; the engine's own tests run the specs for that.

use std::string::String;
use std::vec::Vec;

use concast_sdk::{Host, Level, OutHeader};

#[derive(Debug, Clone)]
pub struct TestHost {
    pub now: u64,
    pub receiver: u32,
    pub group: u32,
    pub node: u32,
    pub mtu: u32,
    pub children: u32,
    pub params: Vec<u8>,
    /// The timer as last armed (`None` after `cancel_timer`).
    pub timer: Option<u64>,
    /// What `egress_free_at` answers (0: output link idle).
    pub egress_free_at: u64,
    /// Datagrams not yet processed, next first.
    pub pending: Vec<Vec<u8>>,
    /// Datagrams the spec took from `pending`.
    pub taken: Vec<Vec<u8>>,
    pub emitted: Vec<(Vec<u8>, OutHeader)>,
    pub logs: Vec<(Level, String)>,
}

impl TestHost {
    /// Flow (10.0.0.9, 1) at node 10.0.0.254, MTU 1500, no children, time 0.
    pub fn new(params: &str) -> TestHost {
        TestHost {
            now: 0,
            receiver: u32::from_be_bytes([10, 0, 0, 9]),
            group: 1,
            node: u32::from_be_bytes([10, 0, 0, 254]),
            mtu: 1500,
            children: 0,
            params: params.as_bytes().to_vec(),
            timer: None,
            egress_free_at: 0,
            pending: Vec::new(),
            taken: Vec::new(),
            emitted: Vec::new(),
            logs: Vec::new(),
        }
    }
}

impl Host for TestHost {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn receiver(&self) -> u32 {
        self.receiver
    }
    fn group(&self) -> u32 {
        self.group
    }
    fn node(&self) -> u32 {
        self.node
    }
    fn path_mtu(&self) -> u32 {
        self.mtu
    }
    fn children(&self) -> u32 {
        self.children
    }
    fn params(&self) -> &[u8] {
        &self.params
    }
    fn set_timer(&mut self, at_us: u64) {
        self.timer = Some(at_us);
    }
    fn cancel_timer(&mut self) {
        self.timer = None;
    }
    fn egress_free_at(&self) -> u64 {
        self.egress_free_at
    }
    fn pending_count(&self) -> usize {
        self.pending.len()
    }
    fn pending_peek(&self, index: usize, buf: &mut [u8]) -> Option<usize> {
        let d = self.pending.get(index)?;
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        Some(d.len())
    }
    fn pending_take(&mut self, index: usize, buf: &mut [u8]) -> Option<usize> {
        if self.pending.get(index)?.len() > buf.len() {
            return None;
        }
        let d = self.pending.remove(index);
        buf[..d.len()].copy_from_slice(&d);
        self.taken.push(d.clone());
        Some(d.len())
    }
    fn emit(&mut self, payload: &[u8], header: OutHeader) {
        self.emitted.push((payload.to_vec(), header));
    }
    fn log(&mut self, level: Level, msg: &str) {
        self.logs.push((level, msg.into()));
    }
}

/// Builders for test datagrams toward the [`TestHost`] flow's receiver (10.0.0.9).
pub mod make {
    use std::net::Ipv4Addr;
    use std::vec::Vec;

    use concast_sdk::wire::build::{self, MplexBuilder};
    use concast_sdk::wire::ipv4::Params;
    use concast_sdk::wire::mplex::{HeaderRepr, RecordRepr};

    pub const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

    /// 10.0.1.`n`: a sender.
    pub fn host(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 1, n)
    }

    /// A concast datagram (options `9E 06 G 00 00`) from `src` to R, group 1.
    pub fn concast(src: Ipv4Addr, protocol: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
        let mut buf = std::vec![0u8; 28 + payload.len()];
        let params = Params {
            ttl,
            ..Params::new(src, R, protocol)
        };
        let n = build::concast(&mut buf, &params, 1, payload).expect("fits");
        buf.truncate(n);
        buf
    }

    /// Any IPv4 datagram: `params` as given, `options` (padded with EOL) and `payload`.
    pub fn ipv4(params: &Params, options: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut buf = std::vec![0u8; 60 + payload.len()];
        let n = concast_sdk::wire::ipv4::build(&mut buf, params, options, payload).expect("valid");
        buf.truncate(n);
        buf
    }

    /// A UDP payload: 8-byte header (checksum 0) and `body`.
    pub fn udp(src_port: u16, dst_port: u16, body: &[u8]) -> Vec<u8> {
        let mut out = std::vec![0u8; 8];
        crate::udp::write_header(&mut out, src_port, dst_port, body.len());
        out.extend_from_slice(body);
        out
    }

    /// An MplexPkt from `src` (a host or router) with outer TTL `ttl`, the MplexHdr `header`
    /// as given and `records` (src, ttl, protocol, payload).
    pub fn mplex(
        src: Ipv4Addr,
        ttl: u8,
        header: HeaderRepr,
        records: &[(Ipv4Addr, u8, u8, &[u8])],
    ) -> Vec<u8> {
        let mut buf = std::vec![0u8; 65_535];
        let params = Params {
            ttl,
            ..Params::new(src, R, 254)
        };
        let mut b = MplexBuilder::new(&mut buf, &params, 1, &header).expect("fits");
        for &(src, ttl, protocol, payload) in records {
            b.push(&RecordRepr {
                src,
                ttl,
                protocol,
                tos: 0,
                payload,
            })
            .expect("fits");
        }
        let n = b.finish().expect("has records");
        buf.truncate(n);
        buf
    }

    /// A one-record MplexPkt as a sender's hostd sends it: outer TTL = initialTTL = `ttl`.
    pub fn one_record(src: Ipv4Addr, ttl: u8, delays: (u32, u32, u32), payload: &[u8]) -> Vec<u8> {
        let header = HeaderRepr {
            initial_ttl: ttl,
            max_total_delay: delays.0,
            delayed_so_far: delays.1,
            max_local_delay: delays.2,
        };
        mplex(src, ttl, header, &[(src, ttl, 6, payload)])
    }
}
