//! Forward Error Correction: every k data segments (a group) are followed by n-k parity
//! segments, a Reed-Solomon erasure code over the data segments' wire bytes (from the
//! `reed-solomon-erasure` crate). The receiver rebuilds up to n-k lost data segments of a
//! group from any k of its n segments, without retransmission. So that the ordering
//! microprotocols see a group in order, a data segment that follows a gap in its group waits
//! (the event is stopped and raised again later) until the gap is rebuilt or the group is
//! given up, which happens when a later group starts arriving.
use std::collections::BTreeMap;

use reed_solomon_erasure::galois_8::ReedSolomon;

use crate::attr::FEC;
use crate::composite::MicroId;
use crate::event::{Arg, Event, SegId};
use crate::segment::{Kind, Segment};
use crate::session::{Cx, Micro};

/// Tag on SEGMENT FROM NET raisings made by this microprotocol, which it lets through.
const PASSED: u64 = 0xFEC;

pub fn tag(group: u32, idx: u8, n: u8, k: u8) -> u64 {
    (group as u64) << 24 | (idx as u64) << 16 | (n as u64) << 8 | k as u64
}

fn untag(v: u64) -> (u32, u8, u8, u8) {
    ((v >> 24) as u32, (v >> 16) as u8, (v >> 8) as u8, v as u8)
}

pub struct Fec {
    n: u8,
    k: u8,
    rs: ReedSolomon,
    // sender
    tag_group: u32,
    next_idx: u8,
    shards: Vec<Vec<u8>>,
    // receiver
    rx: BTreeMap<u32, RxGroup>,
    buf: Vec<u8>,
}

#[derive(Default)]
struct RxGroup {
    shards: Vec<Option<Vec<u8>>>,
    passed: Vec<bool>,
    held: BTreeMap<u8, SegId>,
}

impl Fec {
    pub fn new(n: u8, k: u8) -> Fec {
        assert!(k >= 1 && n > k, "FEC needs n > k >= 1, got n={n} k={k}");
        Fec {
            n,
            k,
            rs: ReedSolomon::new(k as usize, (n - k) as usize).expect("valid n, k"),
            tag_group: 0,
            next_idx: 0,
            shards: Vec::new(),
            rx: BTreeMap::new(),
            buf: Vec::new(),
        }
    }

    /// Sender: a data segment's wire bytes become a length-prefixed shard; after k, parity.
    fn sent(&mut self, cx: &mut Cx, id: SegId) {
        let Some(seg) = cx.seg(id).cloned() else { return };
        let group = seg.attrs.get(FEC).map_or(0, |v| untag(v).0);
        self.buf.clear();
        cx.encode(&seg, &mut self.buf);
        let mut shard = (self.buf.len() as u16).to_be_bytes().to_vec();
        shard.extend_from_slice(&self.buf);
        self.shards.push(shard);
        if self.shards.len() < self.k as usize {
            return;
        }
        let len = self.shards.iter().map(Vec::len).max().unwrap_or(0);
        let mut all: Vec<Vec<u8>> = std::mem::take(&mut self.shards);
        all.iter_mut().for_each(|s| s.resize(len, 0));
        all.resize(self.n as usize, vec![0; len]);
        self.rs.encode(&mut all).expect("shards of equal length");
        for (j, parity) in all.into_iter().enumerate().skip(self.k as usize) {
            let mut p = Segment::new(Kind::Parity, cx.shared.conn);
            p.attrs.set(FEC, tag(group, j as u8, self.n, self.k));
            p.payload = parity.into();
            cx.send_control(p);
        }
    }

    /// Receiver: store the shard; returns false when the segment must wait.
    fn received(&mut self, cx: &mut Cx, id: SegId, v: u64) -> bool {
        let (g, idx, n, k) = untag(v);
        let Some(seg) = cx.seg(id) else { return true };
        if (n, k) != (self.n, self.k) || idx >= n || (seg.kind == Kind::Data) != (idx < k) {
            cx.stats.malformed += 1;
            cx.consume(id);
            return false;
        }
        let shard = if seg.kind == Kind::Parity {
            seg.payload.to_vec()
        } else {
            let raw = cx.raw(id).unwrap_or_default();
            let mut s = (raw.len() as u16).to_be_bytes().to_vec();
            s.extend_from_slice(raw);
            s
        };
        // a later group arriving gives up the groups before it
        let stale: Vec<u32> = self.rx.range(..g).map(|(g, _)| *g).collect();
        for old in stale {
            let grp = self.rx.remove(&old).unwrap();
            for (_, h) in grp.held {
                cx.raise(Event::SegmentFromNet, Arg { seg: Some(h), msg: 0, tag: PASSED });
            }
        }
        let grp = self.rx.entry(g).or_insert_with(|| RxGroup {
            shards: vec![None; n as usize],
            passed: vec![false; k as usize],
            held: BTreeMap::new(),
        });
        if grp.shards[idx as usize].is_some() {
            cx.stats.duplicates += 1;
            cx.consume(id);
            return false;
        }
        grp.shards[idx as usize] = Some(shard);
        let mut pass = true;
        if seg_is_data(idx, k) {
            if grp.passed[..idx as usize].iter().all(|p| *p) {
                grp.passed[idx as usize] = true;
            } else {
                grp.held.insert(idx, id);
                pass = false;
            }
        }
        self.try_rebuild(cx, g);
        pass
    }

    fn try_rebuild(&mut self, cx: &mut Cx, g: u32) {
        let k = self.k as usize;
        let Some(grp) = self.rx.get_mut(&g) else { return };
        let have = grp.shards.iter().filter(|s| s.is_some()).count();
        let missing: Vec<usize> = (0..k).filter(|i| grp.shards[*i].is_none()).collect();
        if have < k || missing.is_empty() {
            return;
        }
        let len = grp.shards.iter().flatten().map(Vec::len).max().unwrap_or(0);
        for s in grp.shards.iter_mut().flatten() {
            s.resize(len, 0);
        }
        if self.rs.reconstruct_data(&mut grp.shards).is_err() {
            return;
        }
        // hand everything after the first gap on in index order: rebuilt or waiting
        let first = *missing.first().unwrap();
        let mut order: Vec<(usize, Option<SegId>)> = Vec::new();
        for i in first..k {
            if missing.contains(&i) {
                order.push((i, None));
            } else if let Some(h) = grp.held.remove(&(i as u8)) {
                order.push((i, Some(h)));
            }
            grp.passed[i] = true;
        }
        for (i, held) in order {
            match held {
                Some(h) => cx.raise(Event::SegmentFromNet, Arg { seg: Some(h), msg: 0, tag: PASSED }),
                None => {
                    let s = grp.shards[i].as_ref().unwrap();
                    let n = u16::from_be_bytes([s[0], s[1]]) as usize;
                    match s.get(2..2 + n).map(|d| cx.inject(d, PASSED)) {
                        Some(Ok(_)) => cx.stats.fec_recovered += 1,
                        _ => cx.stats.malformed += 1,
                    }
                }
            }
        }
    }
}

fn seg_is_data(idx: u8, k: u8) -> bool {
    idx < k
}

impl Micro for Fec {
    fn id(&self) -> MicroId {
        MicroId::Fec
    }

    fn bindings(&self) -> &'static [(Event, u8)] {
        &[(Event::SegmentToNet, 30), (Event::SegmentSent, 40), (Event::SegmentFromNet, 5)]
    }

    fn handle(&mut self, ev: Event, arg: &Arg, cx: &mut Cx) {
        let Some(id) = arg.seg else { return };
        match ev {
            Event::SegmentToNet if cx.is_data(id) => {
                let t = tag(self.tag_group, self.next_idx, self.n, self.k);
                self.next_idx += 1;
                if self.next_idx == self.k {
                    self.next_idx = 0;
                    self.tag_group += 1;
                }
                if let Some(s) = cx.seg_mut(id) {
                    s.attrs.set(FEC, t);
                }
            }
            Event::SegmentSent if cx.is_data(id) && cx.first_send(id) => self.sent(cx, id),
            Event::SegmentFromNet if arg.tag != PASSED => {
                let Some(v) = cx.seg(id).and_then(|s| s.attrs.get(FEC)) else { return };
                let parity = cx.seg(id).is_some_and(|s| s.kind == Kind::Parity);
                if parity {
                    cx.consume(id);
                }
                if !self.received(cx, id, v) || parity {
                    cx.stop(); // consumed: dropped; else waiting, raised again later
                }
            }
            _ => {}
        }
    }
}
