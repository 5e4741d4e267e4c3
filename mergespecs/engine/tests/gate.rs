//! The egress gate (docs/multiplex.md "Queue access") with a fake gate: a finished state
//! whose spec gave a hold limit waits while the gate reports its link busy, keeps merging,
//! and leaves when the link frees or the limit comes, whichever is first. Specs that give no
//! hold limit are never held, and the gate is asked once per `done` or `timeout` call.

mod bundled;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bundled::*;
use concast_engine::sdk::wire::mplex::HeaderRepr;
use concast_engine::sdk::wire::{classify, Datagram};
use concast_engine::{EgressGate, FlowId, OutputKind};
use concast_spec_multiplex::Multiplex;
use concast_speckit::test_host::make::{self, host};

/// Busy until `until` (engine µs) for every flow; counts the questions.
struct FakeGate {
    until: u64,
    asked: Arc<AtomicU64>,
}

impl EgressGate for FakeGate {
    fn busy_until(&mut self, flow: FlowId, now: u64) -> Option<u64> {
        assert_eq!((flow.receiver, flow.group), (R, G));
        self.asked.fetch_add(1, Ordering::Relaxed);
        (self.until > now).then_some(self.until)
    }
}

fn gate(run: &mut Run, until: u64) -> Arc<AtomicU64> {
    let asked = Arc::new(AtomicU64::new(0));
    run.engine.set_egress_gate(Some(Box::new(FakeGate { until, asked: asked.clone() })));
    asked
}

/// Sender `n`'s one-record MplexPkt with MaxLocalDelay 0 and `total` µs of budget; `tag`
/// marks its TCP header (another value = another ACK of the same connection).
fn ack(n: u8, total: u32, tag: u8) -> Vec<u8> {
    let mut tcp = vec![0x50; 20];
    tcp[4] = tag;
    let header = HeaderRepr { initial_ttl: 64, max_total_delay: total, delayed_so_far: 0, max_local_delay: 0 };
    make::mplex(host(n), 64, header, &[(host(n), 64, 6, &tcp)])
}

/// (time, records as (sender's last octet, tag), DelayedSoFar) of each MplexPkt out.
fn out(run: &Run) -> Vec<(u64, Vec<(u8, u8)>, u32)> {
    run.of_kind(OutputKind::Merged)
        .into_iter()
        .map(|(at, d)| {
            let Ok(Datagram::Mplex { mplex, .. }) = classify(&d) else { panic!("not an MplexPkt") };
            let recs = mplex.records().map(|r| (r.src_addr().octets()[3], r.payload()[4])).collect();
            (at, recs, mplex.delayed_so_far())
        })
        .collect()
}

#[test]
fn a_finished_bundle_waits_for_the_busy_link_and_keeps_merging() {
    let asked = Arc::new(AtomicU64::new(0));
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        let a = gate(run, 5_000);
        run.at(1_000, &[ack(1, 20_000, 0)]);
        run.at(2_000, &[ack(2, 20_000, 0), ack(1, 20_000, 1)]); // 1 again: the next bundle
        run.at(3_000, &[ack(3, 20_000, 0)]);
        run.until(4_999);
        assert!(run.of_kind(OutputKind::Merged).is_empty());
        run.until(100_000);
        asked.store(a.load(Ordering::Relaxed), Ordering::Relaxed);
    });
    // Two bundles, both held to T = 5 ms, leaving in opening order.
    assert_eq!(
        out(&run),
        [(5_000, vec![(1, 0), (2, 0), (3, 0)], 4_000), (5_000, vec![(1, 1)], 3_000)]
    );
    let c = run.stats().counters;
    assert_eq!((c.gate_held, c.gate_hold_us), (2, 4_000 + 3_000));
    // ABI v1 asks once per `done` (four datagrams); the bundled spec is v2, which asks once
    // per `concast_run` into a state (five here: one run also stops at a datagram for
    // another bundle before its `done`); finishing a state reuses that answer.
    assert_eq!(asked.load(Ordering::Relaxed), 5);
}

#[test]
fn the_hold_ends_at_the_budget_and_an_idle_link_holds_nothing() {
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        gate(run, 50_000);
        run.at(1_000, &[ack(1, 2_500, 0)]);
        run.until(100_000);
        gate(run, 0); // idle from now on
        run.at(200_000, &[ack(2, 2_500, 0)]);
    });
    assert_eq!(out(&run), [(3_500, vec![(1, 0)], 2_500), (200_000, vec![(2, 0)], 0)]);
    assert_eq!(run.stats().counters.gate_held, 1);
}

#[test]
fn a_spec_that_gives_no_hold_limit_is_never_held() {
    // nak-suppress forwards at once and never calls hold_limit: the gate is not even asked.
    let asked = Arc::new(AtomicU64::new(0));
    let nak = make::concast(host(1), 17, 64, &make::udp(5000, 6000, b"NAK 1"));
    let mut run = Run::new(&Setup::params(""), |e| e.load_spec(&wasm("nak-suppress")).unwrap());
    let a = gate(&mut run, 1_000_000);
    run.at(1_000, &[nak]);
    run.until(10_000);
    asked.store(a.load(Ordering::Relaxed), Ordering::Relaxed);
    assert!(!run.forwarded().is_empty(), "forwarded without waiting for the link");
    assert_eq!(run.stats().counters.gate_held, 0);
    assert_eq!(asked.load(Ordering::Relaxed), 0);
}

#[test]
fn zero_delay_folds_the_read_batch_only_while_the_link_is_busy() {
    let batch = [ack(1, 20_000, 0), ack(2, 20_000, 0), ack(3, 20_000, 0)];
    // Idle link: nothing waits in its queue, so each ACK leaves as it came.
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        gate(run, 0);
        run.at(1_000, &batch);
        run.until(10_000);
    });
    let sizes: Vec<usize> = out(&run).iter().map(|(_, r, _)| r.len()).collect();
    assert_eq!(sizes, [1, 1, 1]);
    assert_eq!(run.stats().counters.taken, 0);
    // Busy for less than the timer lead: not held by the engine, but the spec folds the
    // rest of the batch into the first bundle (it would have waited in the link's queue).
    let run = both::<Multiplex>("multiplex", &Setup::params(""), |run| {
        run.engine.set_timer_lead(500);
        gate(run, 1_100);
        run.at(1_000, &batch);
        run.until(10_000);
    });
    assert_eq!(out(&run), [(1_000, vec![(1, 0), (2, 0), (3, 0)], 0)]);
    assert_eq!(run.stats().counters.taken, 2);
}
