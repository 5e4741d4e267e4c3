//! A synthetic bursty ACK trace and the share of ACKs it gets combined, through one engine
//! with the multiplex spec in virtual time. Used by `tests/multiplex_trace.rs` (asserts) and
//! by `benches/multiplex.rs` (prints the before/after figure).
//!
//! Senders behave like TCP receivers of bulk downloads: every ~RTT a window of data arrives
//! and the receiver answers with a train of ACKs a few tens of µs apart (one per segment
//! pair), then is silent until the next window. That is what made the old "close the bundle
//! on a repeat" rule bundle so little: a train's second ACK closed the bundle.

use std::net::Ipv4Addr;

use concast_engine::sdk::wire::{classify, Datagram};
use std::sync::{Arc, Mutex};

use concast_engine::{EgressGate, Engine, EngineConfig, FlowConfig, FlowId, OutputKind, Outputs, SpecRef};

#[path = "../mplex_input/mod.rs"]
pub mod mplex_input;

pub const R: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

/// One ACK: when it arrives and the sender.
pub struct Ack {
    pub at: u64,
    pub sender: u16,
}

/// `senders` senders over `duration_us`: trains of 2..=6 ACKs 20..=200 µs apart, one train
/// per 2..=20 ms per sender. Deterministic (xorshift, fixed seed).
pub fn trace(senders: u16, duration_us: u64) -> Vec<Ack> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move |lo: u64, hi: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lo + x % (hi - lo + 1)
    };
    let mut acks = Vec::new();
    for sender in 0..senders {
        let mut t = rnd(0, 20_000);
        while t < duration_us {
            let mut at = t;
            for _ in 0..rnd(2, 6) {
                acks.push(Ack { at, sender });
                at += rnd(20, 200);
            }
            t += rnd(2_000, 20_000);
        }
    }
    acks.sort_by_key(|a| (a.at, a.sender));
    acks
}

/// Sender `s`'s one-record MplexPkt (its hostd's encapsulation) of a 20-byte TCP ACK.
pub fn packet(sender: u16, seq: u32, delays: (u32, u32)) -> Vec<u8> {
    let mut tcp = [0x50u8; 20];
    tcp[..2].copy_from_slice(&40_000u16.to_be_bytes()); // one connection per sender
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    mplex_input::one_record(sender.into(), R, 1, delays, &tcp)
}

/// What one run did.
pub struct Combined {
    pub acks: u64,
    /// ACKs that left in an MplexPkt with at least one other record.
    pub combined: u64,
    pub bundles: u64,
}

impl Combined {
    pub fn percent(&self) -> f64 {
        100.0 * self.combined as f64 / self.acks.max(1) as f64
    }
    pub fn mean_bundle(&self) -> f64 {
        self.acks as f64 / self.bundles.max(1) as f64
    }
}

/// A FIFO output link of `rate_bps` that everything the node forwards crosses: when its
/// transmitter frees (what the link emulator publishes), as the engine's egress gate sees it.
pub struct Link {
    rate_bps: u64,
    free_at: u64,
}

impl Link {
    pub fn new(rate_bps: u64) -> Arc<Mutex<Link>> {
        Arc::new(Mutex::new(Link { rate_bps, free_at: 0 }))
    }

    /// A datagram of `bytes` queued at `at` (µs).
    fn send(&mut self, at: u64, bytes: usize) {
        let tx_us = (bytes as u64 * 8 * 1_000_000).div_ceil(self.rate_bps);
        self.free_at = self.free_at.max(at) + tx_us;
    }
}

struct LinkGate(Arc<Mutex<Link>>);

impl EgressGate for LinkGate {
    fn busy_until(&mut self, _flow: FlowId, now: u64) -> Option<u64> {
        let free_at = self.0.lock().unwrap().free_at;
        (free_at > now).then_some(free_at)
    }
}

/// Runs `acks` through one engine (virtual time) with MaxLocalDelay `local_us` and
/// MaxTotalDelay `total_us`, and counts records per forwarded MplexPkt.
pub fn run(spec: impl FnOnce(&mut Engine) -> SpecRef, acks: &[Ack], local_us: u32, total_us: u32) -> Combined {
    run_over(spec, acks, local_us, total_us, None, false)
}

/// [`run`] with everything forwarded crossing `link` (plus `cross` traffic: a 1500-byte
/// datagram of other flows every 1.5 ms, so the link is busy part of the time), and with
/// queue access (the engine's egress gate on that link) if `queue_access`.
pub fn run_over(
    spec: impl FnOnce(&mut Engine) -> SpecRef,
    acks: &[Ack],
    local_us: u32,
    total_us: u32,
    link: Option<Arc<Mutex<Link>>>,
    queue_access: bool,
) -> Combined {
    let mut engine = Engine::new(EngineConfig {
        node: Ipv4Addr::new(10, 0, 0, 254),
        ..EngineConfig::default()
    })
    .unwrap();
    let spec = spec(&mut engine);
    let flow = engine.add_flow(FlowConfig::new(FlowId::new(R, 1), spec), 0).unwrap();
    if let (Some(l), true) = (&link, queue_access) {
        engine.set_egress_gate(Some(Box::new(LinkGate(l.clone()))));
    }
    let mut out = Outputs::new();
    let mut seqs = std::collections::HashMap::<u16, u32>::new();
    let mut c = Combined { acks: 0, combined: 0, bundles: 0 };
    let mut cross_at = 0;
    let mut count = |out: &mut Outputs, c: &mut Combined| {
        for o in out.iter() {
            if let Some(l) = &link {
                let mut l = l.lock().unwrap();
                while cross_at <= o.at_us {
                    l.send(cross_at, 1_500);
                    cross_at += 1_500;
                }
                l.send(o.at_us, o.datagram.len());
            }
            assert_eq!(o.kind, OutputKind::Merged, "every ACK is bundled");
            let Ok(Datagram::Mplex { mplex, .. }) = classify(o.datagram) else {
                panic!("not an MplexPkt")
            };
            let n = mplex.records().count() as u64;
            c.acks += n;
            c.bundles += 1;
            if n > 1 {
                c.combined += n;
            }
        }
        out.clear();
    };
    for a in acks {
        let seq = seqs.entry(a.sender).or_insert(0);
        *seq += 1;
        engine.advance_until(a.at, &mut out);
        engine
            .ingest(flow, &[packet(a.sender, *seq, (total_us, local_us))], a.at, &mut out)
            .unwrap();
        count(&mut out, &mut c);
    }
    engine.advance_until(u64::MAX / 2, &mut out);
    count(&mut out, &mut c);
    assert!(engine.stats(flow).unwrap().quarantine.is_none());
    assert_eq!(c.acks, acks.len() as u64, "every ACK left exactly once");
    c
}
